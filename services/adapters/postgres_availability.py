"""PostgreSQL going away and coming back: fail fast while it is gone, recover at once.

The library's pool, left as it is, keeps a request waiting for a connection
for the whole connect timeout while the server is down, and reconnects with
an exponential back-off (1, 2, 4, 8, 16 s ...), so the first request after
the server returns can wait many seconds more. Here:

- the pool tries to reconnect every half second, however long the outage;
- a probe (a connection of its own, asked ``SELECT 1``) tells whether the
  server answers; while it does not, requests fail at once instead of
  waiting for a connection. A probe with no reply within a few seconds (a
  server frozen) counts as no answer, and is waited for, never asked again,
  until the server replies;
- every error that means "cannot talk to the database now" reaches the
  use cases as ``domain.errors.Unavailable``, which clients retry.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from typing import Any

import psycopg
from eventsourcing.persistence import OperationalError, PersistenceError
from eventsourcing.postgres import ConnectionPool, PostgresDatastore
from psycopg_pool import PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from domain.errors import Unavailable
from services import deadline
from services.adapters.database_errors import first_line
from services.adapters.database_refusals import database_refusal
from services.adapters.postgres_timeouts import PROBE_REPLY_SECONDS, connect_settings

RECONNECT_DELAY = 0.5
# How long a request waits for a connection between looks at the probe's verdict
# and at its call's cut.
WAIT_SLICE = 0.1


class _SteadyAttempt(AttemptWithBackoff):
    """Reconnects every half second (with a little jitter), never backing off further."""

    INITIAL_DELAY = RECONNECT_DELAY
    DELAY_BACKOFF = 1.0


class PoolBusy(PoolTimeout):
    """No connection came free in time, with as many open as the pool may have and all
    in use: the database answers, the server is busy (an outage all the same: retry)."""


class ProbeUnanswered(psycopg.OperationalError):
    """The server took the probe and gave no reply in time: its process frozen (stopped,
    stuck on its storage, its VM paused) or its packets dropped mid-query. A stopped
    process's kernel still acknowledges every packet: no timeout of libpq ends that wait."""


class SteadyReconnectPool(ConnectionPool[Any]):
    """The pool, reconnecting steadily, and failing fast while the server is known to be down."""

    unreachable: str = ""  # why the probe last failed; "" while the server answers
    # The error it failed with, which a refusal is raised from: a login refused is
    # told apart from a server that is down by it.
    unreachable_error: psycopg.Error | None = None

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        # Keep trying for as long as the outage lasts: giving up only shrinks
        # the pool, to be regrown once requests queue.
        super()._add_connection(
            attempt or _SteadyAttempt(timeout=self.reconnect_timeout), growing=growing
        )

    def known_outage(self) -> PoolTimeout | None:
        """What a request for a connection fails with at once while the probe finds the
        server unreachable (raised from the probe's error); None while it answers."""
        reason, error = self.unreachable, self.unreachable_error
        if not reason:
            return None
        outage = PoolTimeout(reason)
        outage.__cause__ = error
        return outage

    def getconn(self, timeout: float | None = None) -> Any:
        total = self.timeout if timeout is None else timeout
        give_up_at = time.monotonic() + deadline.bounded(total)
        while True:
            outage = self.known_outage()
            if outage is not None:
                raise outage
            left = give_up_at - time.monotonic()
            try:
                return super().getconn(timeout=max(0.001, min(WAIT_SLICE, left)))
            except PoolTimeout:
                # Each slice, not only at the end: a call cut (its client gone, the
                # server stopping) leaves now rather than after the pool's timeout.
                deadline.check("waiting for a database connection")
                if time.monotonic() >= give_up_at:
                    raise self._none_free(total) from None

    def _none_free(self, waited: float) -> PoolTimeout:
        """What a wait for a connection that came to nothing says: all of them busy, or
        (the pool short of its size) connections that could not be made in time."""
        if self.get_stats().get("pool_size", 0) >= self.max_size:
            return PoolBusy(
                f"no database connection free within {waited:.1f} s: all {self.max_size} "
                "of this server's connections are in use (pool_size and max_overflow in "
                "the database URL set how many)"
            )
        return PoolTimeout(f"no connection free after {waited:.2f} s")


class ResilientPostgresDatastore(PostgresDatastore):
    """The library's datastore, saying Unavailable for every failure to reach the
    database, and for tables this release uses missing or a grant the role lacks,
    saying what an operator must do (services.adapters.database_refusals)."""

    pool: SteadyReconnectPool

    @property
    def role(self) -> str:
        """The role the pool connects as (the configuration always names one)."""
        kwargs = self.pool.kwargs if isinstance(self.pool.kwargs, dict) else {}
        return str(kwargs.get("user", ""))

    @contextmanager
    def get_connection(self) -> Iterator[Any]:
        try:
            with super().get_connection() as conn:
                yield conn
        except PersistenceError as error:
            refusal = database_refusal(error, _outage(error), role=self.role)
            if refusal is None:
                raise  # a statement the database rejects: the caller's, or a fault
            raise refusal from error

    def known_outage(self) -> Unavailable | None:
        """The refusal a request meets at once while the probe finds the server
        unreachable, worded as get_connection words the pool's fast failure (so that
        clients retry it alike); None while the server answers. For waits that a
        request blocked on the server would hold as long as it stays away."""
        outage = self.pool.known_outage()
        if outage is None:
            return None
        # As the library wraps the pool's failure before get_connection sees it.
        failure = OperationalError(str(outage))
        failure.__cause__ = outage
        refusal = database_refusal(failure, _outage(failure), role=self.role)
        return refusal or Unavailable(_outage(failure).format(reason=first_line(failure)))


def make_resilient(datastore: PostgresDatastore) -> None:
    """Turns the library's datastore, before its pool opens, into a resilient one.

    The library builds both from its environment settings; only their
    behaviour changes here, so the classes are swapped rather than rebuilt.
    """
    assert datastore.pool.closed, "the pool must not be open yet"
    datastore.__class__ = ResilientPostgresDatastore
    datastore.pool.__class__ = SteadyReconnectPool
    # Bounded connection attempts, so a server that drops packets does not
    # hold the pool's workers for minutes; keepalives, so that a connection
    # to a server that vanished is dropped rather than waited on.
    kwargs = datastore.pool.kwargs
    if isinstance(kwargs, dict):
        for name, value in connect_settings().items():
            kwargs.setdefault(name, value)


def _outage(error: Exception) -> str:
    """What an outage behind ``error`` is called, with ``{reason}`` to fill in."""
    cause = error.__cause__
    if isinstance(cause, PoolBusy):
        return "{reason}; retry shortly"  # the database answers: it says so itself
    if isinstance(cause, PoolTimeout) and isinstance(cause.__cause__, ProbeUnanswered):
        return "the database does not answer ({reason}); retry shortly"
    sqlstate = getattr(cause, "sqlstate", None)
    if isinstance(cause, PoolTimeout) or sqlstate is None or sqlstate[:2] in ("08", "57"):
        return "the database is unreachable ({reason}); retry shortly"
    return "the database could not serve the request now ({reason}); retry shortly"


class PostgresProbe:
    """Asks the server ``SELECT 1`` on a connection of its own, reconnecting when needed.

    The question is asked in a thread of its own, and waited for no longer than
    ``reply_within``: a server that does not reply by then counts as unreachable, so
    that requests are refused at once rather than blocked on it. The question left
    unanswered is waited for again at the next check, never asked twice: however long
    the server stays frozen, one thread waits on it, and its reply ends the outage.
    """

    def __init__(
        self, datastore: ResilientPostgresDatastore, reply_within: float = PROBE_REPLY_SECONDS
    ) -> None:
        self._datastore = datastore
        self._reply_within = reply_within
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()  # one check at a time
        # The question asked and not yet answered; its thread alone uses the connection.
        self._asking: Future[psycopg.Error | None] | None = None
        self._closing = threading.Lock()  # the connection's hand-over at close
        self._closed = False

    def check(self) -> str:
        """Empty when the server answers, else why not; tells the pool."""
        with self._lock:
            if self._asking is None:
                self._asking = self._ask_in_thread()
            try:
                error = self._asking.result(timeout=self._reply_within)
            except FutureTimeout:
                error = ProbeUnanswered(f"no reply to a probe within {self._reply_within:g} s")
            finally:
                if self._asking.done():
                    self._asking = None
        reason = first_line(error) if error is not None else ""
        pool = self._datastore.pool
        pool.unreachable_error = error
        pool.unreachable = reason
        return reason

    def _ask_in_thread(self) -> Future[psycopg.Error | None]:
        asking: Future[psycopg.Error | None] = Future()

        def ask() -> None:
            try:
                error = self._ask()
                pool = self._datastore.pool
                if (error is None) == bool(pool.unreachable):
                    # Going down: drop the connections that broke. Coming back: test
                    # those that were idle all along, before a request may have one.
                    # Here, not in check: on a server that froze this waits too.
                    pool.check()
            except BaseException as failure:  # a fault: the check raises it
                asking.set_exception(failure)
            else:
                asking.set_result(error)
            finally:
                with self._closing:
                    if self._closed:
                        self._disconnect()  # closed while asking: nobody else may

        # A daemon: a thread blocked on a frozen server must not hold the process at exit.
        threading.Thread(target=ask, name="postgres-probe", daemon=True).start()
        return asking

    def _ask(self) -> psycopg.Error | None:
        """None when the server answers, else the error it failed with."""
        try:
            if self._conn is None or self._conn.closed:
                kwargs = dict(self._datastore.pool.kwargs)  # type: ignore[arg-type]
                kwargs.pop("row_factory", None)  # the pool's settings, connect_settings among them
                self._conn = psycopg.connect(autocommit=True, **kwargs)
            self._conn.execute("SELECT 1")
            return None
        except psycopg.Error as error:
            self._disconnect()
            return error

    def _disconnect(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Closes the probe's connection; one a question still waits on (the server
        frozen) is closed by the thread that asked, once answered: closing it under
        that thread would free what libpq is using."""
        with self._closing:
            self._closed = True
            asking = self._asking
            if asking is None or asking.done():
                self._disconnect()
