"""The stored topics each audit reads, so its runner skips every other event."""

from __future__ import annotations

from eventsourcing.domain import get_topic

from domain.session import Session

COMPACTION_TOPICS = [
    get_topic(Session.CompactionRecorded),
    get_topic(Session.CompactionFailed),
    # An erasure taints the summaries it reached (services.adapters.read_model_store).
    get_topic(Session.EntriesErased),
    get_topic(Session.SessionErased),
    get_topic(Session.CompactionUndone),
    get_topic(Session.CompactionRedone),
]
PRUNE_TOPICS = [get_topic(Session.PruneRecorded)]
