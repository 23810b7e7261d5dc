"""The read models' migrations on SQLite and PostgreSQL: a database at an
earlier revision upgrades in place."""

from __future__ import annotations

import logging
import pathlib
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.script import ScriptDirectory
from click.testing import CliRunner
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy import insert, inspect, select

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.adapters import read_model_tables as t
from services.adapters.read_model_db import (
    MIGRATIONS,
    VERSION_TABLE,
    ReadModelDatabase,
    latest_migrations,
    migrate,
    migrations_behind,
    open_database,
)
from services.adapters.start_errors import START_ERRORS, start_refusal
from services.cli import cli
from services.readmodels.admin import migrate_database, wait_until_migrated
from tests.conftest import server_channel, start_server
from tests.integration.test_store_not_migrated import (
    MIGRATE_AT_START_SETTINGS,
    WRITE_REFUSAL,
    WRITING_COMMANDS,
    _store_with_one_session,
    _store_without_the_keys_table,
)
from tests.support.worker_process import WorkerProcess

OLD_ROW = {
    "session_id": "s",
    "recorded_us": 0,
    "trigger": "manual",
    "outcome": "ok",
    **dict.fromkeys(("stage", "reason", "summarizer_model", "first_kept_entry_id"), ""),
    **dict.fromkeys(("first_covered_entry_id", "last_covered_entry_id", "prompt_hash"), ""),
    **dict.fromkeys(("tokens_before_source", "tokens_after_source", "fallback_stage"), ""),
    **dict.fromkeys(("engine", "instructions"), ""),
    **dict.fromkeys(("first_kept_position", "entries_covered", "tokens_before"), 0),
    **dict.fromkeys(("tokens_after", "summary_tokens", "chunks", "attempt", "duration_ms"), 0),
}


def _upgrade_to(database: ReadModelDatabase, revision: str) -> None:
    _migrate(database, command.upgrade, revision)


def _downgrade_to(database: ReadModelDatabase, revision: str) -> None:
    """Back to an earlier release's schema."""
    _migrate(database, command.downgrade, revision)


def _migrate(database: ReadModelDatabase, step: Any, revision: str) -> None:
    with database.writer.begin() as connection:
        if database.postgres and database.schema:
            connection.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{database.schema}"')
        config = AlembicConfig()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = connection
        config.attributes["schema"] = database.schema
        logging.getLogger("alembic").setLevel(logging.WARNING)
        step(config, revision)


def test_undo_and_redo_columns_arrive_and_the_compaction_audit_rebuilds(
    database_url: str,
) -> None:
    database = open_database(database_url)
    try:
        _upgrade_to(database, "0001")
        # A compaction audit written by the release before: it skipped undos.
        with database.writer.begin() as connection:
            # Only the columns of revision 0001 (the schema-aware table, not raw SQL).
            connection.execute(insert(t.compactions).values(**OLD_ROW, version=5, position=7))
            connection.execute(
                insert(t.tracking),
                [{"name": "compactions", "position": 9}, {"name": "catalog", "position": 9}],
            )
        migrate(database)
        with database.reader.connect() as connection:
            assert connection.execute(select(t.compactions)).all() == []
            positions = dict(
                connection.execute(select(t.tracking.c.name, t.tracking.c.position)).all()
            )
        # Only the compaction audit starts over; the others keep their place.
        assert positions == {"compactions": 0, "catalog": 9}
        with database.writer.begin() as connection:
            connection.execute(
                insert(t.compactions).values(
                    **OLD_ROW,
                    version=6,
                    position=8,
                    compaction_version=5,
                    restored_compaction_version=0,
                    undo_version=0,
                    requested_by="ana",
                )
            )
        # Migrating again changes nothing.
        migrate(database)
        with database.reader.connect() as connection:
            (row,) = connection.execute(select(t.compactions)).mappings().all()
        assert (row["compaction_version"], row["requested_by"]) == (5, "ana")
    finally:
        database.dispose()


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["migrate", *args])
    return result.exit_code, result.output


def test_servers_wait_for_the_migration_job(database_url: str) -> None:
    """`migrate --check --wait` (a server's init step) ends once another process
    (the deploy's migration job) has migrated, and not before."""
    code, output = _cli("--check", "--database-url", database_url)
    assert code == 1 and "not migrated" in output
    with ThreadPoolExecutor(1) as pool:
        began = time.monotonic()
        waiting = pool.submit(wait_until_migrated, database_url, 60, 0.05)
        time.sleep(0.5)
        assert not waiting.done()
        migrate_database(database_url)
        assert waiting.result() == ""
        assert time.monotonic() - began >= 0.5
    assert _cli("--check", "--database-url", database_url) == (
        0,
        "read models at the latest migration\n",
    )


def test_a_database_not_up_yet_is_waited_for_then_named() -> None:
    began = time.monotonic()
    code, output = _cli("--check", "--wait", "1", "--database-url", "postgresql://u@127.0.0.1:1/x")
    assert code == 1 and "the database is unreachable" in output
    assert 0.9 <= time.monotonic() - began < 10


def test_tables_at_the_latest_migration_are_left_without_alembic(database_url: str) -> None:
    """The latest revision is read from the migration files as alembic's own heads;
    a start on tables already there (every start but a release's first) migrates
    nothing and loads no alembic, which would stay in the server's memory."""
    database = open_database(database_url)
    try:
        heads = set(ScriptDirectory(str(MIGRATIONS)).get_heads())
        assert latest_migrations() == heads
        assert migrations_behind(database) != ""
        migrate(database)
        assert migrations_behind(database) == ""
    finally:
        database.dispose()
    script = (
        "import sys\n"
        "from services.adapters.read_model_db import migrate, open_database\n"
        f"database = open_database({database_url!r})\n"
        "migrate(database)\n"
        "database.dispose()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'mako')))\n"
    )
    started = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert started.stdout.strip() == "[]"


def test_a_server_or_worker_told_not_to_migrate_refuses_tables_not_migrated(
    database_url: str,
) -> None:
    """With SESSIONSTORE_MIGRATE_AT_START=false on tables no migration made, a server
    answered health SERVING and every listing UNAVAILABLE, and a worker projected
    into tables that were not there. Both now refuse to start in one line naming
    the migration to run, and start once it has run."""
    with pytest.raises(START_ERRORS) as refused:
        start_server(database_url, migrate_at_start=False)
    reason = start_refusal(refused.value)
    assert "not at this release's latest migration" in reason
    assert "`sessionstore migrate`" in reason and "SESSIONSTORE_MIGRATE_AT_START" in reason
    worker = WorkerProcess(database_url, migrate_at_start="false")
    try:
        assert worker.process.wait(timeout=60) == 1
        (line,) = worker.logged("cannot start")
        assert line["reason"] == reason
    finally:
        worker.end()
    migrate_database(database_url)
    with server_channel(database_url, migrate_at_start=False) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        answer = health.Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
        store = pb_grpc.SessionStoreStub(channel)
        store.CreateSession(pb.CreateSessionRequest(session_id="s-1"), timeout=10)
        listed = store.ListSessions(pb.ListSessionsRequest(), timeout=10)
        assert [s.id for s in listed.sessions] == ["s-1"]


@pytest.mark.parametrize(
    "command",
    [["readmodels", "status"], ["retention", "plan", "--policy-file", "policy.toml"]],
    ids=lambda c: " ".join(c[:2]),
)
def test_a_command_that_only_reads_refuses_tables_behind_and_migrates_nothing(
    database_url: str,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
) -> None:
    """On a store the release before still serves, these migrated its tables (a
    status or a dry run that wrote). They now say the tables are behind and what to
    run, in one line, exit 1 and change no table; once migrated, they answer."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.toml").write_text("")
    _store_with_one_session(database_url)
    database = open_database(database_url)
    try:
        _downgrade_to(database, "0005")  # the release before the recall index
        tables = _tables(database)
        result = CliRunner().invoke(cli, [*command, "--database-url", database_url])
        assert result.exit_code == 1, result.output
        (line,) = result.output.splitlines()
        assert line.startswith("Error: store not migrated: read models at 0005, not 0006")
        assert "run `sessionstore migrate` first" in line
        assert migrations_behind(database) == "at 0005, not 0006"
        assert _tables(database) == tables
    finally:
        database.dispose()
    migrate_database(database_url)
    result = CliRunner().invoke(cli, [*command, "--database-url", database_url])
    assert result.exit_code == 0, result.output


# A policy that erases every session, of any age: `retention apply` at work.
ERASE_ALL = """
[[retention]]
name = "all"
tenant = "*"
max_age_days = 0
"""


@pytest.mark.parametrize("command", WRITING_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_command_that_writes_refuses_tables_behind_and_migrates_nothing(
    database_url: str,
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
) -> None:
    """Run from a new release against a store the release before still serves,
    `rebuild`, `readmodels retry` and `retention apply` migrated its tables first
    (made the event store's table it lacked, migrated the read models) under the
    servers serving it: always for the first two, for `retention apply` unless
    SESSIONSTORE_MIGRATE_AT_START was false (and then it said to start with it true).
    Each now refuses such a store in one line naming `sessionstore migrate`, as the
    commands that only read do, whatever the setting says, and changes no table;
    once migrated, each does its work."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.toml").write_text(ERASE_ALL)
    # The release before: without a table a release added to the event store (the
    # idempotency keys'), and the read models before the recall index.
    keys = _store_without_the_keys_table(database_url)
    database = open_database(database_url)
    try:
        _downgrade_to(database, "0005")
        tables = _tables(database)
        for setting in MIGRATE_AT_START_SETTINGS:
            result = CliRunner().invoke(
                cli,
                [*command, "--database-url", database_url],
                env={"SESSIONSTORE_MIGRATE_AT_START": setting},
            )
            assert result.exit_code == 1, result.output
            (line,) = result.output.splitlines()
            assert line == (
                f"Error: store not migrated: event store tables missing: {keys}; read "
                f"models at 0005, not 0006: {WRITE_REFUSAL}"
            )
            assert migrations_behind(database) == "at 0005, not 0006"
            assert _tables(database) == tables
    finally:
        database.dispose()
    migrate_database(database_url)
    result = CliRunner().invoke(cli, [*command, "--database-url", database_url])
    assert result.exit_code == 0, result.output
    done = {
        "rebuild": "catalog rebuilt: 1 events applied, at position ",
        "readmodels": "0 quarantined events applied, 0 still failing (0 sessions",
        "retention": "erased 1 session, wrote 0 exports, left 0 for a later run, 0 failed",
    }[command[0]]
    assert done in result.output


def test_tables_a_newer_release_migrated_are_refused_for_what_they_are(
    database_url: str, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rolled back to this release on tables a newer one migrated, a server told not
    to migrate, `migrate --check` and the other commands on the database said the tables
    were not migrated and to run `sessionstore migrate`, which cannot take them
    back (it, and a start that migrates, failed with a traceback on the revision).
    They say a newer release migrated them and what to run instead, in one line,
    at once (no migration job can help), changing no table."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.toml").write_text("")
    _store_with_one_session(database_url)  # the newer release, as far as its tables go
    (head,) = latest_migrations()
    newer = f"{int(head) + 1:04d}"
    database = open_database(database_url)
    try:
        _stamp(database, newer)
        tables = _tables(database)
        with pytest.raises(START_ERRORS) as refused:
            start_server(database_url, migrate_at_start=False)
        reason = start_refusal(refused.value)
        with pytest.raises(START_ERRORS) as migrating:
            start_server(database_url)  # told to migrate at start
        assert start_refusal(migrating.value) == reason
        assert reason.startswith(
            f"the read models' tables were migrated by a newer release (at {newer}; this "
            f"release knows migrations up to {head}): run that release, or a later one; "
            "`sessionstore migrate` of this release cannot help"
        )
        for command in (
            ["readmodels", "status"],
            ["retention", "plan", "--policy-file", "policy.toml"],
            ["migrate", "--check", "--wait", "30"],
            ["migrate"],
            *WRITING_COMMANDS,
        ):
            began = time.monotonic()
            result = CliRunner().invoke(cli, [*command, "--database-url", database_url])
            assert result.exit_code == 1, result.output
            assert result.output.splitlines() == [f"Error: {reason}"]
            assert time.monotonic() - began < 10
        assert _tables(database) == tables
    finally:
        database.dispose()


def _stamp(database: ReadModelDatabase, revision: str) -> None:
    """The tables' revision set as a release with more migrations leaves it."""
    table = f'"{database.schema}".{VERSION_TABLE}' if database.schema else VERSION_TABLE
    with database.writer.begin() as connection:
        connection.exec_driver_sql(f"UPDATE {table} SET version_num = '{revision}'")


def _tables(database: ReadModelDatabase) -> list[str]:
    with database.reader.connect() as connection:
        return sorted(inspect(connection).get_table_names(schema=database.schema))
