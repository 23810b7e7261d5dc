"""Read-model tables whose recorded migration was lost: named, and recorded again
when their schema proves which revision they are at.

Alembic's version table (read_model_migrations) is the one record of the
migrations the read models' tables went through. Dropped or emptied since (by
hand, by a tool, by a restore of part of the database) while the tables stay,
the store read as one at no migration, and upgrading it ran the first migration
again over tables that are there: "table read_model_tracking already exists".
What only checks a store now names what happened (tables_without_version);
what migrates tells the revision from the tables themselves before it upgrades
(record_lost_version), or is told it by the operator (`migrate --stamp`).

The revision is told from the migrations themselves, as read_model_repair makes
dropped tables again, never from a second description that could drift from
them: each revision is run into a scratch place (an in-memory SQLite database;
on PostgreSQL a schema of its own, in the migration's transaction) and the
tables, columns with their types, indexes and triggers it leaves are compared
with the store's. Only an exact match is taken. Where several revisions leave
the same schema (0005 changes nothing on SQLite), the earliest is recorded: the
migrations after it then run again, which for a migration that changes no
schema changes read-model rows at most (derived from the events, rebuilt),
where skipping one never run would leave them wrong for good.

Whatever recorded the revision, the migrations that follow it are checked in the
same transaction: one that fails on the tables as they are (a column there
already), or a store not left with every table, column and index the latest
migration makes, is refused and rolled back, the version table as it was.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import sqlalchemy.exc
from sqlalchemy import Connection, create_engine, inspect, text

from services.adapters.database_errors import kind_of
from services.adapters.read_model_repair import expected_objects, present_names
from services.adapters.start_errors import StartRefused, start_refusal

# Runs alembic on a connection, in a schema (None: SQLite's, or PostgreSQL's
# current one), to a revision: upgrading to it, or recording it (stamp).
Step = Callable[[Connection, str | None, str], None]
# (kind, table, name, type): a table, a column, an index or a trigger.
Entry = tuple[str, str, str, str]


@dataclass(frozen=True)
class Migrations:
    """This release's migrations, and how to run them (services.adapters.read_model_db)."""

    revisions: tuple[str, ...]  # in the order they apply
    upgrade: Step
    stamp: Step
    version_table: str


@dataclass(frozen=True)
class Recorded:
    """The revision recorded for tables whose version was lost, and why that one."""

    revision: str
    version_table: str
    lost: str  # "missing" or "empty": what became of the version table
    matched: tuple[str, ...]  # the revisions whose schema the tables had; none: --stamp
    latest: str  # this release's latest revision
    latest_schema: frozenset[Entry]  # what it makes, checked after

    def describe(self) -> str:
        """What happened and what was done, in one line."""
        if not self.matched:
            why = "as --stamp named it"
        elif len(self.matched) == 1:
            why = f"as their tables are what migration {self.revision} leaves"
        else:
            why = (
                f"as their tables are what migrations {', '.join(self.matched)} leave (the "
                "earliest, so that no later migration is skipped)"
            )
        return (
            f"read models' recorded migration lost (the version table {self.version_table} "
            f"was {self.lost}): recorded {self.revision}, {why}"
        )


def version_table_state(connection: Connection, schema: str | None, version_table: str) -> str:
    """What became of the version table of a store that records no revision:
    "missing" (dropped) or "empty"."""
    return "empty" if inspect(connection).has_table(version_table, schema=schema) else "missing"


def tables_without_version(connection: Connection, schema: str | None) -> bool:
    """Whether a store that records no revision has read-model tables all the same
    (one name query): then its version was lost, and it is not a new store."""
    postgres = connection.dialect.name == "postgresql"
    tables = {o.name for o in expected_objects(postgres) if o.kind == "table"}
    return bool(tables & present_names(connection, postgres, schema))


def describe_without_version(lost: str, version_table: str) -> str:
    """tables_without_version, in a phrase after "read models ", for what only checks."""
    return (
        f"at no recorded migration, though their tables are there (the version table "
        f"{version_table} is {lost}): `sessionstore migrate` tells their revision from "
        "their schema, records it and migrates on"
    )


def record_lost_version(
    connection: Connection,
    schema: str | None,
    current: set[str],
    migrations: Callable[[], Migrations],
    named: str | None = None,
) -> Recorded | None:
    """Records the revision of read-model tables whose version was lost (``current``,
    the revisions recorded, is empty), in the transaction of ``connection``, which
    holds the migration lock: ``named`` (--stamp), else the one their schema matches;
    StartRefused when none does. None when a revision is recorded, or the store has
    no read-model tables (a new store: nothing lost)."""
    if current:
        if named is not None:
            raise StartRefused(
                f"--stamp records the revision of read model tables whose version was lost; "
                f"this store records theirs ({', '.join(sorted(current))}): run `sessionstore "
                "migrate` without it"
            )
        return None
    if not tables_without_version(connection, schema):
        if named is not None:
            raise StartRefused(
                "--stamp records the revision of read model tables whose version was lost; "
                "this store has no read model tables: run `sessionstore migrate` without it"
            )
        return None
    this_release = migrations()
    if named is not None:
        _refuse_unknown(named, this_release.revisions)
    lost = version_table_state(connection, schema, this_release.version_table)
    postgres = connection.dialect.name == "postgresql"
    made = _made_by_each(connection, postgres, this_release)
    matched: tuple[str, ...] = ()
    if named is not None:
        revision = named
    else:
        present = _restricted(_schema_entries(connection, postgres, schema), made.values())
        matched = tuple(r for r in this_release.revisions if made[r] == present)
        if not matched:
            raise StartRefused(_unproven(lost, this_release))
        revision = matched[0]
    this_release.stamp(connection, schema, revision)
    latest = this_release.revisions[-1]
    return Recorded(revision, this_release.version_table, lost, matched, latest, made[latest])


@contextmanager
def migrating_on(
    connection: Connection, schema: str | None, recorded: Recorded | None
) -> Iterator[None]:
    """The migrations after a ``recorded`` revision (none: as ever). One that fails on
    the tables as they are (a table or column there already), or a store they leave
    without every table, column and index the latest migration makes, says that the
    tables were not at that revision (StartRefused): the transaction, the revision
    recorded with it, rolls back."""
    try:
        yield
    except sqlalchemy.exc.DBAPIError as error:
        if recorded is None or kind_of(error) is not None:
            raise  # not the tables' doing: the database down, a grant missing
        raise StartRefused(
            _not_at(recorded, f"a migration after it failed: {start_refusal(error)}")
        ) from error
    if recorded is None:
        return
    postgres = connection.dialect.name == "postgresql"
    lacking = recorded.latest_schema - _schema_entries(connection, postgres, schema)
    if lacking:
        named = ", ".join(sorted({f"{kind} {table}.{name}" for kind, table, name, _ in lacking}))
        tables = ", ".join(sorted({table for _, table, _, _ in lacking}))
        raise StartRefused(
            _not_at(recorded, f"migrated on from it, they lack what the latest makes: {named}")
            + f", or drop {tables} and run `sessionstore migrate --stamp {recorded.latest}`, "
            "which makes read model tables dropped again and rebuilds them from the events"
        )


def _not_at(recorded: Recorded, why: str) -> str:
    return (
        f"the read model tables are not at revision {recorded.revision} ({why}): nothing "
        "was recorded; run `sessionstore migrate --stamp REVISION` with the revision they "
        "are at"
    )


def _unproven(lost: str, migrations: Migrations) -> str:
    first, latest = migrations.revisions[0], migrations.revisions[-1]
    return (
        f"the read models' tables are there but no migration is recorded for them (the "
        f"version table {migrations.version_table} is {lost}), and their schema matches no "
        "revision of this release (a table, column or index dropped or changed since), so "
        "`sessionstore migrate` records none and runs no migration over them: run "
        f"`sessionstore migrate --stamp REVISION` with the revision they are at ({first} to "
        f"{latest}; nothing is recorded if the migrations after it fail or leave the tables "
        "unlike the latest's), or drop the read model tables that differ and run "
        f"`sessionstore migrate --stamp {latest}`, which makes them again and rebuilds them "
        "from the events"
    )


def _refuse_unknown(named: str, revisions: Sequence[str]) -> None:
    if named not in revisions:
        raise StartRefused(
            f"--stamp {named}: no such revision in this release ({', '.join(revisions)})"
        )


def _made_by_each(
    connection: Connection, postgres: bool, migrations: Migrations
) -> dict[str, frozenset[Entry]]:
    """What the store's tables are at each revision: the migrations run one by one
    into a scratch place, without the version table."""
    if postgres:
        return _made_in_postgres_scratch(connection, migrations)
    scratch = create_engine("sqlite://")
    try:
        with scratch.begin() as made:
            return _made_one_by_one(made, None, False, migrations)
    finally:
        scratch.dispose()


def _made_in_postgres_scratch(
    connection: Connection, migrations: Migrations
) -> dict[str, frozenset[Entry]]:
    """_made_by_each in a schema of its own that lives and goes in the transaction."""
    scratch = f"sessionstore_versions_{uuid.uuid4().hex[:12]}"
    connection.exec_driver_sql(f'CREATE SCHEMA "{scratch}"')
    try:
        return _made_one_by_one(connection, scratch, True, migrations)
    finally:
        connection.exec_driver_sql(f'DROP SCHEMA "{scratch}" CASCADE')


def _made_one_by_one(
    connection: Connection, schema: str | None, postgres: bool, migrations: Migrations
) -> dict[str, frozenset[Entry]]:
    made = {}
    for revision in migrations.revisions:
        migrations.upgrade(connection, schema, revision)
        entries = _schema_entries(connection, postgres, schema)
        made[revision] = frozenset(e for e in entries if e[1] != migrations.version_table)
    return made


def _restricted(entries: frozenset[Entry], made: Iterable[frozenset[Entry]]) -> frozenset[Entry]:
    """The store's ``entries`` of the tables some migration makes (not the event
    store's, nor another application's)."""
    tables = {entry[1] for each in made for entry in each}
    return frozenset(entry for entry in entries if entry[1] in tables)


def _schema_entries(connection: Connection, postgres: bool, schema: str | None) -> frozenset[Entry]:
    """The tables, columns (with their declared types), indexes and triggers where
    the read models live (``schema``; None: SQLite's, or PostgreSQL's current one)."""
    if postgres:
        return _postgres_entries(connection, schema)
    entries: set[Entry] = set()
    objects = connection.exec_driver_sql(
        "SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' "
        "ESCAPE '\\' AND type IN ('table', 'index', 'trigger')"
    ).all()
    for kind, name, table in objects:
        entries.add((str(kind), str(table), str(name), ""))
        if kind == "table":
            for column in connection.exec_driver_sql(f'PRAGMA table_info("{name}")'):
                entries.add(("column", str(name), str(column[1]), str(column[2]).upper()))
    return frozenset(entries)


def _postgres_entries(connection: Connection, schema: str | None) -> frozenset[Entry]:
    where = {"schema": schema}
    in_schema = (
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = COALESCE(CAST(:schema AS text), current_schema())"
    )
    columns = connection.execute(
        text(
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_class c "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
            f"{in_schema} AND c.relkind IN ('r', 'p')"
        ),
        where,
    ).all()
    indexes = connection.execute(
        text(
            "SELECT t.relname, c.relname FROM pg_index i JOIN pg_class c ON c.oid = "
            f"i.indexrelid JOIN pg_class t ON t.oid = i.indrelid {in_schema}"
        ),
        where,
    ).all()
    entries: set[Entry] = set()
    for table, column, kind in columns:
        entries.add(("table", str(table), str(table), ""))
        entries.add(("column", str(table), str(column), str(kind)))
    entries.update(("index", str(table), str(name), "") for table, name in indexes)
    return frozenset(entries)
