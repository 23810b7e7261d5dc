"""The in-memory recorder (``memory:``), with the id index kept beside the events."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.popo import POPOApplicationRecorder

from services.adapters.id_index import IdRow, IdTaken


class MemoryEventRecorder(POPOApplicationRecorder):
    """The library's in-memory recorder, refusing a second use of an id as the SQL ones do."""

    def __init__(self) -> None:
        super().__init__()
        self._ids: set[tuple[str, str, str]] = set()

    def insert_events(
        self, stored_events: Sequence[StoredEvent], *, ids: Sequence[IdRow] = (), **kwargs: Any
    ) -> Sequence[int] | None:
        with self._database_lock:  # re-entrant: the library takes it again inside
            keys = [(s, kind, key) for s, kind, key, _ in ids]
            if len(set(keys)) != len(keys) or not self._ids.isdisjoint(keys):
                raise IdTaken("an entry id or tool call id is already used")
            notification_ids = super().insert_events(stored_events, **kwargs)
            self._ids.update(keys)
            return notification_ids

    def used_ids(self, session_id: str, keys: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
        with self._database_lock:
            return {(kind, key) for kind, key in keys if (session_id, kind, key) in self._ids}

    def create_id_index(self, backfill: Callable[[StoredEvent], list[IdRow]]) -> int:
        return 0  # nothing outlives the process, so there is nothing to fill in
