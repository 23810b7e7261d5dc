"""What the PostgreSQL recorder reads: events, snapshots and data keys, and
lookups in the id index (ids used, forks) and the idempotency keys.

Every prompt view catches up with a read of events, and a cold one reads a whole
session: events and keys are read in binary into plain tuples, each query is
composed once for the schema (``_statement``), and a read of sealed events and
their keys goes in one pipeline, one round trip. The recorder's writes are in
services.adapters.postgres_recorder.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, cast
from uuid import UUID

import psycopg
from eventsourcing.persistence import AggregateRecorder, StoredEvent
from eventsourcing.postgres import PostgresAggregateRecorder, PostgresDatastore
from psycopg import sql
from psycopg.rows import tuple_row

from services.adapters.id_index import FORK
from services.adapters.sealing import DataKeyRow, KeyRange


class PostgresReads:
    """Mixed into the PostgreSQL recorder (services.adapters.postgres_recorder),
    which names the tables and keeps the statements composed for its schema."""

    datastore: PostgresDatastore
    events_table_name: str
    ids_table_name: str
    keys_table_name: str
    data_keys_table_name: str
    _statements: dict[str, bytes]

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """The library's query, composed once per shape and read in binary.

        Every prompt view catches up with one of these, and a cold one reads a
        whole session: binary rows spare the hex encoding of every event's bytes.
        """
        with self.datastore.get_connection() as conn, _rows(conn) as cursor:
            self._send_select(conn, cursor, originator_id, gt, lte, desc, limit)
            return self._stored_events(cursor)

    def _send_select(
        self,
        conn: psycopg.Connection[Any],
        cursor: psycopg.Cursor[Any],
        originator_id: UUID | str,
        gt: int | None,
        lte: int | None,
        desc: bool = False,
        limit: int | None = None,
    ) -> None:
        params = [originator_id, *(p for p in (gt, lte, limit) if p is not None)]
        shape = (gt is not None, lte is not None, desc, limit is not None)
        cursor.execute(self._select_sql(conn, shape), params, prepare=None)

    @staticmethod
    def _stored_events(cursor: psycopg.Cursor[Any]) -> list[StoredEvent]:
        """The events a cursor of plain rows (``_rows``) read, as (originator id,
        version, topic, state)."""
        return [StoredEvent(i, v, t, bytes(s)) for i, v, t, s in cursor.fetchall()]

    def _select_sql(
        self, conn: psycopg.Connection[Any], shape: tuple[bool, bool, bool, bool]
    ) -> bytes:
        """The select of one shape of read (bounds, order, limit), its columns named in
        the order _stored_events reads them (the library's selects *)."""
        has_gt, has_lte, desc, has_limit = shape
        template = (
            "SELECT originator_id, originator_version, topic, state FROM {schema}.{table} "
            "WHERE originator_id = %s"
            + (" AND originator_version > %s" if has_gt else "")
            + (" AND originator_version <= %s" if has_lte else "")
            + (" ORDER BY originator_version DESC" if desc else " ORDER BY originator_version")
            + (" LIMIT %s" if has_limit else "")
        )
        return self._statement(conn, template, table=self.events_table_name)

    def data_keys(self, session_id: str, after: int, upto: int | None) -> list[DataKeyRow]:
        with self.datastore.get_connection() as conn, _rows(conn) as cursor:
            self._send_data_keys(conn, cursor, session_id, (after, upto))
            return self._data_key_rows(cursor)

    def events_and_keys(
        self, session_id: str, after: int, upto: int | None, keys: KeyRange | None
    ) -> tuple[Sequence[StoredEvent], list[DataKeyRow]]:
        """Both queries in one pipeline: a read of sealed events pays one round trip."""
        if keys is None:
            return self.select_events(session_id, gt=after or None, lte=upto), []
        with (
            self.datastore.get_connection() as conn,
            conn.pipeline(),
            _rows(conn) as events,
            _rows(conn) as key_rows,
        ):
            self._send_select(conn, events, session_id, after or None, upto)
            self._send_data_keys(conn, key_rows, session_id, keys)
            return self._stored_events(events), self._data_key_rows(key_rows)

    def latest_snapshots(
        self, session_ids: Sequence[str], snapshots: AggregateRecorder
    ) -> list[StoredEvent]:
        """One query: each session's newest snapshot, read backwards on its key."""
        table = cast(PostgresAggregateRecorder, snapshots).events_table_name
        with self.datastore.get_connection() as conn, _rows(conn) as cursor:
            statement = self._statement(
                conn,
                "SELECT s.originator_id, s.originator_version, s.topic, s.state "
                "FROM unnest(%s::text[]) AS w(id) CROSS JOIN LATERAL ("
                "SELECT originator_id, originator_version, topic, state FROM {schema}.{table} "
                "WHERE originator_id = w.id ORDER BY originator_version DESC LIMIT 1) AS s",
                table=table,
            )
            cursor.execute(statement, (list(session_ids),), prepare=True)
            return self._stored_events(cursor)

    def events_and_keys_of(
        self, after: Mapping[str, tuple[int, int]]
    ) -> tuple[list[StoredEvent], list[DataKeyRow]]:
        """Both queries in one pipeline, each one statement for all the sessions."""
        session_ids = list(after)
        events_after = [a[0] for a in after.values()]
        keys_after = [a[1] for a in after.values()]
        with (
            self.datastore.get_connection() as conn,
            conn.pipeline(),
            _rows(conn) as events,
            _rows(conn) as key_rows,
        ):
            events.execute(
                self._statement(
                    conn,
                    "SELECT e.originator_id, e.originator_version, e.topic, e.state "
                    "FROM unnest(%s::text[], %s::bigint[]) AS w(id, after) CROSS JOIN LATERAL ("
                    "SELECT originator_id, originator_version, topic, state FROM "
                    "{schema}.{table} WHERE originator_id = w.id AND originator_version > "
                    "w.after ORDER BY originator_version) AS e",
                    table=self.events_table_name,
                ),
                (session_ids, events_after),
                prepare=True,
            )
            key_rows.execute(
                self._statement(
                    conn,
                    "SELECT k.session_id, k.version, k.kind, k.key_id, k.data_key "
                    "FROM unnest(%s::text[], %s::bigint[]) AS w(id, after) "
                    "JOIN {schema}.{table} AS k ON k.session_id = w.id AND k.version > w.after",
                    table=self.data_keys_table_name,
                ),
                (session_ids, keys_after),
                prepare=True,
            )
            return self._stored_events(events), self._data_key_rows(key_rows)

    def _send_data_keys(
        self,
        conn: psycopg.Connection[Any],
        cursor: psycopg.Cursor[Any],
        session_id: str,
        keys: KeyRange,
    ) -> None:
        after, upto = keys
        statement = self._statement(
            conn,
            "SELECT session_id, version, kind, key_id, data_key FROM {schema}.{table} "
            "WHERE session_id = %s AND version > %s AND version <= %s",
            table=self.data_keys_table_name,
        )
        cursor.execute(
            statement,
            (session_id, after, (1 << 62) if upto is None else upto),
            prepare=True,
        )

    @staticmethod
    def _data_key_rows(cursor: psycopg.Cursor[Any]) -> list[DataKeyRow]:
        """The keys a cursor of plain rows (``_rows``) read."""
        return [(s, v, k, i, bytes(key)) for s, v, k, i, key in cursor.fetchall()]

    def used_ids(self, session_id: str, keys: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
        kinds, names = [k for k, _ in keys], [n for _, n in keys]
        with self.datastore.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute(self._used_ids_sql(conn), (session_id, kinds, names), prepare=True)
            return {(row["kind"], row["key"]) for row in cursor.fetchall()}

    def forks_of(self, session_ids: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        if not session_ids:
            return {}
        with self.datastore.get_connection() as conn, conn.cursor() as cursor:
            query = self._statement(
                conn,
                "SELECT session_id, key, version FROM {schema}.{table} "
                "WHERE session_id = ANY(%s) AND kind = %s",
                table=self.ids_table_name,
            )
            cursor.execute(query, (list(session_ids), FORK))
            forks: dict[str, list[tuple[str, int]]] = {}
            for row in cursor.fetchall():
                forks.setdefault(row["session_id"], []).append((row["key"], row["version"]))
            return forks

    def _used_ids_sql(self, conn: psycopg.Connection[Any]) -> bytes:
        return self._statement(
            conn,
            "SELECT kind, key FROM {schema}.{table} WHERE session_id = %s "
            "AND (kind, key) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
            table=self.ids_table_name,
        )

    def _statement(self, conn: psycopg.Connection[Any], template: str, *, table: str) -> bytes:
        """``template`` with this schema and ``table`` in it, composed once."""
        statement = self._statements.get(template)
        if statement is None:
            statement = self._statements[template] = (
                sql.SQL(template)
                .format(schema=sql.Identifier(self.datastore.schema), table=sql.Identifier(table))
                .as_bytes(conn)
            )
        return statement

    def earlier_append(
        self, session_id: str, key: str, ttl_seconds: float
    ) -> tuple[str, int] | None:
        with self.datastore.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute(
                self._earlier_append_sql(conn), (session_id, key, ttl_seconds), prepare=True
            )
            row = cursor.fetchone()
        return None if row is None else (row["fingerprint"], row["version"])

    def _earlier_append_sql(self, conn: psycopg.Connection[Any]) -> bytes:
        return self._statement(
            conn,
            "SELECT fingerprint, version FROM {schema}.{table} WHERE session_id = %s AND key = %s "
            "AND created_at >= now() - make_interval(secs => %s)",
            table=self.keys_table_name,
        )


def _rows(conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
    """A cursor for events and keys: binary (an event's bytes not hex-escaped) and plain
    tuples (the pool's dict rows would name the columns of each of hundreds of rows)."""
    return conn.cursor(binary=True, row_factory=tuple_row)
