"""The first look at a configured PostgreSQL database, before the library's pool."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from services.adapters.database_errors import Kind, kind_of
from services.adapters.database_refusals import operator_refusal

# How long the first connection may take before the database counts as unreachable.
PROBE_TIMEOUT_SECONDS = 3


class DatabaseUnreachable(OSError):
    """The configured database cannot be used; the message says why and what to do."""


def missing_schema(env: dict[str, str]) -> str:
    """What to say of the schema the URL names when it is not in the database (a
    typo, or a store not made yet)."""
    schema, dbname = env["POSTGRES_SCHEMA"], env["POSTGRES_DBNAME"]
    return (
        f"schema {schema!r} does not exist in database {dbname!r} at "
        f"{env['POSTGRES_HOST']}:{env['POSTGRES_PORT']}: fix schema= in the database URL "
        "(--database-url or SESSIONSTORE_DATABASE_URL), or create the store with "
        "`sessionstore migrate`"
    )


@contextmanager
def first_look(env: dict[str, str]) -> Iterator[psycopg.Connection[Any]]:
    """A first connection to the configured PostgreSQL database (autocommit), made
    quickly: a wrong URL is told apart from a server that is down (DatabaseUnreachable
    says which), where the library's pool would say "couldn't get a connection after
    10.00 sec" for both."""
    host, port, dbname = env["POSTGRES_HOST"], env["POSTGRES_PORT"], env["POSTGRES_DBNAME"]
    try:
        conn = psycopg.connect(
            host=host,
            port=int(port),
            dbname=dbname,
            user=env["POSTGRES_USER"],
            password=env["POSTGRES_PASSWORD"] or None,
            connect_timeout=PROBE_TIMEOUT_SECONDS,
            autocommit=True,
        )
    except psycopg.OperationalError as error:
        detail = str(error).strip().splitlines()[0]
        if f'database "{dbname}" does not exist' in detail:
            raise DatabaseUnreachable(
                f"database {dbname!r} does not exist on the PostgreSQL server at {host}:{port}; "
                "create it (createdb) or fix the database name in the URL"
            ) from None
        if kind_of(error) is Kind.LOGIN_REFUSED:  # said as a call would say it
            raise DatabaseUnreachable(str(operator_refusal(error, env["POSTGRES_USER"]))) from None
        raise DatabaseUnreachable(
            f"cannot connect to PostgreSQL at {host}:{port}: {detail}"
        ) from None
    with conn:
        yield conn


@contextmanager
def setting_up_postgres(env: dict[str, str], create_schema: bool = True) -> Iterator[None]:
    """Connects once, quickly (first_look), before the library's pool.

    Creates the configured schema, which the library expects to exist,
    and holds the block (the store creating its tables, indexes and functions)
    under an advisory lock: servers and workers starting at once on an empty
    database would otherwise race in CREATE ... IF NOT EXISTS, which PostgreSQL
    lets fail on its catalog's unique keys. One sets up, the others wait and
    find it done. Does nothing for other databases.

    Without ``create_schema`` (an operator's command on a store that should exist)
    a schema that is not there is refused, not made empty: a typo in the URL would
    otherwise read as a store of no sessions.
    """
    if env.get("PERSISTENCE_MODULE") != "eventsourcing.postgres":
        yield
        return
    with first_look(env) as conn:
        schema = env.get("POSTGRES_SCHEMA")
        # Held by this connection until the block ends (or the process does).
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"sessionstore setup {schema}",))
        if schema and create_schema:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        elif schema and not _schema_exists(conn, schema):
            raise DatabaseUnreachable(missing_schema(env))
        yield


def _schema_exists(conn: psycopg.Connection[Any], schema: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
        is not None
    )
