"""The event store: the eventsourcing library on SQLite or PostgreSQL.

Events and snapshots are stored as JSON (services.adapters.event_codecs says how
the domain's value objects are written), each under its session's key scope
(services.adapters.event_keys).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

from eventsourcing.application import AggregateNotFoundError, Application, Repository
from eventsourcing.domain import CanMutateAggregate, get_topic
from eventsourcing.persistence import (
    ApplicationRecorder,
    JSONTranscoder,
    Mapper,
    StoredEvent,
)
from eventsourcing.popo import POPOFactory
from eventsourcing.postgres import PostgresDatastore

from domain.errors import Unavailable
from domain.session import Session, SessionEvent
from domain.session_events import EntriesAppended, EntriesErased, SessionErased, Started
from services.adapters import event_codecs
from services.adapters.data_keys import data_key_rows, shred_rows, snapshot_key_row
from services.adapters.event_codecs import content_being_read
from services.adapters.event_keys import (
    SealingMapper,
    SessionKeys,
    keys_being_read,
    keys_being_written,
    keys_by_event,
)
from services.adapters.event_table_creation import create_event_tables
from services.adapters.event_tables import STORE_NAME
from services.adapters.id_index import IdRow, IndexingRecorder, StoredIds, id_rows
from services.adapters.idempotency_keys import key_rows
from services.adapters.legacy_tenants import legacy_tenants
from services.adapters.memory_recorder import MemoryEventRecorder
from services.adapters.postgres_availability import (
    PostgresProbe,
    ResilientPostgresDatastore,
    make_resilient,
)
from services.adapters.postgres_check import setting_up_postgres
from services.config import Config

STARTED_TOPIC = get_topic(Started)
SNAPSHOT_TOPIC = get_topic(Session.Snapshot)
ERASURE_TOPICS = [get_topic(EntriesErased), get_topic(SessionErased)]
# A session grown by few, large appends reaches few versions: a snapshot every
# this many entries as well keeps a cold load from decoding its whole history.
ENTRIES_PER_SNAPSHOT = 1_000


class EventStore(Application[str]):
    """Sessions' events and snapshots, in one of the library's recorders."""

    name = STORE_NAME
    # Tells the library to keep a snapshot store and load from it; save_session
    # decides when to take one.
    snapshotting_intervals = {Session: 100}  # noqa: RUF012  (the library's class attribute)

    def __init__(
        self,
        env: dict[str, str],
        snapshot_interval: int = 100,
        create_schema: bool = True,
        *,
        create_tables: bool = True,
    ) -> None:
        """``create_tables``: create the tables, indexes and functions the store lacks
        (filling those added since from the stored events), as a process that
        migrates does (services.adapters.event_table_creation); without it nothing
        is created, not even the PostgreSQL schema, and the tables must be there
        (services.adapters.event_tables says which a database lacks: look first)."""
        self._probe: PostgresProbe | None = None
        if not create_tables:
            env = {**env, "CREATE_TABLE": "n"}  # the library's recorders make none
        self.backfilled_ids = 0
        with setting_up_postgres(env, create_schema and create_tables):
            super().__init__(env=env)
            if create_tables:
                self.backfilled_ids = create_event_tables(self._indexing_recorder, self._id_rows_of)
        self.snapshot_interval = snapshot_interval
        # Bare stream ids of other tenants' sessions stored before ids were scoped.
        self.legacy_tenants = legacy_tenants(self.recorder, create=create_tables)

    def construct_mapper(self) -> Mapper[str]:
        mapper = self.factory.mapper(
            transcoder=self.construct_transcoder(), mapper_class=SealingMapper
        )
        cast(SealingMapper, mapper).indexing = lambda: self.indexing
        return mapper

    def construct_repository(self) -> Repository[str]:
        repository = super().construct_repository()
        get = repository.get

        def getreading_keys_var_keys(aggregate_id: str, *args: Any, **kwargs: Any) -> Any:
            with self.reading_keys(aggregate_id):
                return get(aggregate_id, *args, **kwargs)

        repository.get = getreading_keys_var_keys  # type: ignore[method-assign]
        return repository

    @contextmanager
    def reading_keys(self, session_id: str, upto: int | None = None) -> Iterator[None]:
        """Decodes within load the session's keys by version range, one query each."""
        readers = keys_being_read.get() or {}
        if session_id in readers:
            yield
            return
        token = keys_being_read.set(
            {**readers, session_id: SessionKeys(self.indexing, session_id, upto)}
        )
        try:
            yield
        finally:
            keys_being_read.reset(token)

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
        keys = keys_being_read.set(
            {sid: SessionKeys(self.indexing, sid, v) for sid, v in upto.items()}
        )
        content = content_being_read.set(entry_content)
        try:
            return [self.mapper.to_domain_event(s) for s in stored]
        finally:
            content_being_read.reset(content)
            keys_being_read.reset(keys)

    def construct_recorder(self) -> ApplicationRecorder:
        # The library's in-memory factory takes no recorder class from the
        # environment; the SQL ones do (see services.config).
        if isinstance(self.factory, POPOFactory):
            return MemoryEventRecorder()
        datastore = getattr(self.factory, "datastore", None)
        if isinstance(datastore, PostgresDatastore):
            make_resilient(datastore)
            self._probe = PostgresProbe(cast(ResilientPostgresDatastore, datastore))
        elif datastore is not None:
            # SQLite's, imported only for it: a server on PostgreSQL need not load
            # sqlite3 (about 1 MB).
            from services.adapters import sqlite_recorder

            if isinstance(datastore, sqlite_recorder.SQLiteDatastore):
                sqlite_recorder.make_resilient(datastore)
        return super().construct_recorder()

    @property
    def postgres(self) -> ResilientPostgresDatastore | None:
        """The PostgreSQL datastore (its pool's connection settings, its schema); None
        on SQLite and memory:."""
        datastore = getattr(self.factory, "datastore", None)
        return datastore if isinstance(datastore, ResilientPostgresDatastore) else None

    def probe(self) -> str:
        """Empty when the database answers, else why not; requests fail fast while it does not."""
        return self._probe.check() if self._probe is not None else ""

    def known_outage(self) -> Unavailable | None:
        """What requests are refused with at once while the probe finds the database
        unreachable; None while it answers (always on SQLite and memory:, which no
        probe watches)."""
        postgres = self.postgres
        return postgres.known_outage() if postgres is not None else None

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
        """How far a reader of the log may read (0 when nothing is stored): every
        event up to it is committed, and none will come before it."""
        return self.recorder.max_notification_id() or 0

    def latest_position(self) -> int:
        """The position of the latest event stored, by any server (0 when none): at
        or beyond every write answered, and at or beyond the head."""
        return self._indexing_recorder.latest_notification_id() or 0

    def events_between(self, after: int, upto: int) -> int:
        """How many events are stored after position ``after`` up to ``upto``."""
        return self._indexing_recorder.notifications_between(after, upto)

    def ids_of(self, session_id: str) -> StoredIds:
        """The id lookup an append to this session asks."""
        return StoredIds(self._indexing_recorder, session_id)

    def forks_of(self, session_id: str) -> list[tuple[str, int]]:
        """(fork id, parent version copied) of the sessions forked from this one."""
        return self._indexing_recorder.forks_of([session_id]).get(session_id, [])

    def forks_of_each(self, session_ids: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        """forks_of for many sessions in one query; those without forks are left out."""
        return self._indexing_recorder.forks_of(session_ids)

    def earlier_append(
        self, session_id: str, key: str, ttl_seconds: float
    ) -> tuple[str, int] | None:
        """(fingerprint, version) of the session's write (an append, or a Compact's
        compaction) with this idempotency key, if made within the TTL: one indexed query."""
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
        token = keys_being_written.set(keys_by_event(made))
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
            keys_being_written.reset(token)
        return positions

    def register_transcodings(self, transcoder: JSONTranscoder) -> None:
        super().register_transcodings(transcoder)
        event_codecs.register_all(transcoder)

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
        keys = (keys_being_read.get() or {})[session_id]
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


def _snapshot_due(
    session: Session, saved: Sequence[CanMutateAggregate[str]], interval: int
) -> bool:
    if any(e.originator_version % interval == 0 for e in saved):
        return True
    appended = sum(len(e.entries) for e in saved if isinstance(e, EntriesAppended))
    before = session.entry_count - appended
    return before // ENTRIES_PER_SNAPSHOT != session.entry_count // ENTRIES_PER_SNAPSHOT


def build_event_store(
    config: Config, *, create_schema: bool = True, create_tables: bool = True
) -> EventStore:
    """The store the configuration names (the server's, the worker's, the admin's);
    without ``create_schema``, only one whose PostgreSQL schema exists (for admin
    commands on a store, which must not make an empty one of a typo); without
    ``create_tables``, one whose tables exist, for a process that does not migrate
    (EventStore: it creates nothing at all).

    Without the library's aggregate cache: it holds aggregates by count, outside
    the cache cap (10,000 of them, some 50 MB, were set before). The server keeps
    the aggregates it reads and writes in caches weighed within the cap
    (services.app.access)."""
    return EventStore(
        config.eventsourcing_env(),
        snapshot_interval=config.snapshot_interval,
        create_schema=create_schema,
        create_tables=create_tables,
    )
