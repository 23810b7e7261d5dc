"""The compaction and prune audits: one row per compaction (done or failed),
per undo of a compaction and per undo taken back, and one per pruned entry,
copied from the receipts the events carry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.compaction import Compaction, CompactionFailure
from domain.compaction_events import (
    CompactionFailed,
    CompactionRecorded,
    CompactionRedone,
    CompactionUndone,
)
from domain.pruning import PruneAction, PruneDecision
from domain.session_events import PruneRecorded
from projections.read_models.rows import CompactionRow, PruneRow

COMPACTION_EVENTS = (
    CompactionRecorded,
    CompactionFailed,
    CompactionUndone,
    CompactionRedone,
)
PRUNE_EVENTS = (PruneRecorded,)


def compaction_rows(event: Any) -> list[CompactionRow]:
    """The audit row of a recorded or failed compaction; none for other events."""
    head = (event.originator_id, event.originator_version, event.timestamp)
    if isinstance(event, CompactionRecorded):
        return [_done(*head, event.compaction, event.first_kept_position)]
    if isinstance(event, CompactionFailed):
        return [_failed(*head, event.failure)]
    if isinstance(event, CompactionUndone):
        return [
            CompactionRow(
                *head,
                trigger="undo",
                outcome="undone",
                reason=event.reason,
                first_kept_position=event.first_kept_position,
                tokens_after=event.prompt_tokens,
                compaction_version=event.compaction_version,
                restored_compaction_version=event.restored_compaction_version,
                requested_by=event.requested_by,
            )
        ]
    if isinstance(event, CompactionRedone):
        return [
            CompactionRow(
                *head,
                trigger="redo",
                outcome="redone",
                reason=event.reason,
                first_kept_position=event.first_kept_position,
                tokens_after=event.prompt_tokens,
                compaction_version=event.compaction_versions[-1],
                undo_version=event.undo_version,
                requested_by=event.requested_by,
            )
        ]
    return []


def _done(
    session_id: str, version: int, at: Any, receipt: Compaction, first_kept: int
) -> CompactionRow:
    return CompactionRow(
        session_id=session_id,
        version=version,
        recorded_at=at,
        trigger=receipt.reason,
        outcome="ok",
        reason=receipt.reason,
        summarizer_model=receipt.summarizer_model,
        first_kept_entry_id=receipt.first_kept_entry_id,
        first_kept_position=first_kept,
        first_covered_entry_id=receipt.first_covered_entry_id,
        last_covered_entry_id=receipt.last_covered_entry_id,
        entries_covered=receipt.entries_covered,
        tokens_before=receipt.tokens_before,
        tokens_after=receipt.tokens_after,
        tokens_before_source=receipt.tokens_before_source,
        tokens_after_source=receipt.tokens_after_source,
        summary_tokens=receipt.summary_tokens,
        prompt_hash=receipt.prompt_hash,
        chunks=receipt.chunks,
        fallback_stage=receipt.fallback_stage,
        attempt=receipt.attempt,
        duration_ms=receipt.duration_ms,
        engine=receipt.engine,
        instructions=receipt.instructions,
    )


def _failed(session_id: str, version: int, at: Any, failure: CompactionFailure) -> CompactionRow:
    return CompactionRow(
        session_id=session_id,
        version=version,
        recorded_at=at,
        trigger=failure.trigger,
        outcome="failed",
        stage=failure.stage,
        reason=failure.reason,
        summarizer_model=failure.summarizer_model,
        attempt=failure.attempt,
        duration_ms=failure.duration_ms,
    )


def prune_rows(event: Any) -> list[PruneRow]:
    """One row per pruned entry of a recorded prune; none for other events."""
    if not isinstance(event, PruneRecorded):
        return []
    rows = []
    # Events stored before the prune recorded its sizes: the most a decision keeps.
    sizes: list[Sequence[int | None]] = list(event.chars) or [
        [None, _at_most_kept(d)] for d in event.decisions
    ]
    for decision, (before, after) in zip(event.decisions, sizes, strict=True):
        rows.append(
            PruneRow(
                session_id=event.originator_id,
                version=event.originator_version,
                entry_id=decision.entry_id,
                recorded_at=event.timestamp,
                action=decision.action.value,
                head_chars=decision.head_chars,
                tail_chars=decision.tail_chars,
                chars_before=before,
                chars_after=after,
                reason=event.reason,
            )
        )
    return rows


def _at_most_kept(decision: PruneDecision) -> int:
    if decision.action is PruneAction.HARD_CLEAR:
        return 0
    return (decision.head_chars or 0) + (decision.tail_chars or 0)
