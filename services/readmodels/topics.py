"""The stored topics each audit reads, so its runner skips every other event."""

from __future__ import annotations

from eventsourcing.domain import get_topic

from domain.compaction_events import (
    CompactionFailed,
    CompactionRecorded,
    CompactionRedone,
    CompactionUndone,
)
from domain.session_events import EntriesErased, PruneRecorded, SessionErased

COMPACTION_TOPICS = [
    get_topic(CompactionRecorded),
    get_topic(CompactionFailed),
    # An erasure taints the summaries it reached (services.adapters.read_model_store).
    get_topic(EntriesErased),
    get_topic(SessionErased),
    get_topic(CompactionUndone),
    get_topic(CompactionRedone),
]
PRUNE_TOPICS = [get_topic(PruneRecorded)]
