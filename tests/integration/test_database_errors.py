"""Database errors told apart by what they mean (services.adapters.database_errors),
on the real databases: a statement the database rejects stays what it is (a fault
of ours, answered INTERNAL and logged), where SQLite's syntax errors, which share
their class with a locked file, were taken for an outage; a SQLite file the server
may not write says so, and what to change; a damaged one says to restore it."""

from __future__ import annotations

import dataclasses
import pathlib
import sqlite3
import uuid
from contextlib import closing

import psycopg
import pytest
from eventsourcing.persistence import PersistenceError
from sqlalchemy import create_engine
from sqlalchemy.exc import DBAPIError

from domain.errors import (
    DatabaseCorrupt,
    DatabaseLoginRefused,
    DatabasePermissionDenied,
    DatabaseReadOnly,
    Unavailable,
)
from services.adapters.database_errors import Kind, kind_of
from services.adapters.database_refusals import operator_refusal
from services.adapters.event_store import EventStore
from services.adapters.postgres_check import DatabaseUnreachable
from services.adapters.read_model_db import is_transient, migrate, open_database, reading
from services.adapters.read_model_queries import CatalogFilter, ReadModelQueries
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


def _sqlite_error(path: pathlib.Path, query: str) -> sqlite3.Error:
    with pytest.raises(sqlite3.Error) as raised, closing(sqlite3.connect(path)) as connection:
        connection.execute(query).fetchall()
    return raised.value


def test_a_damaged_sqlite_file_is_corrupt_not_a_fault_nor_an_outage(
    tmp_path: pathlib.Path,
) -> None:
    """SQLite's own errors for a damaged file (a DatabaseError, not the
    OperationalError of a locked file): a header that is not SQLite's, a page that
    is malformed. No retry ends either: a backup must be restored."""
    notadb, malformed = tmp_path / "notadb.db", tmp_path / "malformed.db"
    for path in (notadb, malformed):
        with closing(sqlite3.connect(path)) as connection:
            connection.execute("CREATE TABLE t (x TEXT)")
            connection.executemany("INSERT INTO t VALUES (?)", [("x" * 200,)] * 500)
            connection.commit()
    with notadb.open("r+b") as file:
        file.write(b"not a database, garbage " * 4)  # the 100-byte header
    with malformed.open("r+b") as file:
        file.seek(4096 * 2)  # a page of the table, past the schema's
        file.write(b"\xff" * 4096)

    for path, query, name in (
        (notadb, "SELECT * FROM t", "SQLITE_NOTADB"),
        (malformed, "SELECT max(x) FROM t", "SQLITE_CORRUPT"),
    ):
        error = _sqlite_error(path, query)
        assert error.sqlite_errorname == name
        assert not isinstance(error, sqlite3.OperationalError)
        assert kind_of(error) is Kind.CORRUPT
        refusal = operator_refusal(error)
        assert isinstance(refusal, DatabaseCorrupt)
        assert str(refusal).startswith(f"the database file is damaged ({error}): ")
        assert "restore it from a backup" in str(refusal)


def test_a_store_whose_file_is_damaged_is_refused_saying_to_restore_it(
    tmp_path: pathlib.Path,
) -> None:
    """Through the event store's recorder and the read models' queries alike, each
    wrapping SQLite's error in its own library's class."""
    path = tmp_path / "sessions.db"
    url = f"sqlite:///{path}"
    events = EventStore(persistence_env(url))
    database = open_database(url)
    try:
        migrate(database)
        with closing(sqlite3.connect(path)) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # all in the file
        with path.open("r+b") as file:
            file.write(b"\0garbage" * 12)

        with pytest.raises(DatabaseCorrupt) as stored:
            events.recorder.max_notification_id()
        assert str(stored.value) == (
            "the database file is damaged (file is not a database): stop the servers "
            "that use it and restore it from a backup (`PRAGMA integrity_check` in the "
            "sqlite3 shell says what is damaged; its `.recover` saves what it can), then retry"
        )
        with pytest.raises(DatabaseCorrupt) as read, reading(database.reader) as connection:
            connection.exec_driver_sql("SELECT * FROM session_catalog")
        assert str(read.value) == str(stored.value)
        # A read model's writer backs off on it rather than quarantine what it reads.
        assert is_transient(read.value.__cause__)  # type: ignore[arg-type]
        # A store opened on it (a server starting) says the same.
        with pytest.raises(DatabaseCorrupt):
            EventStore(persistence_env(url), create_tables=False)
    finally:
        events.close()
        database.dispose()


@pytest.mark.parametrize(
    ("sqlstate", "message"),
    [
        ("XX001", "invalid page in block 7 of relation base/16384/16385"),
        ("XX002", 'index "sessionstore_events_pkey" contains unexpected zero page at block 3'),
    ],
)
def test_data_postgresql_reports_damaged_is_corrupt(sqlstate: str, message: str) -> None:
    """psycopg's own classes for PostgreSQL's data_corrupted and index_corrupted (a
    real one would take damaging a server's files), as raised with the server's words."""
    error = psycopg.errors.lookup(sqlstate)(message)
    assert error.sqlstate == sqlstate
    assert kind_of(error) is Kind.CORRUPT
    refusal = operator_refusal(error, role="sessionstore")
    assert isinstance(refusal, DatabaseCorrupt)
    assert str(refusal) == (
        f"the database reports damaged data ({message}): restore it from a backup (or, "
        "for a damaged index, REINDEX it), then retry"
    )


def test_a_write_to_a_read_only_postgresql_database_says_to_use_the_primary(
    postgres_schema_url: str,
) -> None:
    """A transaction read-only (as every one is on a standby, or with
    default_transaction_read_only on): PostgreSQL's read_only_sql_transaction, a
    psycopg InternalError, is a database to point elsewhere, not a fault."""
    base = postgres_schema_url.split("?")[0]
    with psycopg.connect(base) as connection:
        connection.execute("SET TRANSACTION READ ONLY")
        with pytest.raises(psycopg.Error) as raised:
            connection.execute("CREATE TABLE sessionstore_test_never (x int)")
    assert raised.value.sqlstate == "25006"
    assert kind_of(raised.value) is Kind.READ_ONLY

    database = open_database(postgres_schema_url)
    try:
        migrate(database)
        with (
            pytest.raises(DatabaseReadOnly) as refused,
            reading(database.writer) as connection,
        ):
            connection.exec_driver_sql("SET TRANSACTION READ ONLY")
            connection.exec_driver_sql(f"DELETE FROM {database.schema}.session_catalog")
        assert str(refused.value) == (
            "the database takes no writes (cannot execute DELETE in a read-only "
            "transaction): this server is connected to a read-only database (a standby, "
            "or one where default_transaction_read_only is on for role 'postgres' or the "
            "database): point the database URL at the primary, then retry"
        )
        assert is_transient(refused.value.__cause__)  # type: ignore[arg-type]
    finally:
        database.dispose()


def _as_role(url: str, role: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{role}@{rest.split('@', 1)[-1]}"


def test_a_role_the_database_does_not_know_is_a_login_refused_naming_it(
    postgres_schema_url: str,
) -> None:
    """A role that does not exist (the server's trust authentication refuses it all
    the same, SQLSTATE 28000): psycopg raises it with no SQLSTATE at all, as for a
    server that is down, and only the server's words tell them apart. The read
    models' queries, and a store opened on it (a server starting), say it."""
    role = f"sessionstore_missing_{uuid.uuid4().hex[:8]}"
    url = _as_role(postgres_schema_url, role)
    with pytest.raises(psycopg.OperationalError) as raised:
        psycopg.connect(url.split("?")[0], connect_timeout=5)
    assert raised.value.sqlstate is None
    assert kind_of(raised.value) is Kind.LOGIN_REFUSED
    refusal = operator_refusal(raised.value, role)
    assert isinstance(refusal, DatabaseLoginRefused)
    assert refusal.metadata == {"role": role}
    assert str(refusal) == (
        f"the database refused to let role '{role}' log in ({raised.value}): the "
        "credentials in the database URL were refused: fix the URL's user and password, "
        "or create the role (CREATE ROLE ... LOGIN, with the grants the server needs), "
        "then retry"
    )

    database = open_database(url)
    try:
        with pytest.raises(DatabaseLoginRefused) as read, reading(database.reader):
            pass
        assert str(read.value) == str(refusal)
    finally:
        database.dispose()
    with pytest.raises(DatabaseUnreachable) as started:
        EventStore(persistence_env(url))
    assert str(started.value) == str(refusal)


@pytest.mark.parametrize(
    ("server_says", "kind"),
    [
        ('FATAL:  password authentication failed for user "app"', Kind.LOGIN_REFUSED),
        ('FATAL:  role "app" is not permitted to log in', Kind.LOGIN_REFUSED),
        (
            'FATAL:  no pg_hba.conf entry for host "10.1.2.3", user "app", database "s", '
            "no encryption",
            Kind.LOGIN_REFUSED,
        ),
        ("fe_sendauth: no password supplied", Kind.LOGIN_REFUSED),
        ("FATAL:  the database system is starting up", Kind.OUTAGE),
        ("FATAL:  sorry, too many clients already", Kind.OUTAGE),
        ("Connection refused\n\tIs the server running on that host?", Kind.OUTAGE),
    ],
)
def test_what_a_refused_connection_says_tells_a_login_from_an_outage(
    server_says: str, kind: Kind
) -> None:
    """The words libpq reports for logins this server cannot produce (it trusts
    every local user, so no password is ever wrong), in psycopg's own class as it
    raises them, beside those of a server that is down or busy."""
    error = psycopg.OperationalError(
        f'connection failed: connection to server at "db", port 5432 failed: {server_says}'
    )
    assert kind_of(error) is kind


def test_a_pool_with_every_connection_busy_says_so_not_unreachable(
    postgres_schema_url: str,
) -> None:
    """The database up, the one connection the event store's pool may open held: a
    call that waits out the pool's timeout for another is an outage to retry, said
    as what it is, with the pool's size and what sets it."""
    env = {
        **persistence_env(postgres_schema_url),
        "POSTGRES_POOL_SIZE": "1",
        "POSTGRES_MAX_OVERFLOW": "0",
        "POSTGRES_CONNECT_TIMEOUT": "1",  # also how long a call waits for a connection
    }
    events = EventStore(env)
    try:
        with (
            events.recorder.datastore.get_connection(),  # type: ignore[attr-defined]
            pytest.raises(Unavailable) as refused,
        ):
            events.recorder.max_notification_id()
        assert type(refused.value) is Unavailable
        assert str(refused.value) == (
            "no database connection free within 1.0 s: all 1 of this server's connections "
            "are in use (pool_size and max_overflow in the database URL set how many); "
            "retry shortly"
        )
        assert events.recorder.max_notification_id() is None  # free again
    finally:
        events.close()


def test_a_read_model_pool_with_every_connection_busy_says_so_not_unreachable(
    database_url: str,
) -> None:
    """The read models' queries have a SQLAlchemy pool of their own: the database up
    and its one connection held, a query that waits out the pool's timeout is an
    outage to retry, said as busy (as the event store's pool says it), not as the
    database unreachable, which would send an operator to a database that is fine."""
    database = open_database(database_url)
    small = create_engine(database.reader.url, pool_size=1, max_overflow=0, pool_timeout=1)
    if database.schema:
        small = small.execution_options(schema_translate_map={None: database.schema})
    queries = ReadModelQueries(dataclasses.replace(database, reader=small))
    try:
        migrate(database)
        with small.connect(), pytest.raises(Unavailable) as refused:
            queries.sessions(CatalogFilter(), 10, "")
        assert type(refused.value) is Unavailable
        assert str(refused.value) == (
            "no database connection free within 1.0 s: all 1 of this server's connections "
            "for the read models' queries are in use; retry shortly"
        )
        assert queries.sessions(CatalogFilter(), 10, "") == ([], "")  # free again
    finally:
        small.dispose()
        database.dispose()
