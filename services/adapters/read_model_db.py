"""Where the read models live: the events' own database, through SQLAlchemy.

SQLite writers open with BEGIN IMMEDIATE, taking the database's write lock
before they read their tracking position: two projectors (two servers, or a
server and a worker) then take turns instead of both applying one batch.
On PostgreSQL the tracking row is locked FOR UPDATE to the same end.
Migrations run under the same kind of lock (pg_advisory_xact_lock on
PostgreSQL), so replicas starting together never race.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import Connection, Engine, create_engine, event, inspect
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL
from sqlalchemy.pool import QueuePool

from services.adapters.database_errors import kind_of
from services.adapters.database_refusals import database_refusal
from services.adapters.lost_version import (
    Migrations,
    Recorded,
    describe_without_version,
    migrating_on,
    record_lost_version,
    tables_without_version,
    version_table_state,
)
from services.adapters.postgres_check import missing_schema
from services.adapters.postgres_timeouts import connect_settings
from services.adapters.read_model_repair import Remade, remake_dropped
from services.adapters.start_errors import StartRefused
from services.config import persistence_env

MIGRATIONS = Path(__file__).with_name("migrations")
VERSION_TABLE = "read_model_migrations"
MIGRATE_LOCK = "sessionstore.read_models.migrate"
# How alembic writes a migration's own revision and the one it follows.
_REVISION = re.compile(r'^(down_revision|revision) = (?:"([^"]+)"|None)$', re.MULTILINE)
WRITER_LOCK_TIMEOUT_MS = 5_000
OUTAGE = "the database is unreachable ({reason}); retry shortly"
# The read models' pool with every connection in use, said without the pool's own
# words (sizes no setting of ours changes, and a link to SQLAlchemy's documentation).
BUSY = (
    "no database connection free within {waited:.1f} s: all {size} of this server's "
    "connections for the read models' queries are in use; retry shortly"
)


@dataclass(frozen=True)
class ReadModelDatabase:
    """Engines for the read models: ``writer`` locks at BEGIN, ``reader`` does not."""

    writer: Engine
    reader: Engine
    schema: str | None
    postgres: bool
    # The events' NOTIFY channel's connection settings (PostgreSQL only).
    env: dict[str, str]

    def dispose(self) -> None:
        self.writer.dispose()
        self.reader.dispose()


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` comes from the database's state (down, busy or locked; not
    migrated; a grant missing: retry later, once it passes or is fixed) rather than
    from what was asked of it."""
    return kind_of(error) is not None


def is_lock_wait(error: BaseException) -> bool:
    """Whether ``error`` is a lock another transaction held past our lock timeout."""
    cause = error.__cause__ if error.__cause__ is not None else error
    orig = getattr(cause, "orig", cause)
    return isinstance(orig, psycopg.errors.LockNotAvailable)


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    """A connection for a request's query. A database that cannot be reached (or,
    on SQLite, stays locked) is UNAVAILABLE, to retry, as for the event store; so
    are tables missing and a grant lacking, saying what an operator must do."""
    try:
        with engine.connect() as connection:
            yield connection
    except Exception as error:
        refusal = database_refusal(error, _outage(engine, error), role=role_of(engine))
        if refusal is None:
            raise  # a statement the database rejects: a fault, answered INTERNAL
        raise refusal from error


def _outage(engine: Engine, error: Exception) -> str:
    """What an outage behind ``error`` is called (OUTAGE: with ``{reason}`` to fill
    in). A QueuePool times out only with as many connections open as it may have,
    all in use (else it opens one, and a database that cannot be reached says so
    itself): the database answers, the server is busy, as for the event store's
    pool."""
    pool = engine.pool
    if isinstance(error, sa_exc.TimeoutError) and isinstance(pool, QueuePool):
        return BUSY.format(waited=pool.timeout(), size=pool.size() + pool.overflow())
    return OUTAGE


def role_of(engine: Engine) -> str | None:
    """The PostgreSQL role ``engine`` connects as; None for a SQLite file."""
    return engine.url.username if engine.dialect.name == "postgresql" else None


def open_database(database_url: str) -> ReadModelDatabase:
    env = persistence_env(database_url)
    module = env["PERSISTENCE_MODULE"]
    if module == "eventsourcing.sqlite":
        url = f"sqlite:///{env['SQLITE_DBNAME']}"
        args = {"connect_args": {"timeout": float(env["SQLITE_LOCK_TIMEOUT"])}}
        writer = create_engine(url, **args)
        _begin_immediate(writer)
        return ReadModelDatabase(writer, create_engine(url, **args), None, False, env)
    if module == "eventsourcing.postgres":
        url_pg = URL.create(
            "postgresql+psycopg",
            username=env["POSTGRES_USER"],
            password=env["POSTGRES_PASSWORD"] or None,
            host=env["POSTGRES_HOST"],
            port=int(env["POSTGRES_PORT"]),
            database=env["POSTGRES_DBNAME"],
        )
        schema = env["POSTGRES_SCHEMA"] or None
        options: dict[str, Any] = {"pool_size": 4, "max_overflow": 4}
        # No ping before each batch of the projection: a batch that finds its
        # connection dead fails whole and is applied again at the next tick. A
        # query for a client is answered on a connection that was pinged.
        # Connections bound their waits on a host that stops answering as the event
        # store's do: a query is refused as the database unreachable within the
        # connect timeout, not held (with its pool's connection) for minutes.
        # A writer waits at most this long for a lock (a row another projector
        # holds, a table someone locked): then its model backs off and retries,
        # and the other models, applied in turn by the same runner, go on.
        writer_lock = f"-c lock_timeout={WRITER_LOCK_TIMEOUT_MS}"
        writer = create_engine(url_pg, connect_args=connect_settings(writer_lock), **options)
        reader = create_engine(
            url_pg, pool_pre_ping=True, connect_args=connect_settings(), **options
        )
        if schema:
            translate = {None: schema}
            writer = writer.execution_options(schema_translate_map=translate)
            reader = reader.execution_options(schema_translate_map=translate)
        return ReadModelDatabase(writer, reader, schema, True, env)
    raise ValueError("read models need a SQLite or PostgreSQL database, not memory:")


def connect_postgres(database: ReadModelDatabase, **options: Any) -> psycopg.Connection[Any]:
    """A connection of its own, in autocommit, outside the engines' pools: for what
    holds one for long (LISTEN, the worker's lease); ``options``: psycopg.connect's
    keyword arguments, over connect_settings."""
    env = database.env
    return psycopg.connect(
        host=env["POSTGRES_HOST"],
        port=int(env["POSTGRES_PORT"]),
        dbname=env["POSTGRES_DBNAME"],
        user=env["POSTGRES_USER"],
        password=env["POSTGRES_PASSWORD"] or None,
        autocommit=True,
        **{**connect_settings(), **options},
    )


def _begin_immediate(engine: Engine) -> None:
    # pysqlite would begin lazily, at the first write, after the reads that
    # decide it; SQLAlchemy's documented recipe makes BEGIN explicit.
    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        # What a write replaces or deletes (an erased session's title) is
        # overwritten in the file, not left in free space.
        dbapi_connection.execute("PRAGMA secure_delete = ON")

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


@dataclass(frozen=True)
class Migrated:
    """What a migration did besides upgrading: the revision it recorded for tables
    whose version was lost (services.adapters.lost_version), the tables it made
    again (services.adapters.read_model_repair); None each when nothing."""

    recorded: Recorded | None = None
    remade: Remade | None = None


def migrate(database: ReadModelDatabase, stamp: str | None = None) -> Migrated:
    """Brings the read models' tables to the latest migration, under a lock, and
    makes again those dropped from a store at it (services.adapters.read_model_repair).
    Tables whose recorded version was lost get the revision ``stamp`` names, or the
    one their schema matches, before they upgrade; refused (StartRefused) when none
    can be told, never migrated from the first over tables that are there.

    Alembic is imported only when a migration is due, a table was dropped or the
    version lost: a server starting on tables already migrated (every start but the
    first of a release) would otherwise keep alembic and mako in memory for good
    (13 MB of RSS)."""
    with database.writer.begin() as connection:
        if database.postgres:
            if database.schema:
                connection.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{database.schema}"')
            # Replicas starting together wait for the one migrating, however long.
            connection.exec_driver_sql("SET LOCAL lock_timeout = 0")
            connection.exec_driver_sql(
                "SELECT pg_advisory_xact_lock(hashtext(%(key)s))",
                {"key": f"{database.schema}.{MIGRATE_LOCK}"},
            )
        current = _applied(connection, database.schema)
        recorded = record_lost_version(connection, database.schema, current, _migrations, stamp)
        if recorded is not None:
            current = {recorded.revision}
        with migrating_on(connection, database.schema, recorded):
            if current != latest_migrations():
                refuse_tables_ahead(current)  # alembic would fail on a revision it cannot find
                upgrade_to_head(connection, database.schema)
            remade = remake_dropped(connection, database.postgres, database.schema, upgrade_to_head)
        return Migrated(recorded, remade)


def upgrade_to_head(connection: Connection, schema: str | None) -> None:
    """Applies every migration not applied yet to the tables in ``schema``, in the
    transaction of ``connection``."""
    _alembic(connection, schema, "upgrade", "head")


def _migrations() -> Migrations:
    """This release's migrations, for a store whose recorded version was lost."""
    return Migrations(
        revisions=_revisions_in_order(),
        upgrade=lambda connection, schema, revision: _alembic(
            connection, schema, "upgrade", revision
        ),
        stamp=lambda connection, schema, revision: _alembic(connection, schema, "stamp", revision),
        version_table=VERSION_TABLE,
    )


def _alembic(connection: Connection, schema: str | None, step: str, revision: str) -> None:
    """Runs alembic's ``step`` (upgrade, stamp) to ``revision`` on the tables in
    ``schema``, in the transaction of ``connection``."""
    # Alembic logs plain lines through the standard library (from its import
    # on), which would break the server's structured (JSON) log; its steps
    # are not news.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from alembic import command
    from alembic.config import Config as AlembicConfig

    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    config.attributes["schema"] = schema
    getattr(command, step)(config, revision)


def latest_migrations() -> set[str]:
    """The revisions no other migration follows (alembic's heads), read from the
    migration files as alembic writes them."""
    revisions, followed = _revisions()
    return revisions - followed


def _revisions_in_order() -> tuple[str, ...]:
    """This release's revisions, each after the one it follows."""
    following = {down: revision for revision, down in _revision_links().items()}
    order = [following[""]]
    while order[-1] in following:
        order.append(following[order[-1]])
    return tuple(order)


def _revisions() -> tuple[set[str], set[str]]:
    """Every revision of this release's migration files, and those another follows."""
    links = _revision_links()
    return set(links), {down for down in links.values() if down}


def _revision_links() -> dict[str, str]:
    """Each revision of this release's migration files, and the one it follows ("":
    the first)."""
    links: dict[str, str] = {}
    for path in (MIGRATIONS / "versions").glob("*.py"):
        found = dict(_REVISION.findall(path.read_text()))
        if found.get("revision"):
            links[found["revision"]] = found.get("down_revision", "")
    return links


def refuse_tables_ahead(current: set[str]) -> None:
    """Refuses tables at a revision this release does not know: a newer release
    migrated them (this one rolled back to). Nothing of this release can help:
    its `migrate` only migrates forward, and nothing takes the tables back."""
    unknown = current - _revisions()[0]
    if unknown:
        raise StartRefused(
            f"the read models' tables were migrated by a newer release (at "
            f"{', '.join(sorted(unknown))}; this release knows migrations up to "
            f"{', '.join(sorted(latest_migrations()))}): run that release, or a later "
            "one; `sessionstore migrate` of this release cannot help (it only migrates "
            "forward, and no command of it takes the tables back)"
        )


def refuse_newer_release(database: ReadModelDatabase) -> None:
    """refuse_tables_ahead, for a migration before it creates or replaces anything
    (a newer release's stored functions included); on a plain connection, so that a
    database that cannot be reached is named in the driver's words."""
    with database.reader.connect() as connection:
        if database.schema and not inspect(connection).has_schema(database.schema):
            return  # a store yet to be made
        refuse_tables_ahead(_applied(connection, database.schema))


def _applied(connection: Connection, schema: str | None) -> set[str]:
    """The revisions the tables are at (alembic's version table), none before the first."""
    if not inspect(connection).has_table(VERSION_TABLE, schema=schema):
        return set()
    table = f'"{schema}".{VERSION_TABLE}' if schema else VERSION_TABLE
    return {str(row[0]) for row in connection.exec_driver_sql(f"SELECT version_num FROM {table}")}


def migrations_behind(database: ReadModelDatabase) -> str:
    """Empty when the read models' tables are at this release's latest migration,
    else where they are (for a process that waits for another to migrate). Tables
    a newer release migrated are refused (StartRefused): no wait would help."""
    with reading(database.reader) as connection:
        if database.schema and not inspect(connection).has_schema(database.schema):
            return missing_schema(database.env)  # a typo, or the migration job not run yet
        return read_models_behind(connection, database.schema)


def read_models_behind(connection: Connection, schema: str | None) -> str:
    """migrations_behind, on a connection open in a schema that exists."""
    current = _applied(connection, schema)
    if not current and tables_without_version(connection, schema):
        lost = version_table_state(connection, schema, VERSION_TABLE)
        return describe_without_version(lost, VERSION_TABLE)
    refuse_tables_ahead(current)
    heads = latest_migrations()
    return "" if current == heads else _where(current, heads)


def _where(current: set[str], heads: set[str]) -> str:
    return f"at {', '.join(sorted(current)) or 'no migration'}, not {', '.join(sorted(heads))}"
