"""A PostgreSQL host that stops answering (its packets dropped, not refused): the read
models' queries say the database is unreachable within the connect timeout the event
store's connections use, rather than waiting on it for as long as the OS would (for
good, once TCP is up and the startup packet goes unanswered), holding a connection of
the pool meanwhile.

The host is a listening socket on loopback that never accepts: the kernel completes
TCP's handshake, libpq sends its first packet and waits for an answer that never
comes, as it would on a host that went silent after the handshake."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from domain.errors import Unavailable
from services.adapters.event_store import EventStore
from services.adapters.postgres_timeouts import (
    CONNECT_TIMEOUT_SECONDS,
    KEEPALIVE,
    TCP_USER_TIMEOUT_MS,
)
from services.adapters.read_model_db import connect_postgres, open_database
from services.adapters.read_model_queries import CatalogFilter, ReadModelQueries
from services.config import persistence_env

# Far below the OS's wait (minutes for a SYN unanswered; none at all for a startup
# packet unanswered), with room for a loaded machine.
BOUND_SECONDS = CONNECT_TIMEOUT_SECONDS + 3


@contextmanager
def silent_postgres_url() -> Iterator[str]:
    """The URL of a PostgreSQL "server" that takes connections and never answers."""
    with closing(socket.create_server(("127.0.0.1", 0), backlog=16)) as listener:
        yield f"postgresql://sessionstore@127.0.0.1:{listener.getsockname()[1]}/sessions"
    # Closed: a connection still waiting on it (one without a timeout) is reset.


def _within_bound(call: Callable[[], Any]) -> tuple[BaseException | None, float]:
    """What ``call`` raised (None if nothing) and how long it took; it must end
    within BOUND_SECONDS (else the test fails, and the connection waiting is reset
    when the listener closes)."""
    worker = ThreadPoolExecutor(1)
    try:
        started = time.monotonic()
        error = worker.submit(call).exception(timeout=BOUND_SECONDS)
        return error, time.monotonic() - started
    finally:
        worker.shutdown(wait=False)


def test_a_read_model_query_on_a_host_that_never_answers_is_unavailable_at_once() -> None:
    with silent_postgres_url() as url:
        database = open_database(url)
        try:
            listing = ReadModelQueries(database)
            error, waited = _within_bound(lambda: listing.sessions(CatalogFilter(), 10, ""))
            assert type(error) is Unavailable  # UNAVAILABLE, reason unavailable
            assert str(error) == (
                "the database is unreachable (connection timeout expired); retry shortly"
            )
            assert waited >= CONNECT_TIMEOUT_SECONDS - 0.5

            # The projection's writer and the worker's own connections (LISTEN, the
            # lease) give up as soon.
            def write() -> None:
                with database.writer.begin() as connection:
                    connection.exec_driver_sql("SELECT 1")

            error, _ = _within_bound(write)
            assert isinstance(getattr(error, "orig", None), psycopg.errors.ConnectionTimeout)
            error, _ = _within_bound(lambda: connect_postgres(database).close())
            assert isinstance(error, psycopg.errors.ConnectionTimeout)
        finally:
            database.dispose()


def _keepalive(connection: psycopg.Connection[Any]) -> tuple[str, int, int]:
    """The server's keepalive idle time for ``connection``, its client socket's, and how
    long that socket lets data go unacknowledged (ms)."""
    row = connection.cursor(row_factory=tuple_row).execute("SHOW tcp_keepalives_idle").fetchone()
    with closing(socket.socket(fileno=connection.fileno())) as sock:
        try:
            return (
                str(row[0] if row else ""),
                sock.getsockopt(socket.SOL_TCP, socket.TCP_KEEPIDLE),
                sock.getsockopt(socket.SOL_TCP, socket.TCP_USER_TIMEOUT),
            )
        finally:
            sock.detach()  # the connection's own descriptor, left open


def test_the_read_models_connections_keep_alive_as_the_event_stores(
    postgres_schema_url: str,
) -> None:
    """Every connection to the store's database, of the event store's pool as of the
    read models' engines and own connections, notices a host gone silent the same way:
    the server ends the session of a client that vanished (freeing its locks), the
    client drops a connection to a server that vanished instead of waiting on it, and
    one whose statement goes unacknowledged (packets dropped, a VM paused) as soon."""
    expected = (
        str(KEEPALIVE["keepalives_idle"]),
        KEEPALIVE["keepalives_idle"],
        TCP_USER_TIMEOUT_MS,
    )
    events = EventStore(persistence_env(postgres_schema_url))
    database = open_database(postgres_schema_url)
    try:
        with events.recorder.datastore.get_connection() as connection:
            assert _keepalive(connection) == expected
        for engine in (database.reader, database.writer):
            with engine.connect() as connection:
                raw = connection.connection.driver_connection
                assert isinstance(raw, psycopg.Connection)
                assert _keepalive(raw) == expected
        with connect_postgres(database) as own:
            assert _keepalive(own) == expected
    finally:
        database.dispose()
        events.close()
