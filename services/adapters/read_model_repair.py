"""Read-model tables and indexes dropped from a store at the latest migration: told,
made again, and rebuilt from the events.

Alembic's version table says which migrations the read models' tables went
through, not that the tables are still there: a table dropped since (by hand,
by a tool, by a partial restore) is not made again by upgrading to a revision
the store is at already. A read model is derived from the event log, so nothing
is lost with its tables: `sessionstore migrate` (and a start that migrates)
makes them again and sets the model's position back to zero, so that its rows
are written again from the first event (as migration 0003 did for the
compaction audit).

The tables are made by the migrations themselves, never from a second
description that could drift from them: the migrations run into a scratch place
(an in-memory SQLite database; on PostgreSQL a schema of its own, in the
migration's transaction) and the tables made there are taken over (SQLite: the
statements that made them run again; PostgreSQL: ALTER TABLE ... SET SCHEMA,
which brings their indexes and sequences along). Every table of a model is made
again when one of its tables or indexes is missing, those still there dropped
first: rows left in them would not match a rebuild. Without the positions
(read_model_tracking) or the quarantine every model is, as what they held
cannot be told again; a cache (the recall index's embeddings) is made again
empty, with nothing to rebuild.

Only the names are looked at when nothing is missing (one query): a server
starting on a store as it should be loads no alembic. The migration itself is
services.adapters.read_model_db's, which calls this under its lock and hands it
the way to run the migrations.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, create_engine, delete, text, update

from services.adapters import read_model_tables as t

SHARED = tuple(table.name for table in t.SHARED_TABLES)
CACHES = tuple(table.name for table in t.CACHE_TABLES)
# Runs the migrations not applied yet on a connection, in a schema (None: SQLite's,
# or PostgreSQL's current one).
Upgrade = Callable[[Connection, str | None], None]


@dataclass(frozen=True)
class SchemaObject:
    """A table, index or trigger of the read models, and the table it belongs to."""

    name: str
    kind: str  # "table", "index" or "trigger"
    table: str


@dataclass(frozen=True)
class Remade:
    """What a store lacked of the read models' tables, and which models rebuild."""

    missing: tuple[SchemaObject, ...]
    tables: tuple[str, ...]  # made again (dropped first where still there)
    models: tuple[str, ...]  # their positions set back to zero

    def named(self) -> list[SchemaObject]:
        """The missing tables, and the indexes and triggers of tables still there (a
        table's own went with it)."""
        gone = {o.name for o in self.missing if o.kind == "table"}
        return [o for o in self.missing if o.kind == "table" or o.table not in gone]

    def describe(self) -> str:
        """What is missing, in a phrase, and what `sessionstore migrate` does of it."""
        named = self.named()
        parts = []
        for kind, plural in (("table", "tables"), ("index", "indexes"), ("trigger", "triggers")):
            names = [o.name for o in named if o.kind == kind]
            if names:
                parts.append(f"read model {plural} missing: {', '.join(names)}")
        if not self.models:
            then = "empty: a cache"
        elif len(self.models) == 1:
            then = f"and the {self.models[0]} read model is rebuilt from the events"
        else:
            then = f"and the {', '.join(self.models)} read models are rebuilt from the events"
        return f"{'; '.join(parts)} (`sessionstore migrate` makes them again, {then})"


def model_tables(postgres: bool) -> dict[str, tuple[str, ...]]:
    """The tables each read model keeps, by its name (its writer's, and SQLite's
    full-text table for the recall index)."""
    tables = {name: tuple(table.name for table in own) for name, own in t.MODEL_TABLES.items()}
    if not postgres:
        tables["recall"] += (t.SQLITE_FULL_TEXT_TABLE,)
    return tables


def expected_objects(postgres: bool) -> list[SchemaObject]:
    """The tables, indexes and triggers the latest migration makes (read_model_tables
    names them; a test holds the two together), in the order they are made."""
    found = []
    for table in t.metadata.tables.values():
        found.append(SchemaObject(table.name, "table", table.name))
        indexes = sorted(str(index.name) for index in table.indexes)
        found += [SchemaObject(name, "index", table.name) for name in indexes]
    if postgres:
        found.append(SchemaObject(t.POSTGRES_FULL_TEXT_INDEX, "index", t.recall_chunks.name))
    else:
        fts = t.SQLITE_FULL_TEXT_TABLE
        found.append(SchemaObject(fts, "table", fts))
        found += [
            SchemaObject(name, "trigger", t.recall_chunks.name)
            for name in t.SQLITE_FULL_TEXT_TRIGGERS
        ]
    return found


def present_names(connection: Connection, postgres: bool, schema: str | None) -> set[str]:
    """The names of the tables, indexes and triggers (and more) where the read models
    live: SQLite's schema table, the PostgreSQL schema's relations (``schema``; None:
    the current one)."""
    if not postgres:
        return {str(row[0]) for row in connection.exec_driver_sql("SELECT name FROM sqlite_master")}
    rows = connection.execute(
        text(
            "SELECT relname FROM pg_class JOIN pg_namespace ON pg_namespace.oid = relnamespace "
            "WHERE nspname = COALESCE(CAST(:schema AS text), current_schema())"
        ),
        {"schema": schema},
    )
    return {str(row[0]) for row in rows}


def find_dropped(connection: Connection, postgres: bool, schema: str | None) -> Remade | None:
    """What a store at the latest migration lacks of the read models' tables and
    indexes, and what making them again takes; None when nothing. Reads only."""
    present = present_names(connection, postgres, schema)
    missing = tuple(o for o in expected_objects(postgres) if o.name not in present)
    if not missing:
        return None
    tables = model_tables(postgres)
    hit = {o.table for o in missing}
    if hit & set(SHARED):
        models = tuple(tables)
    else:
        models = tuple(name for name, own in tables.items() if hit & set(own))
    remade = [table for name in models for table in tables[name]]
    remade += sorted(hit - set(remade))  # the shared tables and caches missing
    return Remade(missing, tuple(remade), models)


def remake_dropped(
    connection: Connection, postgres: bool, schema: str | None, upgrade: Upgrade
) -> Remade | None:
    """Makes the dropped tables again, as the latest migration makes them (``upgrade``
    runs it), and sets the positions of the models they belong to back to zero (their
    quarantine emptied), in the transaction of ``connection``, which holds the
    migration lock. None when nothing was missing."""
    remade = find_dropped(connection, postgres, schema)
    if remade is None:
        return None
    if postgres:
        _take_over_postgres(connection, schema, remade.tables, upgrade)
    else:
        _make_again_sqlite(connection, remade.tables, upgrade)
    models = list(remade.models)
    connection.execute(update(t.tracking).where(t.tracking.c.name.in_(models)).values(position=0))
    connection.execute(delete(t.quarantine).where(t.quarantine.c.model.in_(models)))
    return remade


def _make_again_sqlite(connection: Connection, tables: Sequence[str], upgrade: Upgrade) -> None:
    """Runs again the statements that made ``tables`` (their indexes and triggers
    too) in a database the migrations made from nothing."""
    scratch = create_engine("sqlite://")
    try:
        with scratch.begin() as made:
            upgrade(made, None)
            rows = made.exec_driver_sql(
                "SELECT tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid"
            ).all()
    finally:
        scratch.dispose()
    for table in tables:
        connection.exec_driver_sql(f'DROP TABLE IF EXISTS "{table}"')
    for table, statement in rows:
        if table in tables:
            connection.exec_driver_sql(str(statement))


def _take_over_postgres(
    connection: Connection, schema: str | None, tables: Sequence[str], upgrade: Upgrade
) -> None:
    """Moves ``tables``, as the migrations make them in a schema of their own, into
    the store's schema. The scratch schema lives and goes within the transaction."""
    schema = schema or str(connection.exec_driver_sql("SELECT current_schema()").scalar())
    scratch = f"sessionstore_remake_{uuid.uuid4().hex[:12]}"
    connection.exec_driver_sql(f'CREATE SCHEMA "{scratch}"')
    upgrade(connection, scratch)
    for table in tables:
        connection.exec_driver_sql(f'DROP TABLE IF EXISTS "{schema}"."{table}"')
        connection.exec_driver_sql(f'ALTER TABLE "{scratch}"."{table}" SET SCHEMA "{schema}"')
    connection.exec_driver_sql(f'DROP SCHEMA "{scratch}" CASCADE')
