"""The database monitor: the health status follows the database (reachable, and
not damaged), idempotency keys expire, and sessions erased elsewhere leave this
server's caches."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import structlog
from grpc_health.v1 import health_pb2

from domain.errors import DatabaseCorrupt
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.app.sessions import SessionService
from services.logs import StateLog

SERVICE = pb.DESCRIPTOR.services_by_name["SessionStore"]
SERVICE_NAME = SERVICE.full_name
MONITOR_INTERVAL_SECONDS = 0.5
KEY_EXPIRY_INTERVAL_SECONDS = 60.0

log = structlog.get_logger(__name__)


class DatabaseMonitor:
    """Probes the database every interval; health says NOT_SERVING while it is
    unreachable, and from the moment the store meets damage (noticed) on.

    Now and then it also deletes the idempotency keys past their TTL, and each
    interval drops the cached copies of sessions erased since.

    The probe also tells the store, so that requests fail at once (UNAVAILABLE)
    instead of waiting for a connection, and recover as soon as it answers.
    It runs on the server's event loop; the probe itself, which blocks (a few
    seconds at most: a database that gives no reply by then counts as unreachable),
    in a thread of the loop's own. The erasures and keys are seen to beside the
    probes, not waited for, so that a database that freezes meanwhile is told all
    the same.
    """

    def __init__(
        self,
        service: SessionService,
        health_servicer: Any,
        interval: float = MONITOR_INTERVAL_SECONDS,
    ) -> None:
        self._service = service
        self._health = health_servicer
        self._interval = interval
        self._task: asyncio.Task[None] | None = None
        # Looking for erasures, expiring keys: one round at a time, beside the probes.
        self._chores: asyncio.Task[None] | None = None
        self.reason = ""  # why health says NOT_SERVING; "" while SERVING
        # What a damaged database was refused with, once met: kept for good.
        self._damage = ""
        # A look that fails each interval is said when it starts failing and when
        # it works again, not every half second.
        self._erasures = StateLog(log, "could not look for erasures", "looking for erasures again")

    def noticed(self, error: BaseException) -> None:
        """Told what a call was refused with (by the error layer; the monitor's own
        looks tell it too): a damaged database (DatabaseCorrupt) turns health
        NOT_SERVING at the next look, until the server restarts.

        Orchestrators route by health, and a server whose database is damaged
        cannot answer what reads the damage. Damage does not heal, and no cheap look
        tells it gone: a page read fine says nothing of the page that was not (only
        `PRAGMA integrity_check`, or amcheck, reads them all, too slow to run each
        interval on a large store). The servers restart once it is restored (as a
        SQLite file must be, its servers stopped) or the index rebuilt."""
        if isinstance(error, DatabaseCorrupt) and not self._damage:
            self._damage = str(error)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        for task in (self._task, self._chores):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _run(self) -> None:
        expire_at = time.monotonic() + KEY_EXPIRY_INTERVAL_SECONDS
        while True:
            await asyncio.sleep(self._interval)
            try:
                # Bounded: a server that does not reply counts as unreachable.
                reason = await asyncio.to_thread(self._service.store.probe)
            except Exception as error:  # a probe must never end the monitor
                reason = str(error) or type(error).__name__
            if not reason and (self._chores is None or self._chores.done()):
                expire = time.monotonic() >= expire_at
                if expire:
                    expire_at = time.monotonic() + KEY_EXPIRY_INTERVAL_SECONDS
                # Not waited for: a database that froze since the probe would hold
                # them, and the monitor with them, unable to tell it.
                self._chores = asyncio.get_running_loop().create_task(self._do_chores(expire))
            # Unreachable first: that is what a call is answered meanwhile.
            reason = reason or self._damage
            if reason == self.reason:
                continue
            self._log_change(reason)
            self.reason = reason
            await set_health(self._health, serving=not reason)

    async def _do_chores(self, expire_keys: bool) -> None:
        await asyncio.to_thread(self._forget_erased)
        if expire_keys:
            await asyncio.to_thread(self._expire_keys)

    def _log_change(self, reason: str) -> None:
        if reason and reason == self._damage:
            log.error("database damaged; NOT_SERVING until the server restarts", reason=reason)
        elif reason and self.reason in ("", self._damage):
            log.warning("database unreachable; answering UNAVAILABLE", reason=reason)
        elif not reason:
            log.info("database reachable again; serving")

    def _forget_erased(self) -> None:
        # A session erased by another server may sit in this one's caches
        # without ever being read again: drop it all the same.
        try:
            self._service.forget_erased()
        except Exception as error:
            self.noticed(error)
            self._erasures.failed(str(error) or type(error).__name__, exc_info=True)
        else:
            self._erasures.ok()

    def _expire_keys(self) -> None:
        try:
            expired = self._service.expire_idempotency_keys()
        except Exception as error:
            self.noticed(error)
            log.exception("could not delete expired idempotency keys")
            return
        if expired:
            log.info("deleted expired idempotency keys", count=expired)


async def set_health(servicer: Any, *, serving: bool) -> None:
    status = (
        health_pb2.HealthCheckResponse.SERVING
        if serving
        else health_pb2.HealthCheckResponse.NOT_SERVING
    )
    for name in ("", SERVICE_NAME):
        await servicer.set(name, status)
