"""The sessions other tenants made before session ids were scoped by tenant.

A session's event stream is named by its id alone in the default tenant (as
every session was before tenants existed), and by ``tenant/id`` in any other
(domain.session.stream_id). Before that rule, other tenants' sessions were
stored under their bare ids too. Their streams keep those names (the sealed
content is bound to them), so the server must know them: they are listed
once, when this table is made, from the stored Started events, and never
change after (no server of this release stores such a stream).

One transaction under a lock (PostgreSQL's advisory lock, SQLite's write
lock): of several servers starting on an old database exactly one fills the
table, and a crash half way leaves none.
"""

from __future__ import annotations

import json
from typing import Any

from eventsourcing.domain import get_topic
from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg import sql

from domain.session_events import Started
from domain.streams import DEFAULT_TENANT, TENANT_SCOPE

TABLE_SUFFIX = "_legacy_tenants"
STARTED_TOPIC = get_topic(Started)
# Events are compact JSON: those that do not name the default tenant (or no tenant,
# stored before tenants) are the few to look at.
TENANT_KEY = b'"tenant":"'
DEFAULT_TENANT_KEY = b'"tenant":"default"'


def legacy_tenants(recorder: Any, *, create: bool = True) -> dict[str, str]:
    """Bare stream id -> tenant, of the sessions of tenants other than the default one
    stored before ids were scoped; the table is made (and filled) the first time,
    by a process that migrates (``create``). Without ``create`` it is only read."""
    if not hasattr(recorder, "datastore"):
        return {}  # the in-memory recorder: nothing stored before
    table = recorder.events_table_name + TABLE_SUFFIX
    if isinstance(recorder, PostgresApplicationRecorder):
        return _postgres(recorder, table, create)
    return _sqlite(recorder, table, create)


def _foreign(rows: Any) -> list[tuple[str, str]]:
    """(stream id, tenant) of the Started events (id, state) of other tenants."""
    found = []
    for session_id, state in rows:
        tenant = json.loads(bytes(state)).get("tenant", DEFAULT_TENANT)
        if tenant != DEFAULT_TENANT and TENANT_SCOPE not in session_id:
            found.append((session_id, tenant))
    return found


def _postgres(recorder: Any, table: str, create: bool) -> dict[str, str]:
    datastore = recorder.datastore
    names = {
        "schema": sql.Identifier(datastore.schema),
        "table": sql.Identifier(table),
        "events": sql.Identifier(recorder.events_table_name),
    }
    listed = sql.SQL("SELECT session_id, tenant FROM {schema}.{table}").format(**names)
    with datastore.transaction(commit=create) as cursor:
        if not create:
            cursor.execute(listed)
            return {r["session_id"]: r["tenant"] for r in cursor.fetchall()}
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{datastore.schema}.{table}",)
        )
        qualified = sql.SQL("{schema}.{table}").format(**names).as_string(cursor.connection)
        cursor.execute("SELECT to_regclass(%s) AS found", (qualified,))
        row = cursor.fetchone()
        if row is None or row["found"] is None:
            cursor.execute(
                sql.SQL(
                    "CREATE TABLE {schema}.{table} "
                    "(session_id text PRIMARY KEY, tenant text NOT NULL)"
                ).format(**names)
            )
            cursor.execute(
                sql.SQL(
                    "SELECT originator_id, state FROM {schema}.{events} WHERE topic = %s "
                    "AND position(%s::bytea in state) > 0 AND position(%s::bytea in state) = 0"
                ).format(**names),
                (STARTED_TOPIC, TENANT_KEY, DEFAULT_TENANT_KEY),
            )
            found = _foreign((r["originator_id"], r["state"]) for r in cursor.fetchall())
            if found:
                cursor.executemany(
                    sql.SQL("INSERT INTO {schema}.{table} VALUES (%s, %s)").format(**names), found
                )
        cursor.execute(listed)
        return {r["session_id"]: r["tenant"] for r in cursor.fetchall()}


def _sqlite(recorder: Any, table: str, create: bool) -> dict[str, str]:
    with recorder.datastore.get_connection(commit=create) as conn:
        c = conn.cursor()
        if not create:
            c.execute(f"SELECT session_id, tenant FROM {table}")
            return {row[0]: row[1] for row in c.fetchall()}
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,))
            if c.fetchone() is None:
                c.execute(f"CREATE TABLE {table} (session_id TEXT PRIMARY KEY, tenant TEXT)")
                c.execute(
                    f"SELECT originator_id, state FROM {recorder.events_table_name} "
                    "WHERE topic = ? AND instr(state, ?) > 0 AND instr(state, ?) = 0",
                    (STARTED_TOPIC, TENANT_KEY, DEFAULT_TENANT_KEY),
                )
                found = _foreign(c.fetchall())
                c.executemany(f"INSERT INTO {table} VALUES (?, ?)", found)
            c.execute(f"SELECT session_id, tenant FROM {table}")
            legacy = {row[0]: row[1] for row in c.fetchall()}
            conn.commit()
            return legacy
        except BaseException:
            conn.rollback()
            raise
