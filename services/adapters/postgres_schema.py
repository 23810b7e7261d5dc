"""The PostgreSQL recorder's own tables and functions, created by a process that
migrates (services.adapters.event_tables).

Several servers may start at once on one database: each creation runs under
an advisory lock, so one creates and the others wait and find it made. The id
index of a database written before it existed is filled from the stored
events once, in the transaction that creates it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresDatastore
from psycopg import sql

from services.adapters.id_index import BACKFILL_TOPICS, IdRow
from services.adapters.postgres_ordering import (
    create_head_function,
    draw_block_sql,
    lock_tags,
    step_sequence,
)

BACKFILL_PAGE = 1000
# The stored functions' names: the events' table's, with these suffixes.
INSERT_FUNCTION_SUFFIX = "_insert"
HEAD_FUNCTION_SUFFIX = "_head"


class PostgresSchema:
    """Creates the tables and stored functions the recorder writes with."""

    datastore: PostgresDatastore
    events_table_name: str
    ids_table_name: str
    keys_table_name: str
    data_keys_table_name: str
    insert_function_name: str
    head_function_name: str

    def create_data_key_table(self) -> None:
        names = {
            "schema": sql.Identifier(self.datastore.schema),
            "table": sql.Identifier(self.data_keys_table_name),
        }
        with self.datastore.transaction(commit=True) as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))",
                (f"{self.datastore.schema}.{self.data_keys_table_name}",),
            )
            cursor.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {schema}.{table} (session_id text NOT NULL, "
                    "version bigint NOT NULL, kind text NOT NULL, key_id text NOT NULL, "
                    "data_key bytea NOT NULL, PRIMARY KEY (session_id, version, kind, key_id))"
                ).format(**names)
            )

    def create_key_table(self) -> None:
        names = {
            "schema": sql.Identifier(self.datastore.schema),
            "keys": sql.Identifier(self.keys_table_name),
            "index": sql.Identifier(self.keys_table_name + "_created_at"),
        }
        with self.datastore.transaction(commit=True) as cursor:
            # Several servers may start at once: one creates, the others wait and find.
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))",
                (f"{self.datastore.schema}.{self.keys_table_name}",),
            )
            cursor.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {schema}.{keys} (session_id text NOT NULL, "
                    "key text NOT NULL, fingerprint text NOT NULL, version bigint NOT NULL, "
                    "created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (session_id, key))"
                ).format(**names)
            )
            cursor.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {index} ON {schema}.{keys} (created_at)"
                ).format(**names)
            )

    def create_id_index(self, backfill: Callable[[StoredEvent], list[IdRow]]) -> int:
        """Creates the id index, filled from the stored events, and the functions
        saves and readers call (see _create_insert_function, postgres_ordering).

        One transaction under an advisory lock: of several servers starting
        on an old database exactly one fills the index, and a crash half way
        leaves no half-filled table behind.
        """
        names = {
            "schema": sql.Identifier(self.datastore.schema),
            "table": sql.Identifier(self.events_table_name),
            "ids": sql.Identifier(self.ids_table_name),
        }
        with self.datastore.transaction(commit=True) as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))",
                (f"{self.datastore.schema}.{self.ids_table_name}",),
            )
            ordering = self._ordering(cursor)
            create_head_function(cursor, ordering)
            cursor.execute("SELECT to_regclass(%s) AS found", (self._qualified_ids_name(),))
            row = cursor.fetchone()
            filled = 0
            if row is None or row["found"] is None:
                cursor.execute(
                    sql.SQL(
                        "CREATE TABLE {schema}.{ids} (session_id text NOT NULL, "
                        "kind text NOT NULL, key text NOT NULL, version bigint NOT NULL, "
                        "PRIMARY KEY (session_id, kind, key))"
                    ).format(**names)
                )
                filled = self._backfill(cursor, backfill, names)
            self._create_insert_function(cursor, ordering)
            return filled

    def _ordering(self, cursor: psycopg.Cursor[Any]) -> dict[str, Any]:
        """What the insert and head functions name (services.adapters.postgres_ordering),
        the sequence made to step by blocks first."""
        qualified = sql.Identifier(self.datastore.schema, self.events_table_name).as_string(cursor)
        writing_tag, block_tag = lock_tags(cursor, qualified)
        return {
            "schema": sql.Identifier(self.datastore.schema),
            "table": sql.Identifier(self.events_table_name),
            "qualified": qualified,
            "sequence": step_sequence(cursor, qualified),
            "writing_tag": writing_tag,
            "block_tag": block_tag,
            "head_function": self.head_function_name,
        }

    def _create_insert_function(
        self, cursor: psycopg.Cursor[Any], ordering: dict[str, Any]
    ) -> None:
        """The function every save calls (see _insert). PL/pgSQL resolves the tables
        when it runs, so the key table may come after it."""
        names = {
            "schema": sql.Identifier(self.datastore.schema),
            "table": sql.Identifier(self.events_table_name),
            "ids": sql.Identifier(self.ids_table_name),
            "keys": sql.Identifier(self.keys_table_name),
            "data_keys": sql.Identifier(self.data_keys_table_name),
            "function": sql.Identifier(self.insert_function_name),
            "id_type": sql.Identifier(self.datastore.originator_id_type),
            "timeout": sql.Literal(f"{self.datastore.lock_timeout}s"),
        }
        cursor.execute(
            sql.SQL(
                "CREATE OR REPLACE FUNCTION {schema}.{function}("
                "e_ids {id_type}[], e_versions bigint[], e_topics text[], e_states bytea[], "
                "i_sessions text[], i_kinds text[], i_keys text[], i_versions bigint[], "
                "k_sessions text[], k_keys text[], k_prints text[], k_versions bigint[], "
                "d_sessions text[], d_versions bigint[], d_kinds text[], d_key_ids text[], "
                "d_keys bytea[]) "
                "RETURNS TABLE (notification_id bigint) LANGUAGE plpgsql AS $$ "
                "DECLARE n integer := coalesce(cardinality(e_ids), 0); base bigint; BEGIN "
                "PERFORM set_config('lock_timeout', {timeout}, true); "
                "{draw_block}"
                # Events first: a version another writer took is a lost race,
                # told apart from an id another writer took.
                "RETURN QUERY INSERT INTO {schema}.{table} AS e "
                "(notification_id, originator_id, originator_version, topic, state) "
                "SELECT base + u.o - 1, u.i, u.v, u.t, u.s "
                "FROM unnest(e_ids, e_versions, e_topics, e_states) WITH ORDINALITY "
                "AS u(i, v, t, s, o) ORDER BY u.o "
                "RETURNING e.notification_id; "
                "INSERT INTO {schema}.{ids} (session_id, kind, key, version) "
                "SELECT * FROM unnest(i_sessions, i_kinds, i_keys, i_versions); "
                # A row left by an expired use of the key gives way to the new one.
                "INSERT INTO {schema}.{keys} AS k (session_id, key, fingerprint, version) "
                "SELECT * FROM unnest(k_sessions, k_keys, k_prints, k_versions) "
                "ON CONFLICT (session_id, key) DO UPDATE SET "
                "fingerprint = EXCLUDED.fingerprint, version = EXCLUDED.version, "
                "created_at = EXCLUDED.created_at; "
                "INSERT INTO {schema}.{data_keys} (session_id, version, kind, key_id, data_key) "
                "SELECT * FROM unnest(d_sessions, d_versions, d_kinds, d_key_ids, d_keys); "
                "END $$"
            ).format(draw_block=draw_block_sql(ordering), **names)
        )

    def _qualified_ids_name(self) -> str:
        return ".".join(
            sql.Identifier(n).as_string() for n in (self.datastore.schema, self.ids_table_name)
        )

    def _backfill(
        self,
        cursor: psycopg.Cursor[Any],
        backfill: Callable[[StoredEvent], list[IdRow]],
        names: dict[str, sql.Identifier],
    ) -> int:
        select = sql.SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state "
            "FROM {schema}.{table} WHERE topic = ANY(%s) AND notification_id > %s "
            "ORDER BY notification_id LIMIT %s"
        ).format(**names)
        # An old race between servers may have stored an id twice: the first stays.
        insert = sql.SQL(
            "INSERT INTO {schema}.{ids} VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING"
        ).format(**names)
        after, filled = 0, 0
        while True:
            cursor.execute(select, (list(BACKFILL_TOPICS), after, BACKFILL_PAGE))
            page = cursor.fetchall()
            if not page:
                return filled
            after = page[-1]["notification_id"]
            rows = [
                row
                for r in page
                for row in backfill(
                    StoredEvent(
                        originator_id=r["originator_id"],
                        originator_version=r["originator_version"],
                        topic=r["topic"],
                        state=bytes(r["state"]),
                    )
                )
            ]
            if rows:
                cursor.executemany(insert, rows)
            filled += len(rows)
