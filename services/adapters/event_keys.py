"""The data keys of the events being read and written, and the mapper that puts each
event under its session's key scope (services.adapters.sealing).

A read loads each session's keys once per version range (one query), never keeping
them past the read, so a key deleted by an erasure meanwhile is never used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from functools import partial
from typing import Any

from eventsourcing.domain import get_topic
from eventsourcing.persistence import (
    Mapper,
    MapperDeserialisationError,
    PersistenceError,
    StoredEvent,
)

from domain.errors import Unavailable
from domain.session import Session
from services.adapters.id_index import IndexingRecorder
from services.adapters.sealing import EVENT, SNAPSHOT, DataKeyRow, KeyRange, KeyScope, scoped

SNAPSHOT_TOPIC = get_topic(Session.Snapshot)

# The keys made for the events being saved: (session, version) -> (kind, key id) -> key.
keys_being_written: ContextVar[dict[tuple[str, int], dict[tuple[str, str], bytes]] | None] = (
    ContextVar("keys_being_written", default=None)
)


def keys_by_event(
    rows: Sequence[DataKeyRow],
) -> dict[tuple[str, int], dict[tuple[str, str], bytes]]:
    """Key rows made for a save, as keys_being_written holds them."""
    keys: dict[tuple[str, int], dict[tuple[str, str], bytes]] = {}
    for session_id, version, kind, key_id, key in rows:
        keys.setdefault((session_id, version), {})[kind, key_id] = key
    return keys


# The sessions whose keys the read under way loads, at most once per version range.
keys_being_read: ContextVar[dict[str, SessionKeys] | None] = ContextVar(
    "reading_keys", default=None
)


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
        loaded_after = self._loaded_after
        # missing(version) is None, tested here: this runs for every entry a read decodes.
        if loaded_after is None or version <= loaded_after:
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

    # What reads the keys of an event decoded outside a read (services.adapters.event_store).
    indexing: Callable[[], IndexingRecorder]

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        session_id, version = domain_event.originator_id, domain_event.originator_version
        keys = (keys_being_written.get() or {}).get((session_id, version), {})
        kind = SNAPSHOT if isinstance(domain_event, Session.Snapshot) else EVENT
        with scoped(KeyScope(session_id, version, keys=keys, own_kind=kind)):
            return super().to_stored_event(domain_event)

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        session_id = str(stored_event.originator_id)
        version = stored_event.originator_version
        readers = keys_being_read.get() or {}
        keys = readers.get(session_id) or SessionKeys(self.indexing(), session_id, version)
        scope = KeyScope(
            session_id,
            version,
            lookup=partial(keys.find, version),
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
