"""The first look at a configured PostgreSQL database, before the library's pool."""

from __future__ import annotations

import psycopg
from psycopg import sql

# How long the first connection may take before the database counts as unreachable.
PROBE_TIMEOUT_SECONDS = 3


class DatabaseUnreachable(OSError):
    """The configured database cannot be used; the message says why and what to do."""


def check_postgres(env: dict[str, str]) -> None:
    """Connects once, quickly, so that a wrong URL is told apart from a server that is down.

    The library's pool would only say "couldn't get a connection after 10.00 sec"
    for both. Creates the configured schema, which the library expects to exist.
    """
    if env.get("PERSISTENCE_MODULE") != "eventsourcing.postgres":
        return
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
        raise DatabaseUnreachable(
            f"cannot connect to PostgreSQL at {host}:{port}: {detail}"
        ) from None
    with conn:
        schema = env.get("POSTGRES_SCHEMA")
        if schema:
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
