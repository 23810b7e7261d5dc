"""The stored topics each audit reads, so its runner skips every other event."""

from __future__ import annotations

from eventsourcing.domain import get_topic

from domain.session import Session

COMPACTION_TOPICS = [
    get_topic(Session.CompactionRecorded),
    get_topic(Session.CompactionFailed),
    get_topic(Session.CompactionUndone),
    get_topic(Session.CompactionRedone),
]
PRUNE_TOPICS = [get_topic(Session.PruneRecorded)]
