"""The id index: every entry id and tool call id a session has used.

Rows ``(session_id, kind, key, version)`` are written in the same transaction
as the events that introduce them, and the primary key refuses a second use,
so uniqueness holds in storage even when two servers race. An append asks
the index (one indexed query for its whole turn) instead of reading the
session's history, which keeps the first write after a restart cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

from eventsourcing.domain import get_topic
from eventsourcing.persistence import AggregateRecorder, IntegrityError, StoredEvent

from domain.ids import UsedIds
from domain.session_events import EntriesAppended, Started, ToolCallsAbandoned
from services.adapters.idempotency_keys import KeyRow
from services.adapters.sealing import DataKeyRow, KeyRange, ShredRow

ENTRY = "entry"
TOOL_CALL = "tool_call"
# A fork's link, kept under its parent: (parent, FORK, fork id, the parent's version
# it copied). Written in the fork's own transaction, so an erasure of the parent
# finds every fork that exists, however far behind the read models are.
FORK = "fork"
ENTRIES_APPENDED_TOPIC = get_topic(EntriesAppended)
# The events an index built on an existing database is filled from (Started: fork links).
BACKFILL_TOPICS = (ENTRIES_APPENDED_TOPIC, get_topic(Started))
TABLE_SUFFIX = "_ids"

IdRow = tuple[str, str, str, int]
"""(session id, kind, key, version that introduced it)."""


def id_rows(events: Iterable[object]) -> list[IdRow]:
    """The index rows for events about to be stored."""
    rows: list[IdRow] = []
    for event in events:
        if isinstance(event, EntriesAppended):
            session_id, version = event.originator_id, event.originator_version
            for entry in event.entries:
                rows.append((session_id, ENTRY, entry.id, version))
                rows.extend((session_id, TOOL_CALL, c.id, version) for c in entry.tool_calls)
        elif isinstance(event, ToolCallsAbandoned):
            rows.append((event.originator_id, ENTRY, event.entry.id, event.originator_version))
        elif isinstance(event, Started) and event.parent_session_id:
            rows.append(
                (event.parent_session_id, FORK, event.originator_id, event.forked_at_version)
            )
    return rows


class IdTaken(IntegrityError):
    """An id of the insert was used first by another writer: the index refused it."""


class EventsAndKeysInTwoReads:
    """``events_and_keys`` and its many-session forms for recorders in process, where
    a query a session costs no more than one for them all."""

    def events_and_keys(
        self: Any, session_id: str, after: int, upto: int | None, keys: KeyRange | None
    ) -> tuple[Sequence[StoredEvent], list[DataKeyRow]]:
        events = self.select_events(session_id, gt=after or None, lte=upto)
        return events, self.data_keys(session_id, *keys) if keys is not None else []

    def latest_snapshots(
        self, session_ids: Sequence[str], snapshots: AggregateRecorder
    ) -> list[StoredEvent]:
        return [
            found[0]
            for session_id in session_ids
            if (found := snapshots.select_events(session_id, desc=True, limit=1))
        ]

    def events_and_keys_of(
        self: Any, after: Mapping[str, tuple[int, int]]
    ) -> tuple[list[StoredEvent], list[DataKeyRow]]:
        events: list[StoredEvent] = []
        keys: list[DataKeyRow] = []
        for session_id, (events_after, keys_after) in after.items():
            found, rows = self.events_and_keys(session_id, events_after, None, (keys_after, None))
            events.extend(found)
            keys.extend(rows)
        return events, keys


class OneWriterAtATime:
    """Positions for recorders whose saves take turns (SQLite's write lock, one
    process's memory): ids commit in the order they are drawn, one after another,
    so the latest is also the head and a count of events is a difference."""

    def latest_notification_id(self: Any) -> int | None:
        head: int | None = self.max_notification_id()
        return head

    def notifications_between(self, after: int, upto: int) -> int:
        return max(0, upto - after)


class IndexingRecorder(Protocol):
    """What each of our recorders adds to the library's: the id index."""

    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        ids: Sequence[IdRow] = (),
        keys: Sequence[KeyRow] = (),
        data_keys: Sequence[DataKeyRow] = (),
        shred: Sequence[ShredRow] = (),
        **kwargs: Any,
    ) -> Sequence[int] | None: ...

    def create_data_key_table(self) -> None:
        """Creates the data key table if missing (services.adapters.sealing)."""

    def data_keys(self, session_id: str, after: int, upto: int | None) -> list[DataKeyRow]:
        """The session's data keys of the versions after ``after`` (up to ``upto``): one
        indexed query."""

    def events_and_keys(
        self, session_id: str, after: int, upto: int | None, keys: KeyRange | None
    ) -> tuple[Sequence[StoredEvent], list[DataKeyRow]]:
        """The session's events in the versions (after, upto] and its data keys in
        ``keys`` (none when None), in one round trip where the database is remote."""

    def latest_snapshots(
        self, session_ids: Sequence[str], snapshots: AggregateRecorder
    ) -> list[StoredEvent]:
        """The latest snapshot in ``snapshots`` of each session that has one: one
        query for them all where the database is remote."""

    def events_and_keys_of(
        self, after: Mapping[str, tuple[int, int]]
    ) -> tuple[list[StoredEvent], list[DataKeyRow]]:
        """Many sessions' events and keys: session -> (events after, keys after),
        each session's events in version order, in one round trip where the
        database is remote. The keys are read after the events, so each event
        read comes with its keys, however many are saved meanwhile."""

    def used_ids(self, session_id: str, keys: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
        """Those of the (kind, key) pairs the session's index holds."""

    def forks_of(self, session_ids: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        """For each of these sessions that has forks, (fork id, the version it copied)
        of the sessions forked from it; one query however many are asked about."""

    def create_id_index(self, backfill: Callable[[StoredEvent], list[IdRow]]) -> int:
        """Creates the index if missing, filled from the stored events; rows backfilled."""

    def create_key_table(self) -> None:
        """Creates the idempotency key table if missing (services.adapters.idempotency_keys)."""

    def earlier_append(
        self, session_id: str, key: str, ttl_seconds: float
    ) -> tuple[str, int] | None:
        """(fingerprint, version) of the session's write with this key, if younger than the TTL."""

    def expire_keys(self, ttl_seconds: float) -> int:
        """Deletes the keys older than the TTL; answers how many."""

    def latest_notification_id(self) -> int | None:
        """The highest notification id committed, by any server: at or beyond every
        save that has been answered (a reader may have to stop below it)."""

    def notifications_between(self, after: int, upto: int) -> int:
        """How many events are stored after position ``after`` up to ``upto``."""


class StoredIds:
    """The domain's IdLookup for one session, answered by the recorder's index."""

    def __init__(self, recorder: IndexingRecorder, session_id: str) -> None:
        self._recorder = recorder
        self._session_id = session_id

    def used(self, entry_ids: Collection[str], call_ids: Collection[str]) -> UsedIds:
        asked = [(ENTRY, i) for i in entry_ids] + [(TOOL_CALL, i) for i in call_ids]
        found = self._recorder.used_ids(self._session_id, asked)
        return UsedIds(
            frozenset(key for kind, key in found if kind == ENTRY),
            frozenset(key for kind, key in found if kind == TOOL_CALL),
        )
