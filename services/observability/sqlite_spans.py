"""Spans for the event store's statements on SQLite, as psycopg's instrumentation gives
them on PostgreSQL: a client span per statement (named by its first word, with
``db.system``, ``db.name`` and ``db.statement``) inside a span per transaction,
whose end holds the commit (where a write waits for the disk).

Only the store's own connections: the read models' SQLAlchemy engines have their
spans already (services.observability.tracing), and the sqlite3 module is left
unpatched, so nothing is traced twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from eventsourcing.sqlite import SQLiteCursor
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from services.adapters.sqlite_recorder import ResilientSQLiteDatastore

DB_SYSTEM = "sqlite"


class _TracedCursor(SQLiteCursor):
    def __init__(self, cursor: SQLiteCursor, tracer: trace.Tracer, db_name: str) -> None:
        super().__init__(cursor.sqlite_cursor)
        self._tracer = tracer
        self._db_name = db_name

    def execute(self, *args: Any, **kwargs: Any) -> None:
        with self._statement(args[0] if args else kwargs.get("sql", "")):
            super().execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> None:
        with self._statement(args[0] if args else kwargs.get("sql", "")):
            super().executemany(*args, **kwargs)

    def _statement(self, statement: str) -> Any:
        words = statement.split(None, 1)
        return self._tracer.start_as_current_span(
            words[0].upper() if words else DB_SYSTEM,
            kind=SpanKind.CLIENT,
            attributes={
                "db.system": DB_SYSTEM,
                "db.name": self._db_name,
                "db.statement": statement,
            },
        )


class TracedSQLiteDatastore(ResilientSQLiteDatastore):
    """The store's datastore, each transaction and statement a span."""

    tracer: trace.Tracer = trace.NoOpTracer()

    @contextmanager
    def transaction(self, *, commit: bool) -> Iterator[SQLiteCursor]:
        db_name = self.pool.db_name
        with (
            self.tracer.start_as_current_span(
                "sqlite transaction",
                attributes={"db.system": DB_SYSTEM, "db.name": db_name, "db.commit": commit},
            ),
            super().transaction(commit=commit) as cursor,
        ):
            yield _TracedCursor(cursor, self.tracer, db_name)


def trace_store_statements(datastore: object, tracer: trace.Tracer) -> None:
    """Traces the statements of the event store's datastore, if it is SQLite's."""
    if isinstance(datastore, ResilientSQLiteDatastore):
        datastore.__class__ = TracedSQLiteDatastore
        datastore.tracer = tracer  # type: ignore[attr-defined]
