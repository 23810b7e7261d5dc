"""A table dropped from a store at the latest migration, on SQLite and PostgreSQL.

The migrations' version said the store was current, so `sessionstore migrate`
did nothing, `migrate --check` said migrated, and the server answered
`store_not_migrated` for good, saying to restore the table. A read model's
tables (and indexes) are now named by `migrate --check`, made again by
`migrate` as the latest migration makes them, and rebuilt from the events. The
event log's own table is refused instead, by `migrate` and every other process:
made again, empty, it would hide that every session was lost.
"""

from __future__ import annotations

import sqlite3
import uuid
from contextlib import closing
from typing import NamedTuple

import grpc
import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.adapters import read_model_tables as t
from services.adapters.read_model_db import VERSION_TABLE
from services.adapters.read_model_repair import CACHES, SHARED, expected_objects, model_tables
from services.adapters.start_errors import START_ERRORS, start_refusal
from services.cli import cli
from services.config import sqlite_file
from tests.conftest import server_channel, start_server
from tests.e2e.test_database_states import MIGRATE, _execute, _refusal, _schema
from tests.integration.test_store_not_migrated import _objects
from tests.support.grpc_calls import Stub, append, new_session, user

FACT = "The staging database password rotates via vault path secret/zebra-7731 every Monday."
# As deployed by default: the CLI's environment keeps no recall index.
WITHOUT_RECALL = {"SESSIONSTORE_RECALL_INDEX": "false"}


def _cli(url: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [*args, "--database-url", url], env=env or WITHOUT_RECALL)
    return result.exit_code, result.output


def _events_table(url: str) -> str:
    return "stored_events" if sqlite_file(url) else "sessionstore_events"


def _made_by_migrations(url: str) -> list[str]:
    """The read models' tables, indexes and triggers in the database, as the
    migrations made them: without the event store's, alembic's version table,
    primary keys, sequences and SQLite's full-text shadow tables."""
    file = sqlite_file(url)
    if file is not None:
        with closing(sqlite3.connect(file)) as connection:
            rows = connection.execute(
                "SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                "AND name NOT LIKE 'stored\\_%' ESCAPE '\\' "
                "AND name NOT LIKE 'recall\\_fts\\_%' ESCAPE '\\'"
            ).fetchall()
    else:
        with psycopg.connect(url.split("?")[0]) as connection:
            rows = connection.execute(
                "SELECT c.relname FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "LEFT JOIN pg_index i ON i.indexrelid = c.oid "
                "WHERE n.nspname = %s AND (c.relkind = 'r' OR (c.relkind = 'i' AND NOT "
                "i.indisprimary)) AND c.relname NOT LIKE 'sessionstore\\_%%'",
                (_schema(url),),
            ).fetchall()
    return sorted(str(row[0]) for row in rows if row[0] != VERSION_TABLE)


def test_the_tables_module_names_what_the_latest_migration_makes(database_url: str) -> None:
    """What tells a table or index missing is read_model_tables' description of the
    latest migration (no alembic at each start): it must name all the migrations
    make, and nothing else; and every table belongs to a model, is shared, or a cache."""
    assert _cli(database_url, "migrate") == (0, "read models migrated\n")
    postgres = sqlite_file(database_url) is None
    assert _made_by_migrations(database_url) == sorted(o.name for o in expected_objects(postgres))
    owned = [table for tables in model_tables(postgres).values() for table in tables]
    assert sorted([*owned, *SHARED, *CACHES]) == sorted(
        {o.table for o in expected_objects(postgres)}
    )
    assert len(owned) == len(set(owned))
    assert set(t.metadata.tables) <= set(owned) | set(SHARED) | set(CACHES)


def _sessions(store: Stub) -> list[pb.Session]:
    return list(store.ListSessions(pb.ListSessionsRequest(), timeout=10).sessions)


def _recall(store: Stub, session_id: str) -> list[str]:
    found = store.Recall(pb.RecallRequest(session_id=session_id, query="zebra"), timeout=10)
    return [hit.entry_id for hit in found.hits]


class Written(NamedTuple):
    """What a store held before it lost a table: what the catalog listed, and the
    session and entry recall found."""

    listed: list[pb.Session]
    session_id: str
    fact: str


def _written(store: Stub) -> Written:
    """Two sessions, one with the fact to recall."""
    first = new_session(store, model="gpt-4o", title="first", labels={"team": "a"})
    append(store, first.id, user("hello"), user("again"))
    second = new_session(store, model="gpt-4o", title="second")
    (fact,) = append(store, second.id, user(FACT)).entry_ids
    assert _recall(store, second.id) == [fact]
    return Written(_sessions(store), second.id, fact)


def _written_by_a_server(url: str) -> Written:
    """``_written`` by a server started on ``url`` for it and stopped after: the store
    as the next process finds it, once a table went from under it."""
    with server_channel(url) as channel:
        return _written(Stub(channel))


def _still_there(url: str, written: Written, **settings: object) -> None:
    """A server started on ``url`` (with ``settings``) lists what was written, and
    recall finds the fact."""
    with server_channel(url, **settings) as channel:
        store = Stub(channel)
        assert _sessions(store) == written.listed
        assert _recall(store, written.session_id) == [written.fact]


def test_a_dropped_read_model_table_is_made_again_and_rebuilt_from_the_events(
    database_url: str,
) -> None:
    """Under a running server: the catalog's table, the recall index's chunks and the
    prune audit's index dropped. `migrate --check` names them, `migrate` makes them
    again and rebuilds the catalog and the prune audit from the events; the recall
    index (not kept where the CLI runs) is set back for the server's projection,
    which rebuilds it when a query waits for it, no write needed to wake it."""
    with server_channel(database_url) as channel:
        store = Stub(channel)
        listed, session_id, fact = _written(store)
        _execute(
            database_url,
            "DROP TABLE session_catalog",
            "DROP TABLE recall_chunks",
            "DROP INDEX prune_audit_time",
        )
        code, message, reason, _ = _refusal(lambda: _sessions(store))
        assert (code, reason) == (grpc.StatusCode.UNAVAILABLE, "store_not_migrated"), message
        assert MIGRATE in message and "read model's dropped tables again" in message

        code, output = _cli(database_url, "migrate", "--check")
        assert code == 1
        assert output == (
            "store not migrated: read model tables missing: session_catalog, "
            "recall_chunks; read model indexes missing: prune_audit_time (`sessionstore "
            "migrate` makes them again, and the catalog, prunes, recall read models are "
            "rebuilt from the events)\n"
        )

        code, output = _cli(database_url, "migrate")
        assert code == 0, output
        lines = output.splitlines()
        assert lines[:2] == [
            "read models migrated",
            "made again (missing: session_catalog, prune_audit_time, recall_chunks): "
            "session_catalog_labels, session_catalog, prune_audit, recall_chunks, "
            "recall_sessions" + ("" if sqlite_file(database_url) is None else ", recall_fts"),
        ]
        assert lines[2].startswith("catalog rebuilt: ")
        assert lines[3].startswith("prunes rebuilt: ")
        assert lines[4].startswith("recall emptied, not rebuilt here")

        assert _sessions(store) == listed
        assert _recall(store, session_id) == [fact]
        assert "prune_audit_time" in _made_by_migrations(database_url)
        assert _cli(database_url, "migrate", "--check") == (
            0,
            "read models at the latest migration\n",
        )
        status = store.GetReadModelStatus(pb.GetReadModelStatusRequest(), timeout=10)
        assert not status.quarantined, status.quarantined


def test_a_start_that_migrates_makes_a_dropped_table_again_for_its_projection(
    database_url: str,
) -> None:
    """The read models' quarantine dropped: what it held cannot be told again, so
    every model is made again, and the server's projection rebuilds each."""
    written = _written_by_a_server(database_url)
    _execute(database_url, f"DROP TABLE {t.quarantine.name}")
    _still_there(database_url, written)
    assert _made_by_migrations(database_url) == sorted(
        o.name for o in expected_objects(sqlite_file(database_url) is None)
    )


def _lost(url: str, *tables: str) -> str:
    """What `migrate`, `migrate --check`, another command, and a server that migrates
    at start say of a store that lost ``tables``; each refuses, and makes nothing."""
    before = _objects(url)
    refusals = []
    for command in (["migrate"], ["migrate", "--check"], ["readmodels", "status"]):
        code, output = _cli(url, *command)
        assert code == 1, output
        (line,) = output.splitlines()
        refusals.append(line.removeprefix("Error: "))
    with pytest.raises(START_ERRORS) as refused:
        start_server(url)
    refusals.append(start_refusal(refused.value))
    with pytest.raises(START_ERRORS) as refused:
        start_server(url, migrate_at_start=False)
    refusals.append(start_refusal(refused.value))
    assert len(set(refusals)) == 1, refusals
    assert _objects(url) == before
    for table in tables:
        assert table in refusals[0]
    return refusals[0]


def test_a_dropped_event_log_table_is_refused_not_made_again_empty(database_url: str) -> None:
    _written_by_a_server(database_url)
    events = _events_table(database_url)
    _execute(database_url, f"DROP TABLE {events}")
    assert _lost(database_url, events) == (
        f"the event log table {events} is missing from a store that had it (the events "
        "are the sessions: no command can make them again): restore it from a backup of "
        "the database; `sessionstore migrate` refuses to make it again, empty, which would "
        "hide the loss"
    )


def test_every_event_store_table_dropped_is_refused_once_the_read_models_applied_events(
    database_url: str,
) -> None:
    """No table of the event store left to tell that it had one: the read models'
    positions do (they applied events from it). A store whose read models applied
    none is still made whole by `migrate` (as one migrated before the event store's
    tables were is: tests/integration/test_store_not_migrated.py)."""
    _written_by_a_server(database_url)
    events = _events_table(database_url)
    tables = [name for name in _objects(database_url) if f" {events}" in name]
    prefix = "table" if sqlite_file(database_url) else "r"
    dropped = [name.split(" ", 1)[1] for name in tables if name.startswith(f"{prefix} ")]
    dropped = [events.removesuffix("_events") + "_snapshots", *dropped]
    _execute(database_url, *(f"DROP TABLE IF EXISTS {name}" for name in dropped))
    assert _lost(database_url, events).startswith(f"the event log table {events} is missing")


def test_a_dropped_data_key_table_is_refused_not_made_again_empty(database_url: str) -> None:
    """Made again, empty, every session's content would read as erased."""
    _written_by_a_server(database_url)
    keys = f"{_events_table(database_url)}_data_keys"
    _execute(database_url, f"DROP TABLE {keys}")
    assert _lost(database_url, keys).startswith(
        f"the data key table {keys} is missing from a store that had it (its keys open "
        "the content sealed in the events: without them every session reads as erased): "
        "restore it from a backup"
    )


def test_a_store_of_the_release_before_sealing_gets_its_data_key_table(
    database_url: str,
) -> None:
    """No data key table and no legacy tenants' table (made after it): a store of a
    release before content was sealed, which `migrate` brings to this one."""
    _written_by_a_server(database_url)
    events = _events_table(database_url)
    _execute(database_url, f"DROP TABLE {events}_data_keys", f"DROP TABLE {events}_legacy_tenants")
    code, output = _cli(database_url, "migrate")
    assert code == 0, output
    names = _objects(database_url)
    assert any(name.endswith(f" {events}_data_keys") for name in names)


def test_a_read_model_repair_holds_on_a_postgres_store_without_a_schema_name(
    postgres_url: str,
) -> None:
    """A URL without schema= keeps the tables in the role's current schema (public): a
    dropped table is made again there, not in the scratch schema the migrations ran in."""
    name = f"remake_{uuid.uuid4().hex[:12]}"
    base = postgres_url.split("?")[0]
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = f"{base.rsplit('/', 1)[0]}/{name}"
    try:
        assert _cli(url, "migrate")[0] == 0
        with psycopg.connect(url, autocommit=True) as connection:
            connection.execute("DROP TABLE public.session_catalog")
        code, output = _cli(url, "migrate")
        assert code == 0 and "made again (missing: session_catalog)" in output, output
        with psycopg.connect(url) as connection:
            found = connection.execute(
                "SELECT nspname FROM pg_class JOIN pg_namespace ON pg_namespace.oid = "
                "relnamespace WHERE relname = 'session_catalog'"
            ).fetchall()
            schemas = connection.execute("SELECT nspname FROM pg_namespace").fetchall()
        assert found == [("public",)]
        assert not [s for (s,) in schemas if s.startswith("sessionstore_remake")]
        assert _cli(url, "migrate", "--check")[0] == 0
    finally:
        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
