"""The event store: the eventsourcing library on SQLite or PostgreSQL.

Events and snapshots are stored as JSON; the transcodings below tell the
library how to write the domain's value objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.application import Application
from eventsourcing.domain import get_topic
from eventsourcing.persistence import JSONTranscoder, StoredEvent, Transcoding
from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg import sql

from domain.compaction import Compaction
from domain.content import Entry, Usage
from domain.pruning import PruneDecision
from domain.session import Session
from domain.settings import SessionSettings

STARTED_TOPIC = get_topic(Session.Started)


class _AsDict(Transcoding):
    """A value object written as the dict its own to_dict/from_dict define."""

    type: Any  # a class with to_dict() and from_dict()
    name: str

    def encode(self, obj: Any) -> Any:
        return obj.to_dict()

    def decode(self, data: Any) -> Any:
        return self.type.from_dict(data)


class EntryAsRecord(Transcoding):
    type = Entry
    name = "entry"

    def encode(self, obj: Entry) -> list[Any]:
        return obj.to_record()

    def decode(self, data: list[Any]) -> Entry:
        return Entry.from_record(data)


class SettingsAsDict(_AsDict):
    type = SessionSettings
    name = "settings"


class CompactionAsDict(_AsDict):
    type = Compaction
    name = "compaction"


class PruneDecisionAsDict(_AsDict):
    type = PruneDecision
    name = "prune"


class UsageAsList(Transcoding):
    type = Usage
    name = "usage"

    def encode(self, obj: Usage) -> list[int]:
        return [obj.input_tokens, obj.output_tokens, obj.cache_read_tokens, obj.cache_write_tokens]

    def decode(self, data: list[int]) -> Usage:
        return Usage(*data)


class MappingAsDict(Transcoding):
    """Read-only mappings inside value objects (labels, details)."""

    type = MappingProxyType
    name = "map"

    def encode(self, obj: MappingProxyType[str, Any]) -> dict[str, Any]:
        return dict(obj)

    def decode(self, data: dict[str, Any]) -> MappingProxyType[str, Any]:
        return MappingProxyType(data)


class EventStore(Application[str]):
    """Sessions' events and snapshots, in one of the library's recorders."""

    name = "SessionStore"
    # Tells the library to keep a snapshot store and load from it; save_session
    # decides when to take one.
    snapshotting_intervals = {Session: 100}  # noqa: RUF012  (the library's class attribute)

    def __init__(self, env: dict[str, str], snapshot_interval: int = 100) -> None:
        _create_postgres_schema(env)
        super().__init__(env=env)
        self.snapshot_interval = snapshot_interval
        self._index_topics()

    def save_sessions(self, sessions: Sequence[Session]) -> None:
        """Stores the sessions' pending events in one insert, then the snapshots due.

        The insert is atomic: all the sessions' events land, or none and the
        sessions keep them pending. (The library's general save() collects
        events from any mix of objects through runtime protocol checks, and
        snapshots by reading the aggregate back; here both are at hand.)
        """
        self.events.put([e for s in sessions for e in s.pending_events])
        for session in sessions:
            saved = session.collect_events()
            if self.snapshots is not None and any(
                e.originator_version % self.snapshot_interval == 0 for e in saved
            ):
                self.snapshots.put([Session.Snapshot.take(session)])

    def _index_topics(self) -> None:
        """Lets sessions be listed by their Started events without scanning every event."""
        recorder: Any = self.recorder
        table = recorder.events_table_name
        if isinstance(recorder, PostgresApplicationRecorder):
            statement: Any = sql.SQL(
                "CREATE INDEX IF NOT EXISTS {index} ON {schema}.{table} (topic, notification_id)"
            ).format(
                index=sql.Identifier(f"{table}_topic_idx"),
                schema=sql.Identifier(recorder.datastore.schema),
                table=sql.Identifier(table),
            )
        else:
            statement = f"CREATE INDEX IF NOT EXISTS {table}_topic_idx ON {table} (topic)"
        with recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(statement)

    def register_transcodings(self, transcoder: JSONTranscoder) -> None:
        super().register_transcodings(transcoder)
        for transcoding in (
            EntryAsRecord(),
            SettingsAsDict(),
            CompactionAsDict(),
            PruneDecisionAsDict(),
            UsageAsList(),
            MappingAsDict(),
        ):
            transcoder.register(transcoding)

    def session_events(
        self, session_id: str, *, after: int = 0, upto: int | None = None, limit: int | None = None
    ) -> list[Session.Event]:
        return list(self.events.get(session_id, gt=after or None, lte=upto, limit=limit))  # type: ignore[arg-type]

    def started_notifications(self, after: int, limit: int) -> list[tuple[int, str]]:
        """(notification id, session id) of sessions created after a position."""
        notifications = self.recorder.select_notifications(
            start=after, limit=limit, topics=[STARTED_TOPIC], inclusive_of_start=False
        )
        return [(n.id, str(n.originator_id)) for n in notifications]


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


def _create_postgres_schema(env: dict[str, str]) -> None:
    schema = env.get("POSTGRES_SCHEMA")
    if env.get("PERSISTENCE_MODULE") != "eventsourcing.postgres" or not schema:
        return
    with psycopg.connect(
        host=env["POSTGRES_HOST"],
        port=int(env["POSTGRES_PORT"]),
        dbname=env["POSTGRES_DBNAME"],
        user=env["POSTGRES_USER"],
        password=env["POSTGRES_PASSWORD"] or None,
        autocommit=True,
    ) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
