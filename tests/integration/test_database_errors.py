"""Database errors told apart by what they mean (services.adapters.database_errors),
on the real databases: a statement the database rejects stays what it is (a fault
of ours, answered INTERNAL and logged), where SQLite's syntax errors, which share
their class with a locked file, were taken for an outage; a SQLite file the server
may not write says so, and what to change."""

from __future__ import annotations

import pathlib

import pytest
from eventsourcing.persistence import PersistenceError
from sqlalchemy.exc import DBAPIError

from domain.errors import DatabasePermissionDenied, Unavailable
from services.adapters.event_store import EventStore
from services.adapters.read_model_db import is_transient, migrate, open_database, reading
from services.config import persistence_env


def test_a_statement_the_database_rejects_stays_a_fault(database_url: str) -> None:
    database = open_database(database_url)
    events = EventStore(persistence_env(database_url))
    try:
        migrate(database)
        with pytest.raises(DBAPIError) as read, reading(database.reader) as connection:
            connection.exec_driver_sql("SELEC 1")
        assert not is_transient(read.value)  # a read model's writer quarantines it
        with (
            pytest.raises(PersistenceError) as stored,
            events.recorder.datastore.transaction(commit=False) as cursor,
        ):
            cursor.execute("SELEC 1")
        assert not isinstance(stored.value, Unavailable)
        assert "syntax error" in str(stored.value)
    finally:
        events.close()
        database.dispose()


def test_a_sqlite_file_the_server_may_not_write_is_refused_naming_access(
    tmp_path: pathlib.Path,
) -> None:
    """Opened read-only (as a file whose permissions deny the server's user is):
    not an outage to wait out, but access an operator must give."""
    path = tmp_path / "sessions.db"
    EventStore(persistence_env(f"sqlite:///{path}")).close()  # tables made
    env = {**persistence_env(f"sqlite:///{path}"), "SQLITE_DBNAME": f"file:{path}?mode=ro"}
    events = EventStore(env, create_tables=False)
    try:
        assert events.recorder.max_notification_id() is None  # reading is fine
        with pytest.raises(DatabasePermissionDenied) as refused:
            events.recorder.expire_keys(0)
        assert str(refused.value) == (
            "the database file may not be written by this server (attempt to write a "
            "readonly database): give the server's user write access to the file and "
            "its folder, then retry"
        )
    finally:
        events.close()
