"""The in-memory recorder (``memory:``), with the id index kept beside the events."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.popo import POPOApplicationRecorder

from services.adapters.id_index import (
    FORK,
    EventsAndKeysInTwoReads,
    IdRow,
    IdTaken,
    OneWriterAtATime,
)
from services.adapters.idempotency_keys import KeyRow
from services.adapters.sealing import DataKeyRow, ShredRow, shred_matches


class MemoryEventRecorder(EventsAndKeysInTwoReads, OneWriterAtATime, POPOApplicationRecorder):
    """The library's in-memory recorder, refusing a second use of an id as the SQL ones do."""

    def __init__(self) -> None:
        super().__init__()
        self._ids: set[tuple[str, str, str]] = set()
        # parent -> [(fork id, version copied)]
        self._forks: dict[str, list[tuple[str, int]]] = {}
        # (session, key) -> (fingerprint, version, time.monotonic() when written)
        self._keys: dict[tuple[str, str], tuple[str, int, float]] = {}
        # session -> (version, kind, key id) -> data key
        self._data_keys: dict[str, dict[tuple[int, str, str], bytes]] = {}

    def insert_events(
        self,
        stored_events: Sequence[StoredEvent],
        *,
        ids: Sequence[IdRow] = (),
        keys: Sequence[KeyRow] = (),
        data_keys: Sequence[DataKeyRow] = (),
        shred: Sequence[ShredRow] = (),
        **kwargs: Any,
    ) -> Sequence[int] | None:
        with self._database_lock:  # re-entrant: the library takes it again inside
            used = [(s, kind, key) for s, kind, key, _ in ids]
            if len(set(used)) != len(used) or not self._ids.isdisjoint(used):
                raise IdTaken("an entry id or tool call id is already used")
            notification_ids = super().insert_events(stored_events, **kwargs)
            self._ids.update(used)
            for session_id, kind, key, version in ids:
                if kind == FORK:
                    self._forks.setdefault(session_id, []).append((key, version))
            now = time.monotonic()
            for session_id, key, fingerprint, version in keys:
                self._keys[session_id, key] = (fingerprint, version, now)
            for session_id, version, kind, key_id, data_key in data_keys:
                self._data_keys.setdefault(session_id, {})[version, kind, key_id] = data_key
            for session_id, version, kind, key_id in shred:
                held = self._data_keys.get(session_id, {})
                for name in list(held):
                    if shred_matches((session_id, version, kind, key_id), name):
                        del held[name]
            return notification_ids

    def create_data_key_table(self) -> None:
        pass

    def data_keys(self, session_id: str, after: int, upto: int | None) -> list[DataKeyRow]:
        with self._database_lock:
            held = dict(self._data_keys.get(session_id, {}))
        return [
            (session_id, v, kind, key_id, key)
            for (v, kind, key_id), key in held.items()
            if v > after and (upto is None or v <= upto)
        ]

    def create_key_table(self) -> None:
        pass

    def earlier_append(
        self, session_id: str, key: str, ttl_seconds: float
    ) -> tuple[str, int] | None:
        with self._database_lock:
            found = self._keys.get((session_id, key))
        if found is None or found[2] < time.monotonic() - ttl_seconds:
            return None
        return found[0], found[1]

    def expire_keys(self, ttl_seconds: float) -> int:
        cutoff = time.monotonic() - ttl_seconds
        with self._database_lock:
            old = [k for k, (_, _, written) in self._keys.items() if written < cutoff]
            for k in old:
                del self._keys[k]
        return len(old)

    def used_ids(self, session_id: str, keys: Collection[tuple[str, str]]) -> set[tuple[str, str]]:
        with self._database_lock:
            return {(kind, key) for kind, key in keys if (session_id, kind, key) in self._ids}

    def forks_of(self, session_ids: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        with self._database_lock:
            return {s: list(self._forks[s]) for s in session_ids if self._forks.get(s)}

    def create_id_index(self, backfill: Callable[[StoredEvent], list[IdRow]]) -> int:
        return 0  # nothing outlives the process, so there is nothing to fill in
