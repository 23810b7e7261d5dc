"""The idempotency keys of a session's appends and Compact calls, kept for a while
beside the events.

Rows ``(session_id, key, fingerprint, version)``, stamped with the time they
were written, go in the same transaction as the write they name, so a key is
taken exactly when its append (or compaction) is stored. A keyed call looks its
key up (one indexed query) to tell a retry from a new request, however many
writes came in between; rows older than the configured time are ignored and, now and
then, deleted. The aggregate keeps nothing of it, so it does not grow.
"""

from __future__ import annotations

from collections.abc import Iterable

from domain.compaction_events import CompactionRecorded
from domain.session_events import EntriesAppended

TABLE_SUFFIX = "_keys"

KeyRow = tuple[str, str, str, int]
"""(session id, idempotency key, request fingerprint, version of the keyed write)."""


def key_rows(events: Iterable[object]) -> list[KeyRow]:
    """The key rows for events about to be stored."""
    return [
        (event.originator_id, event.idempotency_key, event.fingerprint, event.originator_version)
        for event in events
        if isinstance(event, EntriesAppended | CompactionRecorded) and event.idempotency_key
    ]
