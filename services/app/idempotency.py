"""Idempotent appends: a retry with the same key answers the first append's result.

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

from domain.content import Entry
from domain.errors import IdempotencyKeyReused
from domain.session import Session
from domain.session_events import EntriesAppended
from services.adapters.event_store import EventStore


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
        if not idempotency_key:
            return None
        ttl = self.ttl_seconds
        event: EntriesAppended | None = None
        remembered = session.recent_appends.get(idempotency_key)
        if remembered is not None:
            first_fingerprint, version = str(remembered[0]), int(remembered[1])
            event = self._appended(session.id, version)
            if event.timestamp < datetime.now(UTC) - timedelta(seconds=ttl):
                return None  # the key has expired: free for a new append
        else:
            found = self.store.earlier_append(session.id, idempotency_key, ttl)
            if found is None:
                return None
            first_fingerprint, version = found
        if first_fingerprint != fingerprint:
            raise IdempotencyKeyReused.of(idempotency_key, version)
        event = event or self._appended(session.id, version)
        return AppendResult(version, list(event.entries), replayed=True)

    def expire(self) -> int:
        """Deletes the idempotency keys older than the TTL; answers how many."""
        return self.store.expire_idempotency_keys(self.ttl_seconds)

    def _appended(self, session_id: str, version: int) -> EntriesAppended:
        (event,) = self.store.session_events(session_id, after=version - 1, upto=version)
        assert isinstance(event, EntriesAppended)
        return event


def fingerprint(drafts: Sequence[Entry]) -> str:
    """What identifies an append's content, for its retries to be recognised."""
    # Sorted keys: metadata maps arrive in process-dependent order, and a retry
    # from another server, or after a restart, must hash the same.
    canonical = json.dumps([d.to_record() for d in drafts], separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()
