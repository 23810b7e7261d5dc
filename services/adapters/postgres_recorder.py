"""The PostgreSQL recorder: the library's, writing each save in one round trip."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg import sql


class PostgresEventRecorder(PostgresApplicationRecorder):
    """The library's PostgreSQL recorder, writing in one statement and one round trip.

    The stock recorder locks the events table and sends NOTIFY on every write,
    so that subscribers see notification ids without gaps. Nothing here
    subscribes: sessions are read by their own version numbers, which the
    primary key keeps unique. One autocommitted INSERT of all the events of a
    save is atomic on its own, so several sessions' events can share it too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._insert_statements: dict[int, bytes] = {}
        self._select_statements: dict[tuple[bool, bool, bool, bool], bytes] = {}

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
        params = [originator_id, *(p for p in (gt, lte, limit) if p is not None)]
        with self.datastore.get_connection() as conn, conn.cursor(binary=True) as cursor:
            shape = (gt is not None, lte is not None, desc, limit is not None)
            cursor.execute(self._select_sql(conn, shape), params, prepare=True)
            return [
                StoredEvent(
                    originator_id=row["originator_id"],
                    originator_version=row["originator_version"],
                    topic=row["topic"],
                    state=bytes(row["state"]),
                )
                for row in cursor.fetchall()
            ]

    def _select_sql(
        self, conn: psycopg.Connection[Any], shape: tuple[bool, bool, bool, bool]
    ) -> bytes:
        statement = self._select_statements.get(shape)
        if statement is None:
            has_gt, has_lte, desc, has_limit = shape
            composed = self.select_events_statement
            if has_gt:
                composed += sql.SQL(" AND originator_version > %s")
            if has_lte:
                composed += sql.SQL(" AND originator_version <= %s")
            composed += sql.SQL(
                " ORDER BY originator_version DESC" if desc else " ORDER BY originator_version ASC"
            )
            if has_limit:
                composed += sql.SQL(" LIMIT %s")
            statement = self._select_statements[shape] = composed.as_bytes(conn)
        return statement

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int]:
        params: list[Any] = []
        for e in stored_events:
            params.extend((e.originator_id, e.originator_version, e.topic, e.state))
        with self.datastore.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute(self._insert_sql(conn, len(stored_events)), params, prepare=True)
            return [row["notification_id"] for row in cursor.fetchall()]

    def _insert_sql(self, conn: psycopg.Connection[Any], rows: int) -> bytes:
        # Plain VALUES rows, composed once per row count: composing the
        # statement, or dumping the library's composite-type array, costs more
        # than the insert itself.
        statement = self._insert_statements.get(rows)
        if statement is None:
            statement = (
                sql.SQL(
                    "INSERT INTO {schema}.{table} "
                    "(originator_id, originator_version, topic, state) VALUES {rows} "
                    "RETURNING notification_id"
                )
                .format(
                    schema=sql.Identifier(self.datastore.schema),
                    table=sql.Identifier(self.events_table_name),
                    rows=sql.SQL(",").join([sql.SQL("(%s, %s, %s, %s)")] * rows),
                )
                .as_bytes(conn)
            )
            if rows <= 64:
                self._insert_statements[rows] = statement
        return statement
