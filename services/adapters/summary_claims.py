"""Which server summarises a session now, of the servers that share its store.

A compaction the store starts by itself (a threshold crossed, a view over its
budget, an overflow report) may ask a model for minutes. On several servers
behind a round-robin balancer the next turn of the session lands on another
server meanwhile, which would start its own summary of the same history: every
replica would pay the model, and all summaries but one be thrown away when they
find the first landed. A Compact call is no different: a client's retry that
the balancer sent to another server while the first try's model writes would
pay for the same summary twice. So the server that summarises first claims the
session; a Compact refused the claim answers so (ABORTED), to retry shortly.

On PostgreSQL the claim is a session-level advisory lock
(``pg_try_advisory_lock``, never the waiting form: a server refused goes on
without a summary of its own) on a connection of this pool, held for the
summary's whole length and released when it ends (landed, failed or raised).
The lock lives as long as its connection: a server killed in any way, or cut
off from the database, loses it when PostgreSQL ends its session (at once for
a process that dies; within the TCP keepalive of
services.adapters.postgres_timeouts for a host that vanished), and the next
compaction, on any server, claims the session again.

The pool is the claims' own, apart from the one requests use: at most ``size``
connections (the compaction runner's workers, so a claim never waits for
one), opened when first needed and kept for the next claim.

The key is a 64-bit hash of the store's schema and the session's stream id,
so stores in two schemas of one database never claim each other's sessions.

The claim saves model calls, not correctness: two summaries at once (a server
whose connection dropped mid-summary, say) are still recorded one after the
other, or the second refused, by the session's own rules.

SQLite and memory: stores are one server's (services.config): there is no other
process to leave a summary to, and ``OneServerClaims`` grants every claim.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg
import structlog

from domain.errors import Unavailable
from services.adapters.database_refusals import database_refusal
from services.adapters.postgres_availability import ResilientPostgresDatastore
from services.adapters.postgres_timeouts import connect_settings

log = structlog.get_logger(__name__)

# Set apart from the store's other advisory locks, all named by text.
KEY_NAMESPACE = "sessionstore.summary"
# How long a claim waits for a connection of the pool (only when more claims run
# at once than the pool holds, which the compaction runner's workers never do).
WAIT_FOR_CONNECTION_SECONDS = 10.0
OUTAGE = "the database is unreachable ({reason}) to claim the session's compaction; retry shortly"


def claim_key(schema: str, session_id: str) -> int:
    """The advisory lock key of a session of the store in ``schema``: a signed 64-bit
    hash (pg_try_advisory_lock's bigint)."""
    text = f"{KEY_NAMESPACE}\0{schema}\0{session_id}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big", signed=True)


class OneServerClaims:
    """A store only one server uses (SQLite, memory:): every claim is granted, since
    no other process summarises its sessions. The runner already runs one compaction
    at a time per session in this process."""

    @contextmanager
    def hold(self, session_id: str) -> Iterator[bool]:
        yield True

    def close(self) -> None:
        pass


class PostgresSummaryClaims:
    """Claims of the sessions of the store in ``schema``, each on a connection of its own
    (``connect_with``: psycopg.connect's keyword arguments), at most ``size`` at once."""

    def __init__(self, connect_with: Mapping[str, Any], schema: str, size: int) -> None:
        self._connect_with = {
            **connect_with,
            **connect_settings(),
            "autocommit": True,
            # Named, so that an operator finds the claims in pg_stat_activity.
            "application_name": f"sessionstore-compaction {socket.gethostname()} {os.getpid()}",
        }
        self._connect_with.pop("row_factory", None)
        self.schema = schema
        self._free = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[psycopg.Connection[Any]] = []
        self._busy: set[psycopg.Connection[Any]] = set()
        self._closed = False

    @classmethod
    def of(cls, datastore: ResilientPostgresDatastore, size: int) -> PostgresSummaryClaims:
        """Claims on the event store's database and schema (its pool's settings)."""
        kwargs = datastore.pool.kwargs if isinstance(datastore.pool.kwargs, dict) else {}
        return cls(kwargs, datastore.schema, size)

    @contextmanager
    def hold(self, session_id: str) -> Iterator[bool]:
        """Holds the session's claim for the block and yields True; yields False, holding
        nothing, while another connection (another server) holds it. Unavailable when
        the database cannot be asked."""
        key = claim_key(self.schema, session_id)
        conn = self._take()
        try:
            with self._asking():
                try:
                    taken = self._try_lock(conn, key)
                except psycopg.OperationalError:
                    # An idle connection the database ended meanwhile (a restart, say).
                    conn = self._renewed(conn)
                    taken = self._try_lock(conn, key)
        except BaseException:
            self._give_back(conn, healthy=False)
            raise
        if not taken:
            self._give_back(conn, healthy=True)
            yield False
            return
        try:
            yield True
        finally:
            self._give_back(conn, healthy=self._unlock(conn, key, session_id))

    def close(self) -> None:
        """Closes every connection, those holding a claim too (which frees it)."""
        with self._lock:
            self._closed = True
            connections = [*self._idle, *self._busy]
            self._idle.clear()
        for conn in connections:
            conn.close()

    # -- the pool ------------------------------------------------------------------------

    def _take(self) -> psycopg.Connection[Any]:
        if not self._free.acquire(timeout=WAIT_FOR_CONNECTION_SECONDS):
            raise Unavailable(
                f"no connection free to claim a session's compaction after "
                f"{WAIT_FOR_CONNECTION_SECONDS:g} s; retry shortly"
            )
        try:
            with self._lock:
                if self._closed:
                    raise Unavailable("the server is stopping; retry on another server")
                conn = self._idle.pop() if self._idle else None
            if conn is None or conn.closed:
                with self._asking():
                    conn = self._connect()
            return conn
        except BaseException:
            self._free.release()
            raise

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(**self._connect_with)
        with self._lock:
            self._busy.add(conn)
        return conn

    def _renewed(self, conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
        """A new connection in place of ``conn``, closed (in the same place in the pool)."""
        with self._lock:
            self._busy.discard(conn)
        conn.close()
        return self._connect()

    def _give_back(self, conn: psycopg.Connection[Any], *, healthy: bool) -> None:
        with self._lock:
            self._busy.discard(conn)
            keep = healthy and not self._closed and not conn.closed
            if keep:
                self._idle.append(conn)
        if not keep:
            conn.close()  # frees whatever it still held
        self._free.release()

    # -- the lock ------------------------------------------------------------------------

    def _try_lock(self, conn: psycopg.Connection[Any], key: int) -> bool:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        return bool(row and row[0])

    def _unlock(self, conn: psycopg.Connection[Any], key: int, session_id: str) -> bool:
        """Releases the claim; false when the connection could not say so (then closing
        it releases the claim, if the database has not already)."""
        if conn.closed:
            return False  # closed with the pool (the server stops): the claim went with it
        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            return True
        except psycopg.Error as error:
            log.info(
                "a compaction claim's connection was lost; closing it frees the claim",
                session=session_id,
                error=str(error).strip().splitlines()[0] if str(error).strip() else "",
            )
            return False

    @contextmanager
    def _asking(self) -> Iterator[None]:
        """Unavailable for a database that cannot be reached (or a grant lacking), saying
        so; any other error as it is (a fault)."""
        try:
            yield
        except psycopg.Error as error:
            refusal = database_refusal(error, OUTAGE, role=str(self._connect_with.get("user")))
            if refusal is None:
                raise
            raise refusal from error


def summary_claims(
    datastore: ResilientPostgresDatastore | None, size: int
) -> PostgresSummaryClaims | OneServerClaims:
    """The claims of a store: on PostgreSQL (``datastore``, its event store's), shared
    by every server on the database; on SQLite and memory: (None), this process's alone."""
    if datastore is None:
        return OneServerClaims()
    return PostgresSummaryClaims.of(datastore, size)
