"""The event store: the eventsourcing library on SQLite or PostgreSQL.

Events and snapshots are stored as JSON; the transcodings below tell the
library how to write the domain's value objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, cast

import psycopg
from eventsourcing.application import AggregateNotFoundError, Application, Repository
from eventsourcing.domain import CanMutateAggregate, get_topic
from eventsourcing.persistence import (
    ApplicationRecorder,
    JSONTranscoder,
    Mapper,
    MapperDeserialisationError,
    PersistenceError,
    StoredEvent,
    Transcoding,
)
from eventsourcing.popo import POPOFactory
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.sqlite import SQLiteDatastore
from psycopg import sql

from domain.compaction import Compaction, CompactionFailure
from domain.content import Entry, Usage
from domain.context.calibration import TokenLesson, WindowLesson
from domain.context.tool_result_guard import ToolResultDecision
from domain.erasure import ERASED_METADATA, ERASED_SUMMARY
from domain.errors import Unavailable
from domain.pruning import PruneDecision
from domain.session import Session, SessionEvent
from domain.settings import SessionSettings
from domain.system_prompt import SystemPrompt
from services.adapters import sealed_formats, sqlite_recorder
from services.adapters.data_keys import data_key_rows, shred_rows, snapshot_key_row
from services.adapters.id_index import IdRow, IndexingRecorder, StoredIds, id_rows
from services.adapters.idempotency_keys import key_rows
from services.adapters.legacy_tenants import legacy_tenants
from services.adapters.memory_recorder import MemoryEventRecorder
from services.adapters.postgres_availability import (
    PostgresProbe,
    ResilientPostgresDatastore,
    make_resilient,
)
from services.adapters.sealing import (
    EVENT,
    SNAPSHOT,
    DataKeyRow,
    KeyRange,
    KeyScope,
    current_scope,
    scoped,
)
from services.config import Config

STARTED_TOPIC = get_topic(Session.Started)
SNAPSHOT_TOPIC = get_topic(Session.Snapshot)
ERASURE_TOPICS = [get_topic(Session.EntriesErased), get_topic(Session.SessionErased)]
PROBE_TIMEOUT_SECONDS = 3
# A session grown by few, large appends reaches few versions: a snapshot every
# this many entries as well keeps a cold load from decoding its whole history.
ENTRIES_PER_SNAPSHOT = 1_000
# What compactions and system prompts seal, and what they read as once erased.
COMPACTION_CONTENT = ("summary", "instructions", "details", "provider_item")
COMPACTION_ERASED = {
    "summary": ERASED_SUMMARY,
    "instructions": "",
    "details": ERASED_METADATA,
    "provider_item": None,
}
PROMPT_CONTENT = ("text", "files", "skills", "tools")
PROMPT_ERASED: dict[str, Any] = {"text": "", "files": [], "skills": [], "tools": []}
# The settings' content: the title (labels and the rest are the client's structure).
SETTINGS_CONTENT = ("title",)
SETTINGS_ERASED = {"title": ""}
# The keys made for the events being saved: (session, version) -> (kind, key id) -> key.
_writing: ContextVar[dict[tuple[str, int], dict[tuple[str, str], bytes]] | None] = ContextVar(
    "writing_keys", default=None
)
# False while events are read for their structure only: entries' content stays sealed.
_entry_content: ContextVar[bool] = ContextVar("entry_content", default=True)
# The sessions whose keys the read under way loads, at most once per version range.
_reading: ContextVar[dict[str, SessionKeys] | None] = ContextVar("reading_keys", default=None)


class SessionKeys:
    """One session's data keys for one read: loaded by versions (one query per range
    the read reaches), never kept past the read, so a key deleted since is not used."""

    def __init__(self, recorder: IndexingRecorder, session_id: str, upto: int | None) -> None:
        self._recorder = recorder
        self._session_id = session_id
        self._upto = upto
        self._loaded_after: int | None = None
        self._keys: dict[tuple[int, str, str], bytes] = {}

    def find(self, version: int, kind: str, key_id: str) -> bytes | None:
        wanted = self.missing(version)
        if wanted is not None:
            self.add(self._recorder.data_keys(self._session_id, *wanted), wanted)
        return self._keys.get((version, kind, key_id))

    def missing(self, version: int) -> KeyRange | None:
        """The versions whose keys a read from ``version`` on needs and this one has
        not loaded yet, as (after, upto]; None when it has them all."""
        if self._loaded_after is not None and version > self._loaded_after:
            return None
        return version - 1, self._upto if self._loaded_after is None else self._loaded_after

    def add(self, rows: Sequence[DataKeyRow], loaded: KeyRange) -> None:
        """The keys of the range ``missing`` answered, read (with events, say)."""
        for _, v, k, i, key in rows:
            self._keys[v, k, i] = key
        self._loaded_after = loaded[0]


class SealingMapper(Mapper[str]):
    """The library's mapper, setting the key scope of each event it maps."""

    store: EventStore

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        session_id, version = domain_event.originator_id, domain_event.originator_version
        keys = (_writing.get() or {}).get((session_id, version), {})
        kind = SNAPSHOT if isinstance(domain_event, Session.Snapshot) else EVENT
        with scoped(KeyScope(session_id, version, keys=keys, own_kind=kind)):
            return super().to_stored_event(domain_event)

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        session_id = str(stored_event.originator_id)
        version = stored_event.originator_version
        readers = _reading.get() or {}
        keys = readers.get(session_id) or SessionKeys(self.store.indexing, session_id, version)
        scope = KeyScope(
            session_id,
            version,
            lookup=lambda kind, i: keys.find(version, kind, i),
            own_kind=SNAPSHOT if stored_event.topic == SNAPSHOT_TOPIC else EVENT,
        )
        with scoped(scope):
            try:
                return super().to_domain_event(stored_event)
            except MapperDeserialisationError as error:
                # Keys are read while the event decodes: a database fault then is
                # that fault (UNAVAILABLE, retried), not an event that cannot be read.
                if isinstance(error.__cause__, Unavailable | PersistenceError):
                    raise error.__cause__ from None
                raise


class _AsDict(Transcoding):
    """A value object written as the dict its own to_dict/from_dict define."""

    type: Any  # a class with to_dict() and from_dict()
    name: str

    def encode(self, obj: Any) -> Any:
        return obj.to_dict()

    def decode(self, data: Any) -> Any:
        return self.type.from_dict(data)


class EntryAsRecord(Transcoding):
    """An entry as its positional record, its content sealed under the entry's key.

    Stored as ``{"r": record, "s": sealed}``: the record keeps the structure
    (ids, role, counts, tool call ids and names) with the content blocks cut to
    their skeletons and no metadata; ``s`` seals the blocks and metadata. A
    plain list is an entry stored before sealing, read as it is.
    """

    type = Entry
    name = "entry"

    def encode(self, obj: Entry) -> Any:
        return sealed_formats.seal_entry(current_scope(), obj.to_record())

    def decode(self, data: Any) -> Entry:
        if isinstance(data, list):
            return Entry.from_record(data)
        if not _entry_content.get():
            return Entry.from_record(sealed_formats.unopened_entry(data))
        return Entry.from_record(sealed_formats.open_entry(current_scope(), data))


class SettingsAsDict(_AsDict):
    """A session's settings, the title sealed under the key of the event (or snapshot)
    that holds them. Settings without a title, and those stored before titles were
    sealed, are a plain dict."""

    type = SessionSettings
    name = "settings"

    def encode(self, obj: SessionSettings) -> Any:
        data = obj.to_dict()
        if not obj.title:
            return data
        return sealed_formats.seal_fields(current_scope(), data, SETTINGS_CONTENT)

    def decode(self, data: Any) -> SessionSettings:
        opened, _ = sealed_formats.open_fields(current_scope, data, SETTINGS_ERASED)
        return SessionSettings.from_dict(opened)


class CompactionAsDict(_AsDict):
    """A compaction's receipt, its summary and instructions sealed under the event's key."""

    type = Compaction
    name = "compaction"

    def encode(self, obj: Compaction) -> Any:
        return sealed_formats.seal_fields(current_scope(), obj.to_dict(), COMPACTION_CONTENT)

    def decode(self, data: Any) -> Compaction:
        opened, _ = sealed_formats.open_fields(current_scope, data, COMPACTION_ERASED)
        return Compaction.from_dict(opened)


class PruneDecisionAsDict(_AsDict):
    type = PruneDecision
    name = "prune"


class GuardDecisionAsDict(_AsDict):
    type = ToolResultDecision
    name = "guard"


class SystemPromptAsDict(_AsDict):
    """A system prompt, its text, files, skills and tools sealed under the event's key."""

    type = SystemPrompt
    name = "system_prompt"

    def encode(self, obj: SystemPrompt) -> Any:
        return sealed_formats.seal_fields(current_scope(), obj.to_dict(), PROMPT_CONTENT)

    def decode(self, data: Any) -> SystemPrompt:
        opened, _ = sealed_formats.open_fields(current_scope, data, PROMPT_ERASED)
        return SystemPrompt.from_dict(opened)


class CompactionFailureAsDict(_AsDict):
    type = CompactionFailure
    name = "compaction_failure"


class TokenLessonAsDict(_AsDict):
    type = TokenLesson
    name = "token_lesson"


class WindowLessonAsDict(_AsDict):
    type = WindowLesson
    name = "window_lesson"


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
        self._indexing_recorder.create_data_key_table()
        # Bare stream ids of other tenants' sessions stored before ids were scoped.
        self.legacy_tenants = legacy_tenants(self.recorder)

    def construct_mapper(self) -> Mapper[str]:
        mapper = self.factory.mapper(
            transcoder=self.construct_transcoder(), mapper_class=SealingMapper
        )
        cast(SealingMapper, mapper).store = self
        return mapper

    def construct_repository(self) -> Repository[str]:
        repository = super().construct_repository()
        get = repository.get

        def get_reading_keys(aggregate_id: str, *args: Any, **kwargs: Any) -> Any:
            with self.reading_keys(aggregate_id):
                return get(aggregate_id, *args, **kwargs)

        repository.get = get_reading_keys  # type: ignore[method-assign]
        return repository

    @contextmanager
    def reading_keys(self, session_id: str, upto: int | None = None) -> Iterator[None]:
        """Decodes within load the session's keys by version range, one query each."""
        readers = _reading.get() or {}
        if session_id in readers:
            yield
            return
        token = _reading.set({**readers, session_id: SessionKeys(self.indexing, session_id, upto)})
        try:
            yield
        finally:
            _reading.reset(token)

    def decode_notifications(
        self, stored: Sequence[StoredEvent], *, entry_content: bool = True
    ) -> list[Any]:
        """Events of many sessions, each session's keys loaded in one query (when a
        key is needed at all). Without ``entry_content`` entries keep their structure
        and counts, their content is left sealed, and placeholders stand in for it."""
        upto: dict[str, int] = {}
        for s in stored:
            sid = str(s.originator_id)
            upto[sid] = max(upto.get(sid, 0), s.originator_version)
        keys = _reading.set({sid: SessionKeys(self.indexing, sid, v) for sid, v in upto.items()})
        content = _entry_content.set(entry_content)
        try:
            return [self.mapper.to_domain_event(s) for s in stored]
        finally:
            _entry_content.reset(content)
            _reading.reset(keys)

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
    def indexing(self) -> IndexingRecorder:
        return self._indexing_recorder

    @property
    def _indexing_recorder(self) -> IndexingRecorder:
        recorder: Any = self.recorder
        return recorder

    def session(self, session_id: str) -> Session | None:
        """The aggregate as stored (from its latest snapshot on), None when there is none."""
        try:
            return cast(Session, self.repository.get(session_id))
        except AggregateNotFoundError:
            return None

    def head_position(self) -> int:
        """The position of the latest event stored, by any server (0 when none)."""
        return self.recorder.max_notification_id() or 0

    def ids_of(self, session_id: str) -> StoredIds:
        """The id lookup an append to this session asks."""
        return StoredIds(self._indexing_recorder, session_id)

    def forks_of(self, session_id: str) -> list[tuple[str, int]]:
        """(fork id, parent version copied) of the sessions forked from this one."""
        return self._indexing_recorder.forks_of(session_id)

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
        made = data_key_rows(events)
        snapshot_due = [
            self.snapshots is not None
            and _snapshot_due(s, s.pending_events, self.snapshot_interval)
            for s in sessions
        ]
        # A snapshot's title is sealed under a key of its own, stored with the events.
        for session, due in zip(sessions, snapshot_due, strict=True):
            row = snapshot_key_row(session) if due else None
            if row is not None:
                made.append(row)
        token = _writing.set(_keys_by_event(made))
        try:
            recordings = self.events.put(
                events,
                ids=id_rows(events),
                keys=key_rows(events),
                data_keys=made,
                shred=shred_rows(events),
            )
            positions: dict[str, int] = {}
            for recording in recordings:
                session_id = str(recording.notification.originator_id)
                positions[session_id] = max(positions.get(session_id, 0), recording.notification.id)
            for session, due in zip(sessions, snapshot_due, strict=True):
                session.collect_events()
                if due and self.snapshots is not None:
                    self.snapshots.put([Session.Snapshot.take(session)])
        finally:
            _writing.reset(token)
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
            TokenLessonAsDict(),
            WindowLessonAsDict(),
            UsageAsList(),
            MappingAsDict(),
        ):
            transcoder.register(transcoding)

    def session_events(
        self, session_id: str, *, after: int = 0, upto: int | None = None, limit: int | None = None
    ) -> list[SessionEvent]:
        if limit is not None:
            # A page: its keys are read once it is known where the page ends.
            stored = self.recorder.select_events(
                session_id, gt=after or None, lte=upto, limit=limit
            )
            if not stored:
                return []
            with self.reading_keys(session_id, stored[-1].originator_version):
                return self._decoded(stored)
        with self.reading_keys(session_id, upto):
            return self._decoded(self._events_with_keys(session_id, after, upto))

    def _events_with_keys(
        self, session_id: str, after: int, upto: int | None, keys_from: int | None = None
    ) -> Sequence[StoredEvent]:
        """The stored events in (after, upto], and the keys of the versions from
        ``keys_from`` (the first event's) on that this read lacks, in one round trip."""
        keys = (_reading.get() or {})[session_id]
        wanted = keys.missing(after + 1 if keys_from is None else keys_from)
        stored, rows = self.indexing.events_and_keys(session_id, after, upto, wanted)
        if wanted is not None:
            keys.add(rows, wanted)
        return stored

    def _decoded(self, stored: Sequence[StoredEvent]) -> list[SessionEvent]:
        return [cast(SessionEvent, self.mapper.to_domain_event(s)) for s in stored]

    def session_with_events(
        self, session_id: str, start: Callable[[Session], int]
    ) -> tuple[Session, list[SessionEvent], int]:
        """The aggregate, from its latest snapshot and the events after it, and the
        events after version ``after``, each decoded once: ``after`` is what
        ``start`` says of the aggregate (0 without a snapshot, when every event is
        read anyway). Events before the snapshot's are read only when ``start``
        asks for them."""
        with self.reading_keys(session_id):
            return self._session_with_events(session_id, start)

    def _session_with_events(
        self, session_id: str, start: Callable[[Session], int]
    ) -> tuple[Session, list[SessionEvent], int]:
        stored_snapshot = None
        if self.snapshots is not None:
            found = self.snapshots.recorder.select_events(session_id, desc=True, limit=1)
            stored_snapshot = found[0] if found else None
        snapshot_version = stored_snapshot.originator_version if stored_snapshot else 0
        # The snapshot's key comes with the events after it.
        events = self._decoded(
            self._events_with_keys(session_id, snapshot_version, None, keys_from=snapshot_version)
        )
        session: Any = None
        if stored_snapshot is not None:
            snapshot = cast(Session.Snapshot, self.mapper.to_domain_event(stored_snapshot))
            session = snapshot.mutate(None)
        for event in events:
            session = event.mutate(session)
        if session is None:
            raise AggregateNotFoundError(session_id)
        after = min(snapshot_version, max(0, start(session)))
        if after < snapshot_version:
            earlier = self._events_with_keys(session_id, after, snapshot_version)
            events = self._decoded(earlier) + events
        return session, events, after

    def erasure_notifications(self, after: int, limit: int) -> list[tuple[int, str]]:
        """(notification id, session id) of erasures stored after a position (by any server)."""
        notifications = self.recorder.select_notifications(
            start=after, limit=limit, topics=ERASURE_TOPICS, inclusive_of_start=False
        )
        return [(n.id, str(n.originator_id)) for n in notifications]

    def started_notifications(self, after: int, limit: int) -> list[tuple[int, str]]:
        """(notification id, session id) of sessions created after a position."""
        notifications = self.recorder.select_notifications(
            start=after, limit=limit, topics=[STARTED_TOPIC], inclusive_of_start=False
        )
        return [(n.id, str(n.originator_id)) for n in notifications]


def _keys_by_event(
    rows: Sequence[DataKeyRow],
) -> dict[tuple[str, int], dict[tuple[str, str], bytes]]:
    keys: dict[tuple[str, int], dict[tuple[str, str], bytes]] = {}
    for session_id, version, kind, key_id, key in rows:
        keys.setdefault((session_id, version), {})[kind, key_id] = key
    return keys


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


# Aggregates read for queries are cached and fast-forwarded from the store.
AGGREGATE_CACHE_SIZE = 10_000


def build_event_store(config: Config) -> EventStore:
    """The store the configuration names (the server's, the worker's, the admin's)."""
    env = {**config.eventsourcing_env(), "AGGREGATE_CACHE_MAXSIZE": str(AGGREGATE_CACHE_SIZE)}
    return EventStore(env, snapshot_interval=config.snapshot_interval)
