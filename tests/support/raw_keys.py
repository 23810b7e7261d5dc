"""The data-key table read straight from the database, bypassing the store: what the
erasure tests prove was (or was not) deleted."""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg
from psycopg import sql

from services.adapters import sealing


def raw_key_rows(database_url: str, session_id: str) -> list[tuple[Any, ...]]:
    """(kind, key id, key bytes) of each of the session's data keys."""
    if database_url.startswith("sqlite"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as conn:
            (table,) = [
                r[0]
                for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                if r[0].endswith(sealing.TABLE_SUFFIX)
            ]
            query = f'SELECT kind, key_id, data_key FROM "{table}" WHERE session_id = ?'
            return [(r[0], r[1], bytes(r[2])) for r in conn.execute(query, (session_id,))]
    base, schema = database_url.split("?schema=")
    with psycopg.connect(base, autocommit=True) as pg:
        (pg_table,) = [
            r[0]
            for r in pg.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                "AND table_name LIKE %s",
                (schema, f"%{sealing.TABLE_SUFFIX}"),
            )
        ]
        composed = sql.SQL("SELECT kind, key_id, data_key FROM {}.{} WHERE session_id = %s")
        statement = composed.format(sql.Identifier(schema), sql.Identifier(pg_table))
        return [(r[0], r[1], bytes(r[2])) for r in pg.execute(statement, (session_id,))]
