"""Idempotent appends and compactions: a retry with the same key answers the first
call's result (the append's entries, the Compact's recorded compaction).

The aggregate remembers its last few keys; any other key is looked up in the
store's key table (one indexed query), so a retry is recognised however many
appends came in between. Keys expire after the configured TTL.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from domain.compaction_events import CompactionRecorded
from domain.content import Entry
from domain.errors import IdempotencyKeyReused
from domain.session import Session, SessionEvent
from domain.session_events import EntriesAppended
from services.adapters.event_store import EventStore

# What a key may name: an append, or a compaction a Compact call recorded.
Keyed = TypeVar("Keyed", EntriesAppended, CompactionRecorded)
_KINDS: dict[type, str] = {EntriesAppended: "append", CompactionRecorded: "compaction"}
# A Compact's fingerprint begins with this: never equal to an append's (bare hex).
COMPACT_PRINT_PREFIX = "compact:"


@dataclass(frozen=True)
class AppendResult:
    version: int
    entries: Sequence[Entry]
    replayed: bool = False


class Idempotency:
    def __init__(self, store: EventStore, ttl_seconds: float) -> None:
        self.store = store
        self.ttl_seconds = ttl_seconds

    def earlier_append(
        self, session: Session, idempotency_key: str, fingerprint: str
    ) -> AppendResult | None:
        """The first result, if this append retries one made within the idempotency TTL."""
        event = self._earlier(session, idempotency_key, fingerprint, EntriesAppended)
        if event is None:
            return None
        return AppendResult(event.originator_version, list(event.entries), replayed=True)

    def earlier_compaction(
        self, session: Session, idempotency_key: str, fingerprint: str
    ) -> CompactionRecorded | None:
        """The compaction recorded, if this Compact retries one made within the TTL."""
        return self._earlier(session, idempotency_key, fingerprint, CompactionRecorded)

    def _earlier(
        self, session: Session, idempotency_key: str, fingerprint: str, kind: type[Keyed]
    ) -> Keyed | None:
        """The event the key recorded, if this request retries it; refused if the key
        was used for another request (of this kind or the other: a session's keys
        name one write each, as they share one table)."""
        if not idempotency_key:
            return None
        ttl = self.ttl_seconds
        event: SessionEvent | None = None
        remembered = session.recent_appends.get(idempotency_key)
        if remembered is not None:
            first_fingerprint, version = str(remembered[0]), int(remembered[1])
            event = self._event_at(session.id, version)
            if event.timestamp < datetime.now(UTC) - timedelta(seconds=ttl):
                return None  # the key has expired: free for a new write
        else:
            found = self.store.earlier_append(session.id, idempotency_key, ttl)
            if found is None:
                return None
            first_fingerprint, version = found
        if first_fingerprint != fingerprint:
            first = _KINDS.get(type(event or self._event_at(session.id, version)), "append")
            raise IdempotencyKeyReused.of(idempotency_key, version, first, _KINDS[kind])
        event = event or self._event_at(session.id, version)
        assert isinstance(event, kind)  # fingerprints of the two kinds never match
        return event

    def expire(self) -> int:
        """Deletes the idempotency keys older than the TTL; answers how many."""
        return self.store.expire_idempotency_keys(self.ttl_seconds)

    def _event_at(self, session_id: str, version: int) -> SessionEvent:
        (event,) = self.store.session_events(session_id, after=version - 1, upto=version)
        return event


def fingerprint(drafts: Sequence[Entry]) -> str:
    """What identifies an append's content, for its retries to be recognised."""
    # Sorted keys: metadata maps arrive in process-dependent order, and a retry
    # from another server, or after a restart, must hash the same.
    canonical = json.dumps([d.to_record() for d in drafts], separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def compact_fingerprint(instructions: str, force: bool) -> str:
    """What identifies a Compact request, for its retries to be recognised."""
    canonical = json.dumps({"instructions": instructions, "force": force}, sort_keys=True)
    return COMPACT_PRINT_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()
