"""PostgreSQL going away and coming back: fail fast while it is gone, recover at once.

The library's pool, left as it is, keeps a request waiting for a connection
for the whole connect timeout while the server is down, and reconnects with
an exponential back-off (1, 2, 4, 8, 16 s ...), so the first request after
the server returns can wait many seconds more. Here:

- the pool tries to reconnect every half second, however long the outage;
- a probe (a connection of its own, asked ``SELECT 1``) tells whether the
  server answers; while it does not, requests fail at once instead of
  waiting for a connection;
- every error that means "cannot talk to the database now" reaches the
  use cases as ``domain.errors.Unavailable``, which clients retry.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from eventsourcing.persistence import PersistenceError
from eventsourcing.postgres import ConnectionPool, PostgresDatastore
from psycopg_pool import PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from services import deadline
from services.adapters.database_errors import first_line
from services.adapters.database_refusals import database_refusal
from services.adapters.postgres_timeouts import connect_settings

RECONNECT_DELAY = 0.5
# How long a request waits for a connection between looks at the probe's verdict.
WAIT_SLICE = 0.1


class _SteadyAttempt(AttemptWithBackoff):
    """Reconnects every half second (with a little jitter), never backing off further."""

    INITIAL_DELAY = RECONNECT_DELAY
    DELAY_BACKOFF = 1.0


class PoolBusy(PoolTimeout):
    """No connection came free in time, with as many open as the pool may have and all
    in use: the database answers, the server is busy (an outage all the same: retry)."""


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

    def getconn(self, timeout: float | None = None) -> Any:
        total = self.timeout if timeout is None else timeout
        give_up_at = time.monotonic() + deadline.bounded(total)
        while True:
            if self.unreachable:
                raise PoolTimeout(self.unreachable) from self.unreachable_error
            left = give_up_at - time.monotonic()
            try:
                return super().getconn(timeout=max(0.001, min(WAIT_SLICE, left)))
            except PoolTimeout:
                if time.monotonic() >= give_up_at:
                    deadline.check("waiting for a database connection")
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
    sqlstate = getattr(cause, "sqlstate", None)
    if isinstance(cause, PoolTimeout) or sqlstate is None or sqlstate[:2] in ("08", "57"):
        return "the database is unreachable ({reason}); retry shortly"
    return "the database could not serve the request now ({reason}); retry shortly"


class PostgresProbe:
    """Asks the server ``SELECT 1`` on a connection of its own, reconnecting when needed."""

    def __init__(self, datastore: ResilientPostgresDatastore) -> None:
        self._datastore = datastore
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    def check(self) -> str:
        """Empty when the server answers, else why not; tells the pool, refreshing it on return."""
        with self._lock:
            error = self._ask()
        reason = first_line(error) if error is not None else ""
        pool = self._datastore.pool
        was_down = bool(pool.unreachable)
        pool.unreachable_error = error
        pool.unreachable = reason
        if bool(reason) != was_down:
            # Going down: drop the connections that broke. Coming back: test
            # those that were idle all along, so no request gets a dead one.
            pool.check()
        return reason

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
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            return error

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
