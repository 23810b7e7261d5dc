"""Whether a store is at this release: the event store's tables there, the read
models at the latest migration.

Asked by what must not migrate: a server or worker told not to
(SESSIONSTORE_MIGRATE_AT_START=false), `migrate --check`, and every other
command on the database (those that only read, and `rebuild`, `readmodels
retry` and `retention apply`, which write rows but not the schema). Each asks
before it opens the event store, on plain connections, and changes nothing: a
store behind, an empty database included, is refused in one line naming
`sessionstore migrate`, the one command (with a start that migrates) that
creates or migrates tables.

A store at the latest migration may still lack a table dropped since: a read
model's is named, for `sessionstore migrate` to make again (its rows are
rebuilt from the events); the event log's (or the data keys') is refused by
every process, one that migrates included, saying to restore it from a backup
(services.adapters.event_tables). Read-model tables whose recorded migration was
lost (alembic's version table dropped or emptied) are named for what they are,
not as a store at no migration (services.adapters.lost_version).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, func, inspect, select

from services.adapters import read_model_tables as t
from services.adapters.event_tables import (
    describe_lost,
    describe_missing,
    event_tables,
    lost_event_tables,
    missing_event_tables,
)
from services.adapters.postgres_check import DatabaseUnreachable, first_look, missing_schema
from services.adapters.read_model_db import (
    ReadModelDatabase,
    open_database,
    read_models_behind,
    reading,
)
from services.adapters.read_model_repair import find_dropped
from services.adapters.start_errors import StartRefused
from services.config import sqlite_file

START_REFUSAL = (
    "the store's tables are not at this release's latest migration ({behind}) and "
    "SESSIONSTORE_MIGRATE_AT_START is false: run `sessionstore migrate` first, or start "
    "with SESSIONSTORE_MIGRATE_AT_START=true"
)


def store_behind(
    connection: Connection, database: ReadModelDatabase, *, read_models: bool = True
) -> str:
    """Empty when the store is at this release, else what is not, in a phrase: the
    event store's tables missing and (with ``read_models``) where the read models
    are, or which of their tables are missing. Tables a newer release migrated, and
    an event log (or data key) table missing from a store that had it, are refused
    (StartRefused), whatever else."""
    behind = read_models_behind(connection, database.schema) if read_models else ""
    missing = missing_event_tables(connection, database.env)
    refuse_lost_tables(connection, database, missing)
    parts = [describe_missing(missing, database.env)] if missing else []
    if behind:
        parts.append(f"read models {behind}")
    elif read_models:
        dropped = find_dropped(connection, database.postgres, database.schema)
        if dropped is not None:
            parts.append(dropped.describe())
    return "; ".join(parts)


def refuse_lost_tables(
    connection: Connection, database: ReadModelDatabase, missing: list[str]
) -> None:
    """Refuses (StartRefused) a store that lost its event log or data key table:
    ``missing`` (missing_event_tables) holds one, and the store had it."""
    events = event_tables(database.env)[0]
    applied = events in missing and _read_models_applied_events(connection, database)
    lost = lost_event_tables(missing, database.env, events_applied=applied)
    if lost:
        raise StartRefused(describe_lost(lost, database.env))


def _read_models_applied_events(connection: Connection, database: ReadModelDatabase) -> bool:
    """Whether a read model applied events: then there were events to apply."""
    if not inspect(connection).has_table(t.tracking.name, schema=database.schema):
        return False
    return bool(connection.execute(select(func.max(t.tracking.c.position))).scalar())


def refuse_lost_tables_to_migrate(database_url: str) -> None:
    """refuse_lost_tables, for a process that migrates, before it opens the event store
    (which would make the tables it lacks, empty): on a plain connection, a PostgreSQL
    server that cannot be reached named as a start names it. A store yet to be made
    (no SQLite file, no schema) lost nothing."""
    file = sqlite_file(database_url)
    if file is not None and not file.exists():
        return
    with _first_look_at(database_url) as (database, connection, has_schema):
        if has_schema:
            refuse_lost_tables(connection, database, missing_event_tables(connection, database.env))


@contextmanager
def _first_look_at(
    database_url: str,
) -> Iterator[tuple[ReadModelDatabase, Connection, bool]]:
    """The database at ``database_url`` on a plain connection, and whether its schema is
    there (always, without one): a PostgreSQL server that cannot be reached is named
    as a start names it. Closed after the block."""
    database = open_database(database_url)
    try:
        if database.postgres:
            with first_look(database.env):
                pass
        with database.reader.connect() as connection:
            has_schema = not database.schema or inspect(connection).has_schema(database.schema)
            yield database, connection, has_schema
    finally:
        database.dispose()


def not_migrated(database: ReadModelDatabase, *, read_models: bool = True) -> str:
    """store_behind, for a process that waits for another to migrate: a schema not
    there yet is named, and a database that cannot be reached is Unavailable."""
    with reading(database.reader) as connection:
        if database.schema and not inspect(connection).has_schema(database.schema):
            return missing_schema(database.env)  # a typo, or the migration job not run yet
        return store_behind(connection, database, read_models=read_models)


def require_migrated(database: ReadModelDatabase) -> None:
    """Refuses a start on a store this release has not migrated, for a process told
    not to migrate it itself: it would serve every listing UNAVAILABLE (or project
    into tables that are not there) while its health said SERVING."""
    behind = not_migrated(database)
    if behind:
        raise StartRefused(START_REFUSAL.format(behind=behind))


def require_migrated_to_start(database_url: str, *, read_models: bool) -> None:
    """require_migrated, for a server or worker told not to migrate, before it opens
    the event store (which would create the tables it lacks) and on ``database_url``
    itself: a SQLite file that is not there is not made, and a PostgreSQL server that
    cannot be reached, a database or a schema that is not there are named as a start
    that migrates names them. ``read_models``: whether the process keeps or reads them
    (not with SESSIONSTORE_PROJECTIONS=off)."""
    file = sqlite_file(database_url)
    if file is not None and not file.exists():
        raise StartRefused(START_REFUSAL.format(behind=f"no database at {file.resolve()}"))
    with _first_look_at(database_url) as (database, connection, has_schema):
        behind = (
            store_behind(connection, database, read_models=read_models)
            if has_schema
            else f"no schema {database.schema!r} in the database"
        )
    if behind:
        raise StartRefused(START_REFUSAL.format(behind=behind))


def require_migrated_to_read(database_url: str) -> None:
    """Refuses, in one line, a store not at this release, for an operator's command
    that only reads it (`readmodels status`, `retention plan`): it must neither
    migrate a store the running release still serves nor make the tables of an
    empty one."""
    _require_migrated_for_command(
        database_url, "this command only reads: it creates and migrates nothing"
    )


def require_migrated_to_write(database_url: str) -> None:
    """Refuses, in one line, a store not at this release, for an operator's command
    that writes rows but not the schema (`rebuild`, `readmodels retry`, `retention
    apply`). Whatever SESSIONSTORE_MIGRATE_AT_START says where it runs (a server's
    setting, seldom an operator's shell): run from a new release against a store the
    release before still serves, it would otherwise migrate the tables under those
    servers, outside the deploy's migration step."""
    _require_migrated_for_command(
        database_url,
        "this command creates and migrates nothing: servers of the release before may "
        "still serve the store",
    )


def _require_migrated_for_command(database_url: str, why: str) -> None:
    """Checked before the event store is opened, and on a plain connection, so that
    a database that cannot be reached is named as the other commands name it; tables
    a newer release migrated are refused for what they are (StartRefused)."""
    database = open_database(database_url)
    try:
        with database.reader.connect() as connection:
            if database.schema and not inspect(connection).has_schema(database.schema):
                raise DatabaseUnreachable(missing_schema(database.env))
            behind = store_behind(connection, database)
    finally:
        database.dispose()
    if behind:
        raise StartRefused(
            f"store not migrated: {behind}: run `sessionstore migrate` first ({why})"
        )
