"""The PostgreSQL recorder: the library's, writing each save in one round trip.

Each save is one call of a stored function, in its own (autocommit)
transaction: it draws the save's block of notification ids and inserts the
events, their id-index rows and their idempotency keys. Saves run side by
side, with no table lock; readers read up to the head the database says is
safe, so that paging or tracking by notification id never passes over an id
that commits later (services.adapters.postgres_ordering). The NOTIFY that
wakes listeners follows the commit (services.adapters.postgres_wakeups). Its
reads are in services.adapters.postgres_reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from eventsourcing.persistence import (
    IntegrityError,
    StoredEvent,
)
from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg import sql
from psycopg.rows import scalar_row

from services.adapters.id_index import (
    TABLE_SUFFIX,
    IdRow,
    IdTaken,
)
from services.adapters.idempotency_keys import TABLE_SUFFIX as KEYS_TABLE_SUFFIX
from services.adapters.idempotency_keys import KeyRow
from services.adapters.postgres_arrays import BigintArray, ByteaArray, TextArray, register
from services.adapters.postgres_notifications import NotificationLog
from services.adapters.postgres_reads import PostgresReads
from services.adapters.postgres_schema import (
    HEAD_FUNCTION_SUFFIX,
    INSERT_FUNCTION_SUFFIX,
    PostgresSchema,
)
from services.adapters.postgres_wakeups import SaveWakeups
from services.adapters.sealing import TABLE_SUFFIX as DATA_KEYS_TABLE_SUFFIX
from services.adapters.sealing import DataKeyRow, ShredRow

# The element types of an id row, a key row and a data key row, as arrays.
_ID_ROW = (TextArray, TextArray, TextArray, BigintArray)
_KEY_ROW = (TextArray, TextArray, TextArray, BigintArray)
_DATA_KEY_ROW = (TextArray, BigintArray, TextArray, TextArray, ByteaArray)
# Before any connection is made: each copies the adapters it starts with.
register(psycopg.adapters)


class PostgresEventRecorder(
    PostgresSchema, NotificationLog, PostgresReads, PostgresApplicationRecorder
):
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
        # Statements composed for this schema once, by their template (the reads').
        self._statements: dict[str, bytes] = {}
        self.keys_table_name = self.events_table_name + KEYS_TABLE_SUFFIX
        self.data_keys_table_name = self.events_table_name + DATA_KEYS_TABLE_SUFFIX

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
