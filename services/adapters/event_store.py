"""The event store: the eventsourcing library on SQLite or PostgreSQL.

Events and snapshots are stored as JSON; the transcodings below tell the
library how to write the domain's value objects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any, cast

import psycopg
from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.domain import CanMutateAggregate, get_topic
from eventsourcing.persistence import (
    ApplicationRecorder,
    JSONTranscoder,
    StoredEvent,
    Transcoding,
)
from eventsourcing.popo import POPOFactory
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from psycopg import sql

from domain.compaction import Compaction, CompactionFailure
from domain.content import Entry, Usage
from domain.context.tool_result_guard import ToolResultDecision
from domain.pruning import PruneDecision
from domain.session import Session, SessionEvent
from domain.settings import SessionSettings
from domain.system_prompt import SystemPrompt
from services.adapters import sqlite_recorder
from services.adapters.id_index import IdRow, IndexingRecorder, StoredIds, id_rows
from services.adapters.idempotency_keys import key_rows
from services.adapters.memory_recorder import MemoryEventRecorder
from services.adapters.postgres_availability import (
    PostgresProbe,
    ResilientPostgresDatastore,
    make_resilient,
)

STARTED_TOPIC = get_topic(Session.Started)
PROBE_TIMEOUT_SECONDS = 3
# A session grown by few, large appends reaches few versions: a snapshot every
# this many entries as well keeps a cold load from decoding its whole history.
ENTRIES_PER_SNAPSHOT = 1_000


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


class GuardDecisionAsDict(_AsDict):
    type = ToolResultDecision
    name = "guard"


class SystemPromptAsDict(_AsDict):
    type = SystemPrompt
    name = "system_prompt"


class CompactionFailureAsDict(_AsDict):
    type = CompactionFailure
    name = "compaction_failure"


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
        _check_postgres(env)
        self._probe: PostgresProbe | None = None
        super().__init__(env=env)
        self.snapshot_interval = snapshot_interval
        self._index_topics()
        self.backfilled_ids = self._indexing_recorder.create_id_index(self._id_rows_of)
        self._indexing_recorder.create_key_table()

    def construct_recorder(self) -> ApplicationRecorder:
        # The library's in-memory factory takes no recorder class from the
        # environment; the SQL ones do (see services.config).
        if isinstance(self.factory, POPOFactory):
            return MemoryEventRecorder()
        datastore = getattr(self.factory, "datastore", None)
        if isinstance(datastore, PostgresDatastore):
            make_resilient(datastore)
            self._probe = PostgresProbe(cast(ResilientPostgresDatastore, datastore))
        elif isinstance(datastore, SQLiteDatastore):
            sqlite_recorder.make_resilient(datastore)
        return super().construct_recorder()

    def probe(self) -> str:
        """Empty when the database answers, else why not; requests fail fast while it does not."""
        return self._probe.check() if self._probe is not None else ""

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
        super().close()

    @property
    def _indexing_recorder(self) -> IndexingRecorder:
        recorder: Any = self.recorder
        return recorder

    def ids_of(self, session_id: str) -> StoredIds:
        """The id lookup an append to this session asks."""
        return StoredIds(self._indexing_recorder, session_id)

    def earlier_append(
        self, session_id: str, key: str, ttl_seconds: float
    ) -> tuple[str, int] | None:
        """(fingerprint, version) of the session's append with this idempotency key, if
        made within the TTL: one indexed query."""
        return self._indexing_recorder.earlier_append(session_id, key, ttl_seconds)

    def expire_idempotency_keys(self, ttl_seconds: float) -> int:
        return self._indexing_recorder.expire_keys(ttl_seconds)

    def _id_rows_of(self, stored: StoredEvent) -> list[IdRow]:
        return id_rows([self.mapper.to_domain_event(stored)])

    def save_sessions(self, sessions: Sequence[Session]) -> dict[str, int]:
        """Stores the sessions' pending events in one insert, then the snapshots due;
        answers each session's position (the notification id of its last event).

        The insert is atomic: all the sessions' events, their id-index rows
        and idempotency keys land, or none and the sessions keep them pending. (The library's
        general save() collects events from any mix of objects through runtime
        protocol checks, and snapshots by reading the aggregate back; here both
        are at hand.)
        """
        events = [e for s in sessions for e in s.pending_events]
        recordings = self.events.put(events, ids=id_rows(events), keys=key_rows(events))
        positions: dict[str, int] = {}
        for recording in recordings:
            session_id = str(recording.notification.originator_id)
            positions[session_id] = max(positions.get(session_id, 0), recording.notification.id)
        for session in sessions:
            saved = session.collect_events()
            if self.snapshots is not None and _snapshot_due(session, saved, self.snapshot_interval):
                self.snapshots.put([Session.Snapshot.take(session)])
        return positions

    def _index_topics(self) -> None:
        """Lets sessions be listed by their Started events without scanning every event."""
        recorder: Any = self.recorder
        if not hasattr(recorder, "datastore"):
            return  # the in-memory recorder indexes nothing
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
            GuardDecisionAsDict(),
            SystemPromptAsDict(),
            CompactionFailureAsDict(),
            UsageAsList(),
            MappingAsDict(),
        ):
            transcoder.register(transcoding)

    def session_events(
        self, session_id: str, *, after: int = 0, upto: int | None = None, limit: int | None = None
    ) -> list[SessionEvent]:
        events = self.events.get(session_id, gt=after or None, lte=upto, limit=limit)
        return cast(list[SessionEvent], list(events))

    def session_with_events(
        self, session_id: str, start: Callable[[Session], int]
    ) -> tuple[Session, list[SessionEvent], int]:
        """The aggregate, from its latest snapshot and the events after it, and the
        events after version ``after``, each decoded once: ``after`` is what
        ``start`` says of the aggregate (0 without a snapshot, when every event is
        read anyway). Events before the snapshot's are read only when ``start``
        asks for them."""
        snapshot: Any = None
        if self.snapshots is not None:
            snapshot = next(iter(self.snapshots.get(session_id, desc=True, limit=1)), None)
        session: Any = snapshot.mutate(None) if snapshot is not None else None
        snapshot_version = session.version if session is not None else 0
        events = self.session_events(session_id, after=snapshot_version)
        for event in events:
            session = event.mutate(session)
        if session is None:
            raise AggregateNotFoundError(session_id)
        after = min(snapshot_version, max(0, start(session)))
        if after < snapshot_version:
            events = self.session_events(session_id, after=after, upto=snapshot_version) + events
        return session, events, after

    def started_notifications(self, after: int, limit: int) -> list[tuple[int, str]]:
        """(notification id, session id) of sessions created after a position."""
        notifications = self.recorder.select_notifications(
            start=after, limit=limit, topics=[STARTED_TOPIC], inclusive_of_start=False
        )
        return [(n.id, str(n.originator_id)) for n in notifications]


def _snapshot_due(
    session: Session, saved: Sequence[CanMutateAggregate[str]], interval: int
) -> bool:
    if any(e.originator_version % interval == 0 for e in saved):
        return True
    appended = sum(len(e.entries) for e in saved if isinstance(e, Session.EntriesAppended))
    before = session.entry_count - appended
    return before // ENTRIES_PER_SNAPSHOT != session.entry_count // ENTRIES_PER_SNAPSHOT


class DatabaseUnreachable(OSError):
    """The configured database cannot be used; the message says why and what to do."""


def _check_postgres(env: dict[str, str]) -> None:
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
