"""The raw limit: single-row inserts straight into the database, by 1 to N clients.

The table has the shape of the store's events table (originator_id text,
originator_version bigint, topic text, state bytes, keyed on the first two),
each insert commits on its own, and rows carry a state of the size a one-turn
append stores. This is what writers can do with no store in between; the
store's appends are compared with it in the same run, with as many clients
(several clients' commits share the database's WAL flushes, so the raw rate
grows with them, and so should the store's).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
from eventsourcing.persistence import StoredEvent

from services.adapters.event_store import EventStore
from services.config import persistence_env
from tests.bench.server import Database

# About what a one-turn append stores as event state (one user entry, measured: ~550).
STATE_BYTES = 550
TOPIC = "domain.session:Session.EntriesAppended"


def inserts_per_second(db: Database, seconds: float, clients: int = 1) -> float:
    """Single-row autocommit inserts per second for ``seconds``, by ``clients``
    threads at once, each on a connection of its own."""
    connect: Callable[[], psycopg.Connection | sqlite3.Connection]
    if db.backend == "postgres":
        connect, statement = _postgres(db), "INSERT INTO raw_events VALUES (%s, %s, %s, %s)"
    else:
        connect, statement = _sqlite(db), "INSERT INTO raw_events VALUES (?, ?, ?, ?)"
    state = os.urandom(STATE_BYTES)
    counts = [0] * clients
    # Every client connects before the clock starts, as the store's pool has.
    connections = [connect() for _ in range(clients)]
    ready = threading.Barrier(clients + 1)
    finished = [0.0]

    def client(n: int) -> None:
        conn, originator = connections[n], f"raw-{n}-{time.monotonic_ns()}"
        ready.wait()
        deadline = finished[0]
        while time.perf_counter() < deadline:
            counts[n] += 1
            _execute(conn, statement, (originator, counts[n], TOPIC, state))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    finished[0] = started + seconds
    ready.wait()
    try:
        for thread in threads:
            thread.join()
    finally:
        for conn in connections:
            conn.close()
    return sum(counts) / (time.perf_counter() - started)


def _execute(conn: psycopg.Connection | sqlite3.Connection, statement: str, row: tuple) -> None:
    if isinstance(conn, sqlite3.Connection):
        conn.execute(statement, row)
    else:
        # Prepared, as the store's recorder prepares its statements.
        conn.execute(statement, row, prepare=True)


def _postgres(db: Database) -> Callable[[], psycopg.Connection]:
    with db.psycopg_connect(autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS raw_events (originator_id text, "
            "originator_version bigint, topic text, state bytea, "
            "PRIMARY KEY (originator_id, originator_version))"
        )
    return lambda: db.psycopg_connect(autocommit=True)


def _sqlite(db: Database) -> Callable[[], sqlite3.Connection]:
    # A file of its own beside the store's, on the same disk: the store's
    # database stays untouched, and the journal settings can be set alike.
    path = Path(db.path).with_name("raw.db")
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        # The eventsourcing SQLite recorder switches file databases to WAL and
        # leaves synchronous at its default; do the same.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS raw_events (originator_id text, "
            "originator_version integer, topic text, state blob, "
            "PRIMARY KEY (originator_id, originator_version))"
        )
    # Autocommit: one commit per insert. SQLite lets one writer in at a time;
    # the others wait for it (as the store's own writers do), not fail.
    return lambda: sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)


def locked_batches_per_second(db: Database, seconds: float, connections: int) -> float:
    """Transactions per second, from ``connections`` clients at once, each doing what
    a save of one batch did while a table lock ordered the log: lock the events
    table (EXCLUSIVE), insert, NOTIFY, commit, sent in one round trip. The lock
    lets one commit at a time, whatever the clients."""
    assert db.backend == "postgres"
    state = os.urandom(STATE_BYTES)
    with db.psycopg_connect(autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS raw_events (originator_id text, "
            "originator_version bigint, topic text, state bytea, "
            "PRIMARY KEY (originator_id, originator_version))"
        )
    connections_made = [db.psycopg_connect() for _ in range(connections)]

    def save(n: int, originator: str, version: int) -> None:
        conn = connections_made[n]
        with conn.pipeline(), conn.transaction():
            conn.execute("LOCK TABLE raw_events IN EXCLUSIVE MODE")
            conn.execute(
                "INSERT INTO raw_events VALUES (%s, %s, %s, %s)",
                (originator, version, TOPIC, state),
            )
            conn.execute("NOTIFY raw_events")

    try:
        return _per_second(connections, seconds, save)
    finally:
        for conn in connections_made:
            conn.close()


def store_saves_per_second(db: Database, seconds: float, connections: int) -> float:
    """Saves per second through the store's own recorder (one event each, as a
    one-turn append saves), from ``connections`` threads at once, with no server:
    the database's ceiling for the store's saves, which take no lock that another
    save waits for (services.adapters.postgres_ordering)."""
    assert db.backend == "postgres"
    store = EventStore(persistence_env(db.url))
    state = os.urandom(STATE_BYTES)

    def save(_: int, originator: str, version: int) -> None:
        event = StoredEvent(
            originator_id=originator, originator_version=version, topic=TOPIC, state=state
        )
        store.recorder.insert_events([event])

    try:
        return _per_second(connections, seconds, save)
    finally:
        store.close()


def _per_second(clients: int, seconds: float, save: Callable[[int, str, int], None]) -> float:
    """Calls of ``save(client, originator, version)`` per second, from ``clients``
    threads at once for ``seconds``, each saving versions 1, 2, ... of its own
    originator."""
    counts = [0] * clients
    deadline = time.perf_counter() + seconds

    def client(n: int) -> None:
        originator = f"client-{n}-{time.monotonic_ns()}"
        while time.perf_counter() < deadline:
            counts[n] += 1
            save(n, originator, counts[n])

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)
