"""The PostgreSQL recorder: the library's, writing each save in one round trip.

Each save is one call of a stored function, in its own (autocommit)
transaction: it draws the save's block of notification ids and inserts the
events, their id-index rows and their idempotency keys. Saves run side by
side, with no table lock; readers read up to the head the database says is
safe, so that paging or tracking by notification id never passes over an id
that commits later (services.adapters.postgres_ordering). The NOTIFY that
wakes listeners follows the commit (services.adapters.postgres_wakeups).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, cast
from uuid import UUID

import psycopg
from eventsourcing.persistence import (
    AggregateRecorder,
    IntegrityError,
    StoredEvent,
)
from eventsourcing.postgres import PostgresAggregateRecorder, PostgresApplicationRecorder
from psycopg import sql
from psycopg.rows import scalar_row, tuple_row

from services.adapters.id_index import (
    FORK,
    TABLE_SUFFIX,
    IdRow,
    IdTaken,
)
from services.adapters.idempotency_keys import TABLE_SUFFIX as KEYS_TABLE_SUFFIX
from services.adapters.idempotency_keys import KeyRow
from services.adapters.postgres_arrays import BigintArray, ByteaArray, TextArray, register
from services.adapters.postgres_notifications import NotificationLog
from services.adapters.postgres_schema import (
    HEAD_FUNCTION_SUFFIX,
    INSERT_FUNCTION_SUFFIX,
    PostgresSchema,
)
from services.adapters.postgres_wakeups import SaveWakeups
from services.adapters.sealing import TABLE_SUFFIX as DATA_KEYS_TABLE_SUFFIX
from services.adapters.sealing import DataKeyRow, KeyRange, ShredRow

# The element types of an id row, a key row and a data key row, as arrays.
_ID_ROW = (TextArray, TextArray, TextArray, BigintArray)
_KEY_ROW = (TextArray, TextArray, TextArray, BigintArray)
_DATA_KEY_ROW = (TextArray, BigintArray, TextArray, TextArray, ByteaArray)
# Before any connection is made: each copies the adapters it starts with.
register(psycopg.adapters)


class PostgresEventRecorder(PostgresSchema, NotificationLog, PostgresApplicationRecorder):
    """The library's PostgreSQL recorder, writing in one statement and one round trip.

    The stock recorder sends BEGIN, SET, LOCK TABLE, NOTIFY, INSERT (of a
    composite-type array) and COMMIT per save, and its saves queue for the
    table lock. Here one prepared call of a stored function does the save in
    one autocommitted transaction, the events and their id and key rows passed
    as arrays; under group commit several sessions' events share the call.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ids_table_name = self.events_table_name + TABLE_SUFFIX
        self.insert_function_name = self.events_table_name + INSERT_FUNCTION_SUFFIX
        self.head_function_name = self.events_table_name + HEAD_FUNCTION_SUFFIX
        self._wakeups = SaveWakeups(self.datastore, self.channel_name)
        self._insert_call: bytes | None = None
        # Statements composed for this schema once, by their template.
        self._statements: dict[str, bytes] = {}
        self.keys_table_name = self.events_table_name + KEYS_TABLE_SUFFIX
        self.data_keys_table_name = self.events_table_name + DATA_KEYS_TABLE_SUFFIX

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

    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        ids: Sequence[IdRow] = (),
        keys: Sequence[KeyRow] = (),
        data_keys: Sequence[DataKeyRow] = (),
        shred: Sequence[ShredRow] = (),
        **kwargs: Any,
    ) -> Sequence[int]:
        # Events, id rows and key rows go as four arrays each: the statement
        # stays the same whatever their number. A group with no rows goes as
        # NULLs (unnest gives no rows), which psycopg sends without dumping an
        # empty list for each of its arrays on every append.
        params: list[Any] = [
            TextArray([e.originator_id for e in stored_events]),
            BigintArray([e.originator_version for e in stored_events]),
            TextArray([e.topic for e in stored_events]),
            ByteaArray([e.state for e in stored_events]),
        ]
        for rows, types in ((ids, _ID_ROW), (keys, _KEY_ROW), (data_keys, _DATA_KEY_ROW)):
            if rows:
                params.extend(t(c) for t, c in zip(types, zip(*rows, strict=True), strict=True))
            else:
                params.extend([None] * len(types))
        try:
            return self._insert(stored_events, params, shred)
        except IntegrityError as error:
            cause = error.__cause__
            if isinstance(cause, psycopg.Error) and cause.diag.table_name == self.ids_table_name:
                raise IdTaken(str(error)) from cause
            raise

    def _insert(
        self, stored_events: Sequence[StoredEvent], params: list[Any], shred: Sequence[ShredRow]
    ) -> list[int]:
        # One statement in autocommit: its own transaction, one round trip (the
        # function draws the save's block of ids: services.adapters.postgres_ordering).
        # An erasure also deletes keys, in the same transaction. Listeners are
        # told once it has committed. Plain values: the pool's dict rows would
        # name the columns of every result.
        with self.datastore.get_connection() as conn, conn.cursor(row_factory=scalar_row) as cursor:
            if not shred:
                cursor.execute(self._insert_call_sql(conn), params, prepare=True)
                inserted = cursor.fetchall()
            else:
                with conn.transaction():
                    cursor.execute(self._insert_call_sql(conn), params, prepare=True)
                    inserted = cursor.fetchall()
                    self._shred(cursor, shred)
        if inserted:
            self._wakeups.saved()
        return inserted

    def _insert_call_sql(self, conn: psycopg.Connection[Any]) -> bytes:
        # Every array goes in binary (services.adapters.postgres_arrays); as text
        # the events' states would be hex-escaped byte by byte.
        if self._insert_call is None:
            id_type = sql.Identifier(self.datastore.originator_id_type)
            self._insert_call = (
                sql.SQL(
                    "SELECT notification_id FROM {schema}.{function}("
                    "%b::{id_type}[], %b::bigint[], %b::text[], %b::bytea[], "
                    "%b::text[], %b::text[], %b::text[], %b::bigint[], "
                    "%b::text[], %b::text[], %b::text[], %b::bigint[], "
                    "%b::text[], %b::bigint[], %b::text[], %b::text[], %b::bytea[])"
                )
                .format(
                    schema=sql.Identifier(self.datastore.schema),
                    function=sql.Identifier(self.insert_function_name),
                    id_type=id_type,
                )
                .as_bytes(conn)
            )
        return self._insert_call

    def _shred(self, cursor: psycopg.Cursor[Any], shred: Sequence[ShredRow]) -> None:
        """Deletes the keys an erasure names, in the transaction of its event."""
        sessions, versions, kinds, key_ids = (list(c) for c in zip(*shred, strict=True))
        cursor.execute(
            sql.SQL(
                "DELETE FROM {schema}.{table} AS k USING unnest("
                "%s::text[], %s::bigint[], %s::text[], %s::text[]) AS s(session_id, version, "
                "kind, key_id) WHERE k.session_id = s.session_id AND (s.kind = '' OR ("
                "k.kind = s.kind AND k.key_id = s.key_id AND s.version IN (-1, k.version)))"
            ).format(
                schema=sql.Identifier(self.datastore.schema),
                table=sql.Identifier(self.data_keys_table_name),
            ),
            (sessions, versions, kinds, key_ids),
        )

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

    def expire_keys(self, ttl_seconds: float) -> int:
        with self.datastore.transaction(commit=True) as cursor:
            cursor.execute(
                sql.SQL(
                    "DELETE FROM {schema}.{keys} "
                    "WHERE created_at < now() - make_interval(secs => %s)"
                ).format(
                    schema=sql.Identifier(self.datastore.schema),
                    keys=sql.Identifier(self.keys_table_name),
                ),
                (ttl_seconds,),
            )
            return int(cursor.rowcount)


def _rows(conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
    """A cursor for events and keys: binary (an event's bytes not hex-escaped) and plain
    tuples (the pool's dict rows would name the columns of each of hundreds of rows)."""
    return conn.cursor(binary=True, row_factory=tuple_row)
