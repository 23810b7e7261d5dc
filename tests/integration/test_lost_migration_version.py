"""The read models' migration version lost (its table dropped or emptied) while
their tables stay, on SQLite and PostgreSQL.

The store read as one at no migration: `migrate --check` said "read models at no
migration", and `sessionstore migrate`, like a start that migrates, ran the first
migration again over the tables there ("table read_model_tracking already
exists"). Now what only checks names what happened; what migrates records the
revision the tables' schema matches and migrates on, or, when none matches,
refuses, naming `migrate --stamp REVISION`, and changes nothing.
"""

from __future__ import annotations

import pytest

from services.adapters import read_model_tables as t
from services.adapters.read_model_db import VERSION_TABLE, migrate, open_database
from services.adapters.start_errors import START_ERRORS, start_refusal
from services.config import sqlite_file
from tests.conftest import start_server
from tests.e2e.test_database_states import _execute
from tests.integration.test_dropped_tables import (
    Written,
    _cli,
    _still_there,
    _written_by_a_server,
)
from tests.integration.test_read_model_migrations import _upgrade_to
from tests.integration.test_store_not_migrated import _objects

LOSSES = {"dropped": f"DROP TABLE {VERSION_TABLE}", "emptied": f"DELETE FROM {VERSION_TABLE}"}
MIGRATED = ["read models migrated"]


def _lost_after_writing(url: str, loss: str) -> Written:
    """A store with sessions whose version table was then dropped or emptied."""
    written = _written_by_a_server(url)
    _execute(url, LOSSES[loss])
    return written


def _state(loss: str) -> str:
    return "missing" if loss == "dropped" else "empty"


def _refused_start(url: str, **settings: object) -> str:
    with pytest.raises(START_ERRORS) as refused:
        start_server(url, **settings)
    return start_refusal(refused.value)


@pytest.mark.parametrize("loss", LOSSES)
def test_a_lost_version_is_named_then_recorded_from_the_schema_by_migrate(
    database_url: str, loss: str
) -> None:
    written = _lost_after_writing(database_url, loss)
    before = _objects(database_url)
    told = (
        "read models at no recorded migration, though their tables are there (the version "
        f"table {VERSION_TABLE} is {_state(loss)}): `sessionstore migrate` tells their "
        "revision from their schema, records it and migrates on"
    )
    assert _cli(database_url, "migrate", "--check") == (1, f"store not migrated: {told}\n")
    code, output = _cli(database_url, "readmodels", "status")
    assert code == 1 and f"store not migrated: {told}: run `sessionstore migrate`" in output
    refused = _refused_start(database_url, migrate_at_start=False)
    assert f"latest migration ({told}) and SESSIONSTORE_MIGRATE_AT_START is false" in refused
    assert _objects(database_url) == before  # nothing made or migrated

    code, output = _cli(database_url, "migrate")
    assert code == 0, output
    assert output.splitlines() == [
        f"read models' recorded migration lost (the version table {VERSION_TABLE} was "
        f"{_state(loss)}): recorded 0006, as their tables are what migration 0006 leaves",
        *MIGRATED,
    ]
    assert _cli(database_url, "migrate", "--check") == (0, "read models at the latest migration\n")
    _still_there(database_url, written, migrate_at_start=False)


def test_a_start_that_migrates_records_the_lost_version_itself(database_url: str) -> None:
    written = _lost_after_writing(database_url, "dropped")
    _still_there(database_url, written)
    assert _cli(database_url, "migrate", "--check") == (0, "read models at the latest migration\n")


@pytest.mark.parametrize("revision", ["0002", "0004"])
def test_tables_of_an_earlier_release_are_recorded_at_their_revision_and_migrated_on(
    database_url: str, revision: str
) -> None:
    """Migration 0005 changes nothing on SQLite: tables at 0004 there are also what
    0005 leaves, and the earliest is recorded, so that no migration is skipped."""
    database = open_database(database_url)
    try:
        _upgrade_to(database, revision)
    finally:
        database.dispose()
    _execute(database_url, f"DROP TABLE {VERSION_TABLE}")
    code, output = _cli(database_url, "migrate")
    assert code == 0, output
    if revision == "0004" and sqlite_file(database_url):
        why = (
            "as their tables are what migrations 0004, 0005 leave (the earliest, so that no "
            "later migration is skipped)"
        )
    else:
        why = f"as their tables are what migration {revision} leaves"
    assert output.splitlines()[0].endswith(f"recorded {revision}, {why}")
    assert _cli(database_url, "migrate", "--check") == (0, "read models at the latest migration\n")


def test_tables_that_match_no_revision_are_refused_until_an_operator_names_one(
    database_url: str,
) -> None:
    """A column dropped besides the version table: no revision leaves the tables so.
    `migrate`, a start that migrates and a wrong --stamp refuse and change nothing;
    the table dropped and the latest revision named, `migrate` makes it again and
    rebuilds its read model from the events."""
    written = _lost_after_writing(database_url, "dropped")
    _execute(database_url, f"ALTER TABLE {t.compactions.name} DROP COLUMN requested_by")
    before = _objects(database_url)
    code, output = _cli(database_url, "migrate")
    assert code == 1
    unproven = (
        "the read models' tables are there but no migration is recorded for them (the version "
        f"table {VERSION_TABLE} is missing), and their schema matches no revision of this "
        "release (a table, column or index dropped or changed since), so `sessionstore "
        "migrate` records none and runs no migration over them: run `sessionstore migrate "
        "--stamp REVISION` with the revision they are at (0001 to 0006; nothing is recorded if "
        "the migrations after it fail or leave the tables unlike the latest's), or drop the "
        "read model tables that differ and run `sessionstore migrate --stamp 0006`, which "
        "makes them again and rebuilds them from the events"
    )
    assert output == f"Error: {unproven}\n"
    assert _refused_start(database_url) == unproven
    code, output = _cli(database_url, "migrate", "--stamp", "0001")
    assert code == 1
    assert output.startswith(
        "Error: the read model tables are not at revision 0001 (a migration after it failed: "
    )
    code, output = _cli(database_url, "migrate", "--stamp", "0006")
    assert output == (
        "Error: the read model tables are not at revision 0006 (migrated on from it, they "
        "lack what the latest makes: column compaction_audit.requested_by): nothing was "
        "recorded; run `sessionstore migrate --stamp REVISION` with the revision they are at, "
        "or drop compaction_audit and run `sessionstore migrate --stamp 0006`, which makes "
        "read model tables dropped again and rebuilds them from the events\n"
    )
    assert code == 1
    assert _objects(database_url) == before  # rolled back: no version recorded

    _execute(database_url, f"DROP TABLE {t.compactions.name}")
    code, output = _cli(database_url, "migrate", "--stamp", "0006")
    assert code == 0, output
    lines = output.splitlines()
    assert lines[0].endswith("was missing): recorded 0006, as --stamp named it")
    assert lines[1:3] == [*MIGRATED, "made again (missing: compaction_audit): compaction_audit"]
    assert lines[3].startswith("compactions rebuilt: ")
    code, output = _cli(database_url, "migrate", "--stamp", "0006")
    assert (code, output) == (
        1,
        "Error: --stamp records the revision of read model tables whose version was lost; "
        "this store records theirs (0006): run `sessionstore migrate` without it\n",
    )
    _still_there(database_url, written, migrate_at_start=False)


def test_a_new_store_migrates_from_the_first_revision_as_ever(database_url: str) -> None:
    """No read-model table, no version: nothing was lost, and no --stamp is taken."""
    code, output = _cli(database_url, "migrate", "--stamp", "0006")
    assert code == 1
    assert "this store has no read model tables: run `sessionstore migrate` without it" in output
    database = open_database(database_url)
    try:
        assert migrate(database).recorded is None
    finally:
        database.dispose()
    assert _cli(database_url, "migrate", "--check") == (0, "read models at the latest migration\n")
