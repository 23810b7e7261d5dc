"""Compact calls with an idempotency key: a retry answers the compaction the first
try recorded, and never pays for a second summary of what is already compacted.

A client whose deadline passed while the summariser worked cannot tell whether
the compaction was recorded; it sends the call again with the same key. The key
is recorded with the compaction, in the same transaction, among the session's
remembered keys and in the table that holds appends' keys
(services.app.idempotency), so a retry made after it landed, on any server, is
answered from it: looked up in the session as read from the store, before the
expected version is checked on that same read (a retry carries the version its
first try had). A retry that arrives while the first try still runs on this
server waits for it (within its own deadline), then looks again: the first
either recorded its compaction, which answers the retry, or wrote nothing, and
the retry compacts.

Tries on different servers are kept apart by the session's claim while a model
writes (services.adapters.summary_claims): a try that finds another server
summarising the session asks no model and is refused (CompactionRunningElsewhere,
ABORTED), and its retry, once that summary landed, is answered from it if it was
this call's. A try granted the claim looks for its key once more before it
asks a model (services.engine.layered): a first try that landed after this one
first looked, and let the claim go, answers it. Where no claim keeps two tries
apart (a chain without a model takes none; a claim goes with a lost
connection), both compact; whichever lands second is still answered as a
retry, never as a compaction of its own: recording looks the key up under the
session's write lock, on the latest version (a save that lost the race runs
again on a fresh copy), finds the first's and records nothing (the engine
raises CompactionReplayed through to the caller); and a try that found nothing
left to compact because the first had landed meanwhile looks for its key once
more.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from domain.compaction_events import CompactionRecorded
from services import deadline as call_deadline
from services.engine.base import CompactionOutcome

# How often a retry waiting for its first try looks whether its call was cut.
_POLL_SECONDS = 0.1


class CompactRetries:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (Session id, key) -> set when the try running with that key is done.
        self._running: dict[tuple[str, str], threading.Event] = {}

    @contextmanager
    def one_at_a_time(self, session_id: str, idempotency_key: str) -> Iterator[None]:
        """Runs the block as the only try with this key on this server: a retry that
        comes meanwhile waits for the running one to end, or for its own deadline."""
        key = (session_id, idempotency_key)
        while True:
            with self._lock:
                running = self._running.get(key)
                if running is None:
                    mine = self._running[key] = threading.Event()
                    break
            while not running.is_set():
                call_deadline.check("waiting for the Compact with this idempotency key to end")
                running.wait(call_deadline.bounded(_POLL_SECONDS))
        try:
            yield
        finally:
            with self._lock:
                del self._running[key]
            mine.set()


def replayed(recorded: CompactionRecorded) -> CompactionOutcome:
    """A retry's answer: the compaction its first try recorded, and what its receipt
    tells of the plan that made it."""
    compaction = recorded.compaction
    plan: dict[str, object] = {
        "first_kept_entry_id": compaction.first_kept_entry_id,
        "summarised": {
            "first_id": compaction.first_covered_entry_id,
            "last_id": compaction.last_covered_entry_id,
            "count": compaction.entries_covered,
        },
        "tokens_before": compaction.tokens_before,
        "estimated_tokens_after": compaction.tokens_after,
        "summarizer_model": compaction.summarizer_model,
        "reason": compaction.reason,
    }
    reason = (
        f"a retry: answered from the compaction this idempotency key recorded at version "
        f"{recorded.originator_version}; nothing was compacted again"
    )
    return CompactionOutcome(True, reason, plan, recorded, replayed=True)
