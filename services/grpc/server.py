"""The gRPC server: the session store, health checking and reflection.

`python -m services.grpc.server` serves until SIGTERM or SIGINT, then stops taking
calls, lets running ones finish (within a grace period) and closes the store.
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading
import time
from concurrent import futures
from dataclasses import dataclass

import grpc
import psycopg
import structlog
from eventsourcing.persistence import PersistenceError
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from pydantic import ValidationError

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.adapters.tokenizers import tokenizer_for
from services.app.sessions import SessionService
from services.bootstrap import Application, build_application
from services.config import Config
from services.grpc.deadlines import DeadlineInterceptor
from services.grpc.errors import ErrorInterceptor
from services.grpc.reflection import enable_reflection
from services.grpc.servicer import SessionStoreServicer

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["SessionStore"].full_name
GRACE_SECONDS = 10
MONITOR_INTERVAL_SECONDS = 0.5
KEY_EXPIRY_INTERVAL_SECONDS = 60.0
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}

log = structlog.get_logger(__name__)


def configure_logging(config: Config) -> None:
    renderer = (
        structlog.processors.JSONRenderer()
        if config.log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr, format="%(message)s")
    # While the database is down the pool retries every half second per
    # connection and warns each time; the database monitor says it once.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelName(config.log_level.upper())
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


class DatabaseMonitor:
    """Probes the database every interval; health says NOT_SERVING while it is unreachable.

    Now and then it also deletes the idempotency keys past their TTL.

    The probe also tells the store, so that requests fail at once (UNAVAILABLE)
    instead of waiting for a connection, and recover as soon as it answers.
    """

    def __init__(
        self,
        service: SessionService,
        health_servicer: health.HealthServicer,
        interval: float = MONITOR_INTERVAL_SECONDS,
    ) -> None:
        self._service = service
        self._health = health_servicer
        self._interval = interval
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="database-monitor", daemon=True)
        self.reason = ""

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()

    def _run(self) -> None:
        expire_at = time.monotonic() + KEY_EXPIRY_INTERVAL_SECONDS
        while not self._stopping.wait(self._interval):
            try:
                reason = self._service.store.probe()
            except Exception as error:  # a probe must never end the monitor
                reason = str(error) or type(error).__name__
            if not reason and time.monotonic() >= expire_at:
                expire_at = time.monotonic() + KEY_EXPIRY_INTERVAL_SECONDS
                self._expire_keys()
            if reason == self.reason:
                continue
            if reason and not self.reason:
                log.warning("database unreachable; answering UNAVAILABLE", reason=reason)
            elif not reason:
                log.info("database reachable again; serving")
            self.reason = reason
            status = (
                health_pb2.HealthCheckResponse.NOT_SERVING
                if reason
                else health_pb2.HealthCheckResponse.SERVING
            )
            for name in ("", SERVICE_NAME):
                self._health.set(name, status)

    def _expire_keys(self) -> None:
        try:
            expired = self._service.expire_idempotency_keys()
        except Exception:
            log.exception("could not delete expired idempotency keys")
            return
        if expired:
            log.info("deleted expired idempotency keys", count=expired)


@dataclass
class RunningServer:
    server: grpc.Server
    app: Application
    health: health.HealthServicer
    port: int
    monitor: DatabaseMonitor

    @property
    def service(self) -> SessionService:
        return self.app.sessions

    def stop(self, grace: float = GRACE_SECONDS) -> None:
        self.monitor.stop()
        self.health.enter_graceful_shutdown()
        # Followed streams never end by themselves: end them first, so that
        # the grace period is for calls that do.
        self.service.end_streams()
        self.server.stop(grace).wait()
        self.app.close()


def start(config: Config) -> RunningServer:
    """Starts serving in background threads and returns at once."""
    if not structlog.is_configured():
        configure_logging(config)  # else log lines would go to stdout
    app = build_application(config)
    service = app.sessions
    # Fail now if the database cannot be reached, and open its connection
    # pool, rather than in the first request.
    service.store.recorder.max_notification_id()
    # Likewise load the default model's tokenizer (a few tenths of a second
    # and its tables' memory).
    tokenizer_for(config.default_model).count_text("warm up")
    _tune_interpreter()
    max_message = config.max_message_mb << 20
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=config.max_workers, thread_name_prefix="rpc"),
        interceptors=[ErrorInterceptor(), DeadlineInterceptor()],
        options=[
            ("grpc.max_receive_message_length", max_message),
            ("grpc.max_send_message_length", max_message),
            # grpcio shares a port between processes by default: a second
            # server on a taken address would start and split the traffic.
            ("grpc.so_reuseport", 0),
        ],
    )
    if app.read_models is not None:
        # Catch up before serving, then follow the store in the background.
        app.read_models.start()
    pb_grpc.add_SessionStoreServicer_to_server(
        SessionStoreServicer(service, app.context, app.read_models), server
    )
    health_servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    enable_reflection(
        (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name), server
    )
    try:
        port = server.add_insecure_port(config.address)
    except RuntimeError:
        port = 0
    if port == 0:
        app.close()
        raise OSError(f"cannot listen on {config.address}: is another server using it?")
    server.start()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    monitor = DatabaseMonitor(service, health_servicer)
    monitor.start()
    return RunningServer(server, app, health_servicer, port, monitor)


SWITCH_INTERVAL_SECONDS = 0.001


def _tune_interpreter() -> None:
    # Cached session histories are many long-lived objects without reference
    # cycles. With the default thresholds the collector scans them again and
    # again while a long session is folded, which made a cold prompt view a
    # third slower. Collect young objects less often, and leave what start-up
    # made (modules, tokenizer tables) out of every scan.
    gc.set_threshold(50_000, 20, 100)
    gc.freeze()
    # A request thread whose database reply has come waits for the interpreter
    # lock while another thread (the projection, the gRPC poller) computes: by
    # default up to 5 ms, longer than a whole turn. Hand it over sooner.
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)


def main() -> None:
    # Stop signals are taken synchronously by sigwait below instead of by a
    # handler: a handler runs between any two bytecodes of the main thread,
    # and one that logs or sets an Event can deadlock on a lock that thread
    # holds (structlog's print lock is not re-entrant, and `uv run` forwards
    # SIGTERM while the process group gets one too). Blocked before any
    # thread starts, so every thread inherits the mask.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        config = Config()
    except ValidationError as error:
        sys.exit(f"sessionstore: invalid configuration in the SESSIONSTORE_* variables:\n{error}")
    configure_logging(config)
    try:
        running = start(config)
    except (OSError, ValueError, PersistenceError, psycopg.Error) as error:
        # A misconfigured or unreachable database, or a taken address: say
        # which, without a traceback, and do not serve.
        log.error("cannot start", reason=str(error), database=_redacted(config.database_url))
        sys.exit(1)
    log.info(
        "serving",
        address=config.address,
        database=_redacted(config.database_url),
    )
    received = signal.sigwait(STOP_SIGNALS)
    log.info("shutting down", signal=signal.Signals(received).name, grace_seconds=GRACE_SECONDS)
    # Signals that arrive from here on stay blocked and pending: the stop
    # below is bounded by the grace period whatever else arrives.
    running.stop()
    log.info("stopped")


def _redacted(database_url: str) -> str:
    from urllib.parse import urlparse

    url = urlparse(database_url)
    if url.password:
        return database_url.replace(f":{url.password}@", ":***@")
    return database_url


if __name__ == "__main__":
    main()
