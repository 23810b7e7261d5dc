"""The raw limit: single-row inserts straight into the database, one client.

The table has the shape of the store's events table (originator_id text,
originator_version bigint, topic text, state bytes, keyed on the first two),
each insert commits on its own, and rows carry a state of the size a one-turn
append stores. This is what one writer can do with no store in between; the
store's appends are compared with it in the same run.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

from tests.bench.server import Database

# About what a one-turn append stores as event state (one user entry, measured: ~550).
STATE_BYTES = 550
TOPIC = "domain.session:Session.EntriesAppended"


def inserts_per_second(db: Database, seconds: float) -> float:
    """Single-row autocommit inserts per second for ``seconds``, one client."""
    if db.backend == "postgres":
        return _postgres(db, seconds)
    return _sqlite(db, seconds)


def _postgres(db: Database, seconds: float) -> float:
    state = os.urandom(STATE_BYTES)
    with db.psycopg_connect(autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS raw_events (originator_id text, "
            "originator_version bigint, topic text, state bytea, "
            "PRIMARY KEY (originator_id, originator_version))"
        )
        originator = f"raw-{time.monotonic_ns()}"
        # Prepared, as the store's recorder prepares its statements.
        statement = "INSERT INTO raw_events VALUES (%s, %s, %s, %s)"
        count = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            count += 1
            conn.execute(statement, (originator, count, TOPIC, state), prepare=True)
        return count / (time.perf_counter() - started)


def _sqlite(db: Database, seconds: float) -> float:
    state = os.urandom(STATE_BYTES)
    # A file of its own beside the store's, on the same disk: the store's
    # database stays untouched, and the journal settings can be set alike.
    path = Path(db.path).with_name("raw.db")
    conn = sqlite3.connect(path, isolation_level=None)  # autocommit: one commit per insert
    try:
        # The eventsourcing SQLite recorder switches file databases to WAL and
        # leaves synchronous at its default; do the same.
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS raw_events (originator_id text, "
            "originator_version integer, topic text, state blob, "
            "PRIMARY KEY (originator_id, originator_version))"
        )
        originator = f"raw-{time.monotonic_ns()}"
        count = 0
        started = time.perf_counter()
        deadline = started + seconds
        while time.perf_counter() < deadline:
            count += 1
            conn.execute(
                "INSERT INTO raw_events VALUES (?, ?, ?, ?)", (originator, count, TOPIC, state)
            )
        return count / (time.perf_counter() - started)
    finally:
        conn.close()


def locked_batches_per_second(db: Database, seconds: float, connections: int) -> float:
    """Transactions per second, from ``connections`` clients at once, each doing what
    the store's save of one batch does: lock the events table (EXCLUSIVE), insert,
    NOTIFY, commit, sent in one round trip. The lock lets one commit at a time,
    so this is the database's ceiling for batches, whatever the servers."""
    assert db.backend == "postgres"
    state = os.urandom(STATE_BYTES)
    with db.psycopg_connect(autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS raw_events (originator_id text, "
            "originator_version bigint, topic text, state bytea, "
            "PRIMARY KEY (originator_id, originator_version))"
        )
    counts = [0] * connections
    deadline = time.perf_counter() + seconds

    def client(n: int) -> None:
        originator = f"locked-{n}-{time.monotonic_ns()}"
        with db.psycopg_connect() as conn:
            while time.perf_counter() < deadline:
                counts[n] += 1
                with conn.pipeline(), conn.transaction():
                    conn.execute("LOCK TABLE raw_events IN EXCLUSIVE MODE")
                    conn.execute(
                        "INSERT INTO raw_events VALUES (%s, %s, %s, %s)",
                        (originator, counts[n], TOPIC, state),
                    )
                    conn.execute("NOTIFY raw_events")

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)
