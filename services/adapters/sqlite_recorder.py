"""The SQLite recorder: the library's, with the id index written in its transaction.

SQLite's one writer at a time already keeps notification ids in commit order,
so ordering needs nothing here; the id rows and idempotency keys ride in the
transaction the library opens for the events.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

from eventsourcing.persistence import PersistenceError, StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from services.adapters.database_refusals import database_refusal
from services.adapters.id_index import (
    BACKFILL_TOPICS,
    FORK,
    TABLE_SUFFIX,
    EventsAndKeysInTwoReads,
    IdRow,
    IdTaken,
    OneWriterAtATime,
)
from services.adapters.idempotency_keys import TABLE_SUFFIX as KEYS_TABLE_SUFFIX
from services.adapters.idempotency_keys import KeyRow
from services.adapters.sealing import TABLE_SUFFIX as DATA_KEYS_TABLE_SUFFIX
from services.adapters.sealing import DataKeyRow, ShredRow

# Pairs per lookup statement: two variables each, well under SQLite's limit.
LOOKUP_CHUNK = 400


OUTAGE = "the database file cannot be used now ({reason}); retry shortly"
# How long closing the store waits for the connections still in use to come back.
CLOSE_WAIT_SECONDS = 5.0


class ResilientSQLiteDatastore(SQLiteDatastore):
    """The library's datastore, saying Unavailable when the database file cannot be used
    now, and closing only once its connections are back.

    A file locked by another process past the lock timeout, or one that
    cannot be opened, answers UNAVAILABLE instead of an internal error; so do
    tables this release uses missing, and a file the server may not write, each
    saying what an operator must do (services.adapters.database_refusals).

    The library's pool closes the connections in use with the idle ones, and
    SQLite crashes the process when a connection closes under a query: a
    stopping server's leftovers (a compaction finishing, a call cut short)
    would. Closing waits for them first, up to ``CLOSE_WAIT_SECONDS``.
    """

    _in_use: int
    _returned: threading.Condition

    @contextmanager
    def get_connection(self, *, commit: bool) -> Iterator[Any]:
        with self._returned:
            self._in_use += 1
        try:
            with super().get_connection(commit=commit) as conn:
                yield conn
        except (PersistenceError, sqlite3.Error) as error:
            refusal = database_refusal(error, OUTAGE)
            if refusal is None:
                raise  # a statement the database rejects: the caller's, or a fault
            raise refusal from error
        finally:
            with self._returned:
                self._in_use -= 1
                self._returned.notify_all()

    def close(self) -> None:
        with self._returned:
            self._returned.wait_for(lambda: self._in_use == 0, timeout=CLOSE_WAIT_SECONDS)
        super().close()


# Which bound of events_and_keys_of's (events after, keys after) a statement reads past.
EVENTS_AFTER, KEYS_AFTER = 0, 1


def _flat_pairs(after: Mapping[str, tuple[int, int]], bound: int) -> list[str | int]:
    """(session id, the chosen bound) for each session, flat: the VALUES' variables."""
    return [v for session_id, bounds in after.items() for v in (session_id, bounds[bound])]


def make_resilient(datastore: SQLiteDatastore) -> None:
    """Turns the library's datastore into a resilient one (only its behaviour changes)."""
    datastore.__class__ = ResilientSQLiteDatastore
    resilient = cast(ResilientSQLiteDatastore, datastore)
    resilient._in_use = 0
    resilient._returned = threading.Condition()


class SQLiteEventRecorder(EventsAndKeysInTwoReads, OneWriterAtATime, SQLiteApplicationRecorder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ids_table_name = self.events_table_name + TABLE_SUFFIX
        self.keys_table_name = self.events_table_name + KEYS_TABLE_SUFFIX
        self.data_keys_table_name = self.events_table_name + DATA_KEYS_TABLE_SUFFIX

    def _insert_events(
        self,
        c: SQLiteCursor,
        stored_events: Sequence[StoredEvent],
        *,
        ids: Sequence[IdRow] = (),
        keys: Sequence[KeyRow] = (),
        data_keys: Sequence[DataKeyRow] = (),
        shred: Sequence[ShredRow] = (),
        **kwargs: Any,
    ) -> Sequence[int] | None:
        notification_ids = super()._insert_events(c, stored_events, **kwargs)
        if ids:
            try:
                c.executemany(f"INSERT INTO {self.ids_table_name} VALUES (?, ?, ?, ?)", ids)
            except sqlite3.IntegrityError as error:
                raise IdTaken(str(error)) from error
        if keys:
            # A row left by an expired use of the key gives way to the new one.
            now = time.time()
            c.executemany(
                f"INSERT OR REPLACE INTO {self.keys_table_name} VALUES (?, ?, ?, ?, ?)",
                [(*row, now) for row in keys],
            )
        if data_keys:
            c.executemany(
                f"INSERT INTO {self.data_keys_table_name} VALUES (?, ?, ?, ?, ?)", data_keys
            )
        if shred:
            c.execute("PRAGMA secure_delete = ON")
        for session_id, version, kind, key_id in shred:
            self._shred(c, session_id, version, kind, key_id)
        return notification_ids

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        notification_ids = super().insert_events(stored_events, **kwargs)
        if kwargs.get("shred"):
            # The write-ahead log still holds the pages as they were before the
            # erasure: copy it into the database (overwriting them) and empty it.
            with self.datastore.transaction(commit=False) as c:
                c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return notification_ids

    def _shred(
        self, c: SQLiteCursor, session_id: str, version: int, kind: str, key_id: str
    ) -> None:
        table = self.data_keys_table_name
        if not kind:
            c.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
        elif version < 0:
            c.execute(
                f"DELETE FROM {table} WHERE session_id = ? AND kind = ? AND key_id = ?",
                (session_id, kind, key_id),
            )
        else:
            c.execute(
                f"DELETE FROM {table} WHERE session_id = ? AND version = ? AND kind = ? "
                "AND key_id = ?",
                (session_id, version, kind, key_id),
            )

    def create_data_key_table(self) -> None:
        with self.datastore.transaction(commit=True) as c:
            # secure_delete: a deleted key's bytes are overwritten in the file,
            # not left in a free page where the erased content could be opened.
            c.execute("PRAGMA secure_delete = ON")
            c.execute(
                f"CREATE TABLE IF NOT EXISTS {self.data_keys_table_name} (session_id TEXT, "
                "version INTEGER, kind TEXT, key_id TEXT, data_key BLOB, "
                "PRIMARY KEY (session_id, version, kind, key_id)) WITHOUT ROWID"
            )

    def data_keys(self, session_id: str, after: int, upto: int | None) -> list[DataKeyRow]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT session_id, version, kind, key_id, data_key FROM "
                f"{self.data_keys_table_name} WHERE session_id = ? AND version > ? "
                "AND version <= ?",
                (session_id, after, (1 << 62) if upto is None else upto),
            )
            return [(r[0], r[1], r[2], r[3], bytes(r[4])) for r in c.fetchall()]

    def events_and_keys_of(
        self, after: Mapping[str, tuple[int, int]]
    ) -> tuple[list[StoredEvent], list[DataKeyRow]]:
        """Two queries for all the sessions, in one read transaction, instead of two
        transactions a session."""
        if not after:
            return [], []
        pairs = ",".join("(?,?)" for _ in after)
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"WITH w(id, after) AS (VALUES {pairs}) SELECT e.originator_id, "
                f"e.originator_version, e.topic, e.state FROM w JOIN {self.events_table_name} "
                "AS e ON e.originator_id = w.id AND e.originator_version > w.after "
                "ORDER BY e.originator_id, e.originator_version",
                _flat_pairs(after, EVENTS_AFTER),
            )
            events = [
                StoredEvent(r["originator_id"], r["originator_version"], r["topic"], r["state"])
                for r in c.fetchall()
            ]
            c.execute(
                f"WITH w(id, after) AS (VALUES {pairs}) SELECT k.session_id, k.version, "
                f"k.kind, k.key_id, k.data_key FROM w JOIN {self.data_keys_table_name} AS k "
                "ON k.session_id = w.id AND k.version > w.after",
                _flat_pairs(after, KEYS_AFTER),
            )
            keys = [(r[0], r[1], r[2], r[3], bytes(r[4])) for r in c.fetchall()]
        return events, keys

    def create_key_table(self) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                f"CREATE TABLE IF NOT EXISTS {self.keys_table_name} (session_id TEXT, key TEXT, "
                "fingerprint TEXT, version INTEGER, created_at REAL, "
                "PRIMARY KEY (session_id, key)) WITHOUT ROWID"
            )
            c.execute(
                f"CREATE INDEX IF NOT EXISTS {self.keys_table_name}_created_at "
                f"ON {self.keys_table_name} (created_at)"
            )

    def earlier_append(
        self, session_id: str, key: str, ttl_seconds: float
    ) -> tuple[str, int] | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute(
                f"SELECT fingerprint, version FROM {self.keys_table_name} "
                "WHERE session_id = ? AND key = ? AND created_at >= ?",
                (session_id, key, time.time() - ttl_seconds),
            )
            row = c.fetchone()
        return None if row is None else (row[0], row[1])

    def expire_keys(self, ttl_seconds: float) -> int:
        with self.datastore.transaction(commit=True) as c:
            c.execute(
                f"DELETE FROM {self.keys_table_name} WHERE created_at < ?",
                (time.time() - ttl_seconds,),
            )
            return int(c.sqlite_cursor.rowcount)

    def used_ids(self, session_id: str, keys: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
        pairs = list(keys)
        found: set[tuple[str, str]] = set()
        with self.datastore.transaction(commit=False) as c:
            for start in range(0, len(pairs), LOOKUP_CHUNK):
                chunk = pairs[start : start + LOOKUP_CHUNK]
                c.execute(
                    f"SELECT kind, key FROM {self.ids_table_name} WHERE session_id = ? "
                    f"AND (kind, key) IN (VALUES {','.join(['(?, ?)'] * len(chunk))})",
                    [session_id, *(v for pair in chunk for v in pair)],
                )
                found.update((row[0], row[1]) for row in c.fetchall())
        return found

    def forks_of(self, session_ids: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        forks: dict[str, list[tuple[str, int]]] = {}
        with self.datastore.transaction(commit=False) as c:
            for start in range(0, len(session_ids), LOOKUP_CHUNK):
                chunk = list(session_ids[start : start + LOOKUP_CHUNK])
                c.execute(
                    f"SELECT session_id, key, version FROM {self.ids_table_name} WHERE "
                    f"session_id IN ({','.join('?' * len(chunk))}) AND kind = ?",
                    (*chunk, FORK),
                )
                for row in c.fetchall():
                    forks.setdefault(row[0], []).append((row[1], row[2]))
        return forks

    def create_id_index(self, backfill: Callable[[StoredEvent], list[IdRow]]) -> int:
        """Creates the index, filled from the events already stored, in one transaction.

        BEGIN IMMEDIATE takes the write lock before looking, so of several
        servers starting on an old database exactly one fills the index, and
        a crash half way leaves no half-filled table behind.
        """
        with self.datastore.get_connection(commit=True) as conn:
            c = conn.cursor()
            c.execute("BEGIN IMMEDIATE")
            try:
                c.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (self.ids_table_name,))
                if c.fetchone() is not None:
                    conn.rollback()
                    return 0
                c.execute(
                    f"CREATE TABLE {self.ids_table_name} (session_id TEXT, kind TEXT, "
                    "key TEXT, version INTEGER, PRIMARY KEY (session_id, kind, key)) "
                    "WITHOUT ROWID"
                )
                filled = self._backfill(c, backfill)
                conn.commit()
                return filled
            except BaseException:
                conn.rollback()
                raise

    def _backfill(self, c: SQLiteCursor, backfill: Callable[[StoredEvent], list[IdRow]]) -> int:
        reader = c.sqlite_cursor.connection.cursor()
        marks = ", ".join("?" * len(BACKFILL_TOPICS))
        reader.execute(
            "SELECT originator_id, originator_version, topic, state "
            f"FROM {self.events_table_name} WHERE topic IN ({marks})",
            BACKFILL_TOPICS,
        )
        filled = 0
        while batch := reader.fetchmany(1000):
            rows = [
                row
                for r in batch
                for row in backfill(
                    StoredEvent(originator_id=r[0], originator_version=r[1], topic=r[2], state=r[3])
                )
            ]
            # An old race between servers may have stored an id twice: the first stays.
            c.executemany(f"INSERT OR IGNORE INTO {self.ids_table_name} VALUES (?, ?, ?, ?)", rows)
            filled += len(rows)
        return filled
