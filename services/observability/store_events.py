"""The store's own figures, read off the events each save records.

Registered as a listener of the session service's saves: every append,
compaction (the engine's or a client's), failure, prune and provider report
passes through it, whichever use case or background thread saved it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from domain.compaction import Trigger
from domain.compaction_events import CompactionFailed, CompactionRecorded
from domain.session import Session
from domain.session_events import (
    EntriesAppended,
    Event,
    OverflowReported,
    PruneRecorded,
    Started,
    ToolCallsAbandoned,
)
from services.observability.labels import BoundedLabels

if TYPE_CHECKING:
    # prometheus_client is imported only when metrics are on (services.observability.setup).
    from services.observability.metrics import Metrics

TRIGGERS = frozenset(t.value for t in Trigger)


class StoreEvents:
    def __init__(self, metrics: Metrics, models: BoundedLabels) -> None:
        self._metrics = metrics
        self._models = models
        self._tokenizers = BoundedLabels(20)

    def saved(self, _session: Session, events: Sequence[Event]) -> None:
        for event in _written(events):
            handle = getattr(self, f"_{type(event).__name__}", None)
            if handle is not None:
                handle(event)

    def _EntriesAppended(self, event: EntriesAppended) -> None:
        m = self._metrics
        m.appends.inc()
        for entry in event.entries:
            m.entries.labels(entry.role.value).inc()
            m.entry_bytes.inc(entry.content_bytes())
            m.entry_tokens.labels(self._tokenizers(entry.tokenizer)).inc(entry.token_count)
        for decision in event.guarded:
            m.tool_result_guard.labels(decision.action.value).inc()
        for lesson in event.lessons or ():
            m.calibration.labels(self._models(lesson.model)).observe(lesson.calibration)

    def _ToolCallsAbandoned(self, event: ToolCallsAbandoned) -> None:
        self._metrics.entries.labels(event.entry.role.value).inc()

    def _CompactionRecorded(self, event: CompactionRecorded) -> None:
        compaction = event.compaction
        trigger = _trigger(compaction.reason)
        stage = compaction.fallback_stage or "client"
        self._metrics.compactions.labels(trigger, "recorded", stage).inc()
        self._metrics.compaction_tokens_before.labels(trigger).observe(compaction.tokens_before)
        self._metrics.compaction_tokens_after.labels(trigger).observe(compaction.tokens_after)

    def _CompactionFailed(self, event: CompactionFailed) -> None:
        failure = event.failure
        self._metrics.compactions.labels(_trigger(failure.trigger), "failed", failure.stage).inc()

    def _OverflowReported(self, event: OverflowReported) -> None:
        if event.lesson is not None:
            model = self._models(event.lesson.model)
            self._metrics.calibration.labels(model).observe(event.lesson.calibration)

    def _PruneRecorded(self, event: PruneRecorded) -> None:
        self._metrics.prunes.inc()
        for decision in event.decisions:
            self._metrics.pruned_entries.labels(decision.action.value).inc()
        saved = sum(max(0, stored - kept) for stored, kept in event.chars)
        self._metrics.prune_chars_saved.inc(saved)


def _written(events: Sequence[Event]) -> Sequence[Event]:
    """The events a save wrote, less those a fork copied from its parent: the parent's
    appends, compactions and prunes were counted when the parent saved them."""
    first = events[0] if events else None
    if isinstance(first, Started) and first.forked_at_version:
        return [e for e in events if e.originator_version > first.forked_at_version]
    return events


def _trigger(reason: str) -> str:
    """The trigger; a client's own word for it counts as ``client``."""
    return reason if reason in TRIGGERS else Trigger.CLIENT.value
