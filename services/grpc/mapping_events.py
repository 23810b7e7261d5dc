"""Translation of compactions, prunes, the durable log and view audits (both paged to
fit a message) and events between the v1 protobuf messages and the domain's values."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from types import MappingProxyType
from typing import Any, assert_never

from google.protobuf.message import Message

from domain.compaction import Compaction, CompactionFailure, Trigger
from domain.compaction_events import (
    CompactionFailed,
    CompactionRecorded,
    CompactionRedone,
    CompactionUndone,
)
from domain.context.calibration import LearnedLimits, TokenLesson
from domain.context.tool_result_guard import ToolResultDecision
from domain.context.window_guard import WindowVerdict
from domain.erasure import is_erased
from domain.errors import InvalidRequest
from domain.pruning import PruneDecision
from domain.session import SessionEvent
from domain.session_events import (
    EntriesAppended,
    EntriesErased,
    EntryRetracted,
    LearnedLimitsForgotten,
    OverflowReported,
    PruneRecorded,
    SessionCleared,
    SessionErased,
    SettingsChanged,
    Started,
    SystemPromptSet,
    ToolCallsAbandoned,
)
from projections.session_history import DurableLog, RecordedCompaction
from projections.view_audit import ViewAudit
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.grpc.mapping_entries import (
    _ACTION_NUMBERS,
    _ACTIONS,
    _unknown,
    entry_to_pb,
    format_to_pb,
    provider_item_from_pb,
    provider_item_to_pb,
    to_timestamp,
)
from services.grpc.mapping_sessions import (
    erasure_event_to_pb,
    erasure_to_pb,
    settings_to_pb,
    system_prompt_to_pb,
)

# -- compactions and prunes ---------------------------------------------------------


def compaction_from_pb(request: pb.RecordCompactionRequest) -> Compaction:
    item = (
        provider_item_from_pb(request.provider_item) if request.HasField("provider_item") else None
    )
    return Compaction(
        summary=request.summary,
        first_kept_entry_id=request.first_kept_entry_id,
        tokens_before=request.tokens_before,
        tokens_after=request.tokens_after,
        reason=request.reason or (Trigger.PROVIDER if item is not None else Trigger.MANUAL),
        summarizer_model=request.summarizer_model,
        details=MappingProxyType(dict(request.details)),
        provider_item=item,
        provider_retained=tuple(map(provider_item_from_pb, request.provider_retained)),
    )


def compaction_to_pb(
    compaction: Compaction, version: int, timestamp: datetime, idempotency_key: str = ""
) -> pb.Compaction:
    """The receipt; ``idempotency_key``: the key of the Compact call that recorded it,
    kept with its event rather than in the receipt."""
    # The receipt's fields carry the same names in both.
    receipt = compaction.to_dict()
    receipt["details"] = dict(compaction.details)
    receipt["attempts"] = [pb.SummarizerAttempt(**a) for a in receipt["attempts"]]
    item = compaction.provider_item
    receipt["provider_item"] = None if item is None else provider_item_to_pb(item)
    receipt["provider_retained"] = list(map(provider_item_to_pb, compaction.provider_retained))
    # Shown in the prompt view beside the summary; the receipt's figures count them.
    receipt.pop("carried_blocks", None)
    return pb.Compaction(
        **receipt,
        version=version,
        timestamp=to_timestamp(timestamp),
        tainted=is_erased(compaction.details),
        idempotency_key=idempotency_key,
    )


def failure_to_pb(
    failure: CompactionFailure, version: int, timestamp: datetime
) -> pb.CompactionFailure:
    return pb.CompactionFailure(
        **failure.to_dict(), version=version, timestamp=to_timestamp(timestamp)
    )


def guard_decision_to_pb(decision: ToolResultDecision) -> pb.GuardDecision:
    fields = decision.to_dict()
    del fields["style"], fields["read_back_tool"]  # how the notice reads: in the text itself
    return pb.GuardDecision(**fields)


def token_lesson_to_pb(lesson: TokenLesson) -> pb.TokenLesson:
    fields = lesson.to_dict()
    # Lessons stored before lifts were recorded say none (their readers lift by the rule then).
    fields["lifted_window_tokens"] = lesson.lifted_window_tokens or 0
    return pb.TokenLesson(**fields)


def forgotten_limits_to_pb(event: LearnedLimitsForgotten) -> pb.LearnedLimitsForgotten:
    models = []
    for model, *row in event.forgotten:
        limits = LearnedLimits.from_list(row)
        models.append(
            pb.ForgottenLimits(
                model=model,
                window_tokens=limits.window_tokens,
                window_inferred=limits.window_inferred,
                output_tokens=limits.output_tokens,
                request_bytes=limits.request_bytes,
                calibration=limits.calibration or 0.0,
            )
        )
    return pb.LearnedLimitsForgotten(models=models)


def window_verdict_to_pb(verdict: WindowVerdict) -> pb.WindowGuardState:
    return pb.WindowGuardState(**verdict.to_dict())


def recorded_compaction_to_pb(recorded: RecordedCompaction) -> pb.Compaction:
    return compaction_to_pb(
        recorded.compaction, recorded.version, recorded.timestamp, recorded.idempotency_key
    )


def prune_decisions_from_pb(entries: list[pb.PrunedEntry]) -> list[PruneDecision]:
    decisions = []
    for index, entry in enumerate(entries):
        if entry.action == pb.PRUNE_ACTION_UNSPECIFIED:
            raise InvalidRequest(
                f"entries[{index}]: action is missing; set PRUNE_ACTION_SOFT_TRIM or "
                "PRUNE_ACTION_HARD_CLEAR"
            )
        if entry.action not in _ACTIONS:
            raise _unknown(f"entries[{index}].action", entry.action, pb.PruneAction, _ACTIONS)
        decisions.append(
            PruneDecision(
                entry.entry_id,
                _ACTIONS[entry.action],
                entry.head_chars if entry.HasField("head_chars") else None,
                entry.tail_chars if entry.HasField("tail_chars") else None,
            )
        )
    return decisions


def prune_decision_to_pb(decision: PruneDecision) -> pb.PrunedEntry:
    return pb.PrunedEntry(
        entry_id=decision.entry_id,
        action=_ACTION_NUMBERS[decision.action],
        head_chars=decision.head_chars,
        tail_chars=decision.tail_chars,
    )


# -- views and events ---------------------------------------------------------------


# What a repeated message field adds around each element: tag and length.
_ELEMENT_OVERHEAD_BYTES = 16


def durable_log_to_pb(
    log: DurableLog, offset: int = 0, page_size: int = 0, max_bytes: int = 0
) -> tuple[pb.DurableLog, int | None]:
    """A page of the log from entry ``offset`` on: at most ``page_size`` entries (0: no
    limit), in a message of at most ``max_bytes`` (0: no limit) unless a single entry is
    larger. Answers the message and the offset the next page starts at, if any."""
    message = pb.DurableLog(
        session_id=log.session_id,
        version=log.version,
        total_tokens=log.total_tokens,
        pinned=[entry_to_pb(e, v) for e, v in zip(log.pinned, log.pinned_versions, strict=True)],
        erasures=[erasure_to_pb(e) for e in log.erasures],
    )
    if log.compaction:
        message.compaction.CopyFrom(recorded_compaction_to_pb(log.compaction))
    return message, fill_page(
        message,
        message.entries,
        lambda i: entry_to_pb(log.entries[i], log.entry_versions[i]),
        range(offset, len(log.entries)),
        page_size,
        max_bytes,
    )


def fill_page(
    message: Message,
    field: Any,
    item_at: Callable[[int], Message],
    positions: range,
    page_size: int,
    max_bytes: int,
) -> int | None:
    """Adds to ``field`` of ``message`` the items at ``positions``, at most ``page_size``
    (0: no limit), while the message stays within ``max_bytes`` (0: no limit; one item
    goes in whatever its size). Answers the position the next page starts at, if any."""
    room = max_bytes - message.ByteSize() if max_bytes else None
    end = positions.stop if not page_size else min(positions.stop, positions.start + page_size)
    items: list[Message] = []
    position = positions.start
    while position < end:
        item = item_at(position)
        if room is not None:
            room -= item.ByteSize() + _ELEMENT_OVERHEAD_BYTES
            if room < 0 and items:
                break
        items.append(item)
        position += 1
    field.extend(items)
    return position if position < positions.stop else None


def compaction_undone_to_pb(event: CompactionUndone) -> pb.CompactionUndone:
    return pb.CompactionUndone(
        compaction_version=event.compaction_version,
        reason=event.reason,
        requested_by=event.requested_by,
        restored_compaction_version=event.restored_compaction_version,
        first_kept_position=event.first_kept_position,
        prompt_tokens=event.prompt_tokens,
    )


def compaction_redone_to_pb(event: CompactionRedone) -> pb.CompactionRedone:
    return pb.CompactionRedone(
        undo_version=event.undo_version,
        compaction_versions=list(event.compaction_versions),
        reason=event.reason,
        requested_by=event.requested_by,
        first_kept_position=event.first_kept_position,
        prompt_tokens=event.prompt_tokens,
    )


def event_to_pb(event: SessionEvent) -> pb.SessionEvent:
    message = pb.SessionEvent(
        session_id=event.originator_id,
        version=event.originator_version,
        timestamp=to_timestamp(event.timestamp),
    )
    version = event.originator_version
    match event:
        case Started():
            message.started.settings.CopyFrom(
                settings_to_pb(event.settings, event.context_window_tokens)
            )
            message.started.parent_session_id = event.parent_session_id
            message.started.forked_at_version = event.forked_at_version
        case ToolCallsAbandoned():
            message.tool_calls_abandoned.CopyFrom(
                pb.ToolCallsAbandoned(
                    tool_call_ids=list(event.tool_call_ids),
                    reason=event.reason,
                    entry=entry_to_pb(event.entry, version),
                )
            )
        case EntriesAppended():
            message.entries_appended.entries.extend(entry_to_pb(e, version) for e in event.entries)
            message.entries_appended.idempotency_key = event.idempotency_key
            message.entries_appended.guarded.extend(guard_decision_to_pb(d) for d in event.guarded)
            message.entries_appended.lessons.extend(
                token_lesson_to_pb(lesson) for lesson in event.lessons or ()
            )
        case CompactionRecorded():
            message.compaction_recorded.CopyFrom(
                compaction_to_pb(event.compaction, version, event.timestamp, event.idempotency_key)
            )
        case PruneRecorded():
            message.prune_recorded.entries.extend(prune_decision_to_pb(d) for d in event.decisions)
            message.prune_recorded.reason = event.reason
            message.prune_recorded.applied_edits_json = event.applied_edits_json
        case SettingsChanged():
            message.settings_changed.settings.CopyFrom(
                settings_to_pb(event.settings, event.context_window_tokens)
            )
        case CompactionFailed():
            message.compaction_failed.CopyFrom(
                failure_to_pb(event.failure, version, event.timestamp)
            )
        case OverflowReported():
            message.overflow_reported.CopyFrom(
                pb.OverflowReported(
                    provider=event.provider,
                    status_code=event.status_code,
                    message=event.message,
                    kind=event.kind,
                    view_version=event.view_version,
                    view_hash=event.view_hash,
                    learned_window_tokens=event.window.window_tokens if event.window else 0,
                    learned_output_tokens=event.window.output_tokens if event.window else 0,
                    lesson=token_lesson_to_pb(event.lesson) if event.lesson else None,
                    learned_request_bytes=(
                        event.byte_limit.request_bytes if event.byte_limit else 0
                    ),
                    request_bytes_sent=event.request_bytes_sent,
                )
            )
        case SystemPromptSet():
            message.system_prompt_set.CopyFrom(system_prompt_to_pb(event.system_prompt))
        case CompactionUndone():
            message.compaction_undone.CopyFrom(compaction_undone_to_pb(event))
        case EntriesErased() | SessionErased():
            message.erasure.CopyFrom(erasure_event_to_pb(event))
        case CompactionRedone():
            message.compaction_redone.CopyFrom(compaction_redone_to_pb(event))
        case EntryRetracted():
            message.entry_retracted.CopyFrom(
                pb.EntryRetracted(entry_id=event.entry_id, reason=event.reason)
            )
        case SessionCleared():
            message.session_cleared.CopyFrom(
                pb.SessionCleared(entries_cleared=event.entries, reason=event.reason)
            )
        case LearnedLimitsForgotten():
            message.learned_limits_forgotten.CopyFrom(forgotten_limits_to_pb(event))
        case _:
            assert_never(event)
    return message


def view_audit_to_pb(
    audit: ViewAudit, offset: int = 0, page_size: int = 0, max_bytes: int = 0
) -> tuple[pb.ViewAudit, int | None]:
    """A page of the audit from entry ``offset`` on, as durable_log_to_pb pages the log;
    the turns and erasures come with every page."""
    message = pb.ViewAudit(
        session_id=audit.session_id,
        version=audit.version,
        turns=[
            pb.TurnVerification(
                entry_id=t.entry_id,
                view_version=t.view_version,
                format=format_to_pb(t.provider_format),
                claimed_hash=t.claimed_hash,
                replayed_hash=t.replayed_hash,
                verified=t.verified,
            )
            for t in audit.turns
        ],
        erasures=[erasure_to_pb(e) for e in audit.erasures],
    )

    def status_at(position: int) -> pb.EntryStatus:
        e = audit.entries[position]
        return pb.EntryStatus(
            entry_id=e.entry_id, role=e.role, version=e.version, status=e.status, detail=e.detail
        )

    positions = range(offset, len(audit.entries))
    return message, fill_page(message, message.entries, status_at, positions, page_size, max_bytes)
