"""What must not migrate creates nothing: a server or worker told not to
(SESSIONSTORE_MIGRATE_AT_START=false), the commands that only read and those that
write rows but not the schema refuse a store whose tables are missing, in one line
naming `sessionstore migrate`, and leave the database as they found it. Only
`sessionstore migrate` (and a start that migrates) makes the event store's tables.

The event store's recorders create their tables when the store is opened: these
refused tables behind the release, but opened the store first (or besides), so
pointed at an empty or wrong database they left event store tables there."""

from __future__ import annotations

import pathlib
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.adapters.read_model_db import migrate, open_database
from services.adapters.start_errors import START_ERRORS, start_refusal
from services.cli import cli
from services.config import sqlite_file
from tests.conftest import server_channel, start_server
from tests.e2e.test_database_states import _execute, _schema
from tests.support.worker_process import WorkerProcess

READ_ONLY_COMMANDS = [
    ["readmodels", "status"],
    ["retention", "plan", "--policy-file", "policy.toml"],
    ["migrate", "--check"],
]
# They write rows, never the schema: whatever SESSIONSTORE_MIGRATE_AT_START says.
WRITING_COMMANDS = [
    ["rebuild", "catalog"],
    ["readmodels", "retry"],
    ["retention", "apply", "--policy-file", "policy.toml"],
]
# Where an operator runs a command the setting is often unset (true, the default).
MIGRATE_AT_START_SETTINGS: list[str | None] = ["true", "false", None]
WRITE_REFUSAL = (
    "run `sessionstore migrate` first (this command creates and migrates nothing: "
    "servers of the release before may still serve the store)"
)


@pytest.fixture(
    params=[
        "sqlite empty file",
        "sqlite no file",
        "postgres empty schema",
        "postgres no schema",
        "postgres new database",
    ]
)
def nothing_url(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[str]:
    """A database with no table of the store: an empty SQLite file or none, an empty
    PostgreSQL schema or none (a typo in schema=), a new PostgreSQL database."""
    kind = str(request.param)
    if kind.startswith("sqlite"):
        path = tmp_path / "sessions.db"
        if kind == "sqlite empty file":
            path.touch()
        yield f"sqlite:///{path}"
        return
    if kind == "postgres new database":
        yield from _new_postgres_database(request.getfixturevalue("postgres_url"))
        return
    url = str(request.getfixturevalue("postgres_schema_url"))  # dropped afterwards
    if kind == "postgres empty schema":
        with psycopg.connect(url.split("?")[0], autocommit=True) as connection:
            connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(_schema(url))))
    yield url


@pytest.fixture(params=["sqlite", "postgres schema", "postgres database"])
def empty_url(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[str]:
    """A database that is there, with no table in it."""
    if request.param == "sqlite":
        (tmp_path / "sessions.db").touch()
        yield f"sqlite:///{tmp_path}/sessions.db"
        return
    if request.param == "postgres database":
        yield from _new_postgres_database(request.getfixturevalue("postgres_url"))
        return
    url = str(request.getfixturevalue("postgres_schema_url"))
    with psycopg.connect(url.split("?")[0], autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(_schema(url))))
    yield url


def _new_postgres_database(postgres_url: str) -> Iterator[str]:
    base = postgres_url.split("?")[0]
    name = f"empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"{base.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _objects(url: str) -> list[str]:
    """Everything the database holds for the store: SQLite's schema table (and the
    file's size), or the PostgreSQL schema's relations, functions and types (and
    whether the schema is there at all)."""
    file = sqlite_file(url)
    if file is not None:
        if not file.exists():
            return []
        # Read only: looking must not make or change the file.
        with closing(sqlite3.connect(f"file:{file}?mode=ro", uri=True)) as connection:
            rows = connection.execute("SELECT type, name FROM sqlite_master").fetchall()
        return [*sorted(f"{kind} {name}" for kind, name in rows), f"{file.stat().st_size} bytes"]
    schema = _schema(url)
    with psycopg.connect(url.split("?")[0]) as connection:
        found = connection.execute(
            "SELECT 'schema ' || nspname FROM pg_namespace WHERE nspname = %(s)s "
            "UNION ALL SELECT relkind::text || ' ' || relname FROM pg_class "
            "JOIN pg_namespace ON pg_namespace.oid = relnamespace WHERE nspname = %(s)s "
            "UNION ALL SELECT 'function ' || proname FROM pg_proc "
            "JOIN pg_namespace ON pg_namespace.oid = pronamespace WHERE nspname = %(s)s "
            "UNION ALL SELECT 'type ' || typname FROM pg_type "
            "JOIN pg_namespace ON pg_namespace.oid = typnamespace WHERE nspname = %(s)s",
            {"s": schema},
        ).fetchall()
    return sorted(str(row[0]) for row in found)


def _refused_start(url: str, **settings: object) -> str:
    with pytest.raises(START_ERRORS) as refused:
        start_server(url, migrate_at_start=False, **settings)
    return start_refusal(refused.value)


def test_a_server_or_worker_told_not_to_migrate_creates_nothing_in_an_empty_database(
    nothing_url: str,
) -> None:
    """They refused tables behind the release only after opening the event store,
    which created its tables: pointed at an empty or wrong database, they left an
    empty store there, which the next start took for a store of no sessions."""
    before = _objects(nothing_url)
    reason = _refused_start(nothing_url)
    assert reason.startswith("the store's tables are not at this release's latest migration (")
    assert "SESSIONSTORE_MIGRATE_AT_START is false: run `sessionstore migrate` first" in reason
    assert len(reason.splitlines()) == 1
    if before:  # a database (or SQLite file) that is there, without a table
        assert "(no event store tables; read models at no migration, not " in reason
    else:  # neither made, nor taken for an empty store
        assert "(no database at " in reason or "(no schema " in reason
    # Without read models (projections off) the event store's tables are still needed.
    without_read_models = _refused_start(nothing_url, projections="off")
    assert "`sessionstore migrate`" in without_read_models
    if before:
        assert "(no event store tables)" in without_read_models
    worker = WorkerProcess(nothing_url, migrate_at_start="false")
    try:
        assert worker.process.wait(timeout=60) == 1
        (line,) = worker.logged("cannot start")
        assert line["reason"] == reason
    finally:
        worker.end()
    assert _objects(nothing_url) == before


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_command_that_only_reads_creates_nothing_in_an_empty_database(
    empty_url: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.toml").write_text("")
    before = _objects(empty_url)
    result = CliRunner().invoke(cli, [*command, "--database-url", empty_url])
    assert result.exit_code == 1, result.output
    (line,) = result.output.splitlines()
    assert "store not migrated: no event store tables; read models at no migration" in line
    if command[0] != "migrate":
        assert "run `sessionstore migrate` first" in line
    assert _objects(empty_url) == before


@pytest.mark.parametrize("command", WRITING_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_command_that_writes_rows_creates_nothing_in_an_empty_database(
    empty_url: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """`rebuild`, `readmodels retry` and `retention apply` made the whole store in an
    empty or wrong database, tables and read models (`retention apply` unless
    SESSIONSTORE_MIGRATE_AT_START was false). They now refuse it as the commands that
    only read do, and make nothing, whatever the setting says."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.toml").write_text("")
    before = _objects(empty_url)
    for setting in MIGRATE_AT_START_SETTINGS:
        result = CliRunner().invoke(
            cli,
            [*command, "--database-url", empty_url],
            env={"SESSIONSTORE_MIGRATE_AT_START": setting},
        )
        assert result.exit_code == 1, result.output
        (line,) = result.output.splitlines()
        assert line.startswith(
            "Error: store not migrated: no event store tables; read models at no migration"
        )
        assert line.endswith(WRITE_REFUSAL)
        assert _objects(empty_url) == before


def test_a_store_without_its_event_tables_is_refused_until_migrate_makes_them(
    database_url: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read models migrated, no event store tables (as `sessionstore migrate` left a
    new database: it migrated only the read models, and the first server to start
    made the rest). `readmodels status` and `retention plan` then made the tables and
    answered, `migrate --check` said migrated, a server told not to migrate made them,
    and so did `rebuild`, `readmodels retry` and `retention apply`. Now each says the
    event store's tables are missing and makes none, and `sessionstore migrate` makes
    them: each command then answers, and a server told not to migrate serves."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.toml").write_text("")
    database = open_database(database_url)
    try:
        migrate(database)  # the read models only
    finally:
        database.dispose()
    before = _objects(database_url)
    for command in READ_ONLY_COMMANDS + WRITING_COMMANDS:
        result = CliRunner().invoke(cli, [*command, "--database-url", database_url])
        assert result.exit_code == 1, result.output
        (line,) = result.output.splitlines()
        assert "store not migrated: no event store tables" in line
        assert "read models" not in line  # they are at the latest migration
    reason = _refused_start(database_url)
    assert "(no event store tables) and SESSIONSTORE_MIGRATE_AT_START is false" in reason
    assert _objects(database_url) == before
    migrated = CliRunner().invoke(cli, ["migrate", "--database-url", database_url])
    assert migrated.exit_code == 0, migrated.output
    for command in READ_ONLY_COMMANDS + WRITING_COMMANDS:
        result = CliRunner().invoke(cli, [*command, "--database-url", database_url])
        assert result.exit_code == 0, result.output
    _serves_without_migrating(database_url)


def test_a_table_a_release_added_is_made_by_migrate_not_by_a_server_told_not_to(
    database_url: str,
) -> None:
    """A store an earlier release made lacks the tables later ones added (here the
    idempotency keys'): a server told not to migrate made them at start. It now
    names them and makes none; `sessionstore migrate` makes them, and the sessions
    stored before are there."""
    keys = _store_without_the_keys_table(database_url, session_id="before")
    before = _objects(database_url)
    reason = _refused_start(database_url)
    assert f"(event store tables missing: {keys}) and SESSIONSTORE_MIGRATE_AT_START" in reason
    status = CliRunner().invoke(cli, ["readmodels", "status", "--database-url", database_url])
    assert status.exit_code == 1, status.output
    assert f"store not migrated: event store tables missing: {keys}: run" in status.output
    assert _objects(database_url) == before
    assert CliRunner().invoke(cli, ["migrate", "--database-url", database_url]).exit_code == 0
    _serves_without_migrating(database_url, "before")


def _store_with_one_session(url: str, session_id: str = "s-1") -> None:
    """A store a server made and wrote one session to, the server stopped."""
    with server_channel(url) as channel:
        store = pb_grpc.SessionStoreStub(channel)
        store.CreateSession(pb.CreateSessionRequest(session_id=session_id), timeout=10)


def _store_without_the_keys_table(url: str, session_id: str = "s-1") -> str:
    """``_store_with_one_session``, then without a table a later release added to the
    event store (the idempotency keys'), as a release before that one left it: that
    table's name."""
    _store_with_one_session(url, session_id)
    keys = "stored_events_keys" if sqlite_file(url) else "sessionstore_events_keys"
    _execute(url, f"DROP TABLE {keys}")
    return keys


def _serves_without_migrating(url: str, *earlier: str) -> None:
    """A server told not to migrate starts, writes and lists (through the stored
    functions on PostgreSQL, which only a migration makes now)."""
    with server_channel(url, migrate_at_start=False) as channel:
        store = pb_grpc.SessionStoreStub(channel)
        written = store.CreateSession(pb.CreateSessionRequest(session_id="s-1"), timeout=10)
        listed = store.ListSessions(
            pb.ListSessionsRequest(min_position=written.position), timeout=10
        )
        assert sorted(s.id for s in listed.sessions) == sorted([*earlier, "s-1"])
