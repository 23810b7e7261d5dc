"""Translation between the v1 protobuf messages and the domain's values.

Only shape is translated here; what is allowed is the domain's business.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, assert_never

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from domain.compaction import Compaction, CompactionFailure, Trigger
from domain.content import (
    Block,
    Entry,
    ImageRef,
    PromptRef,
    ProviderItem,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    Usage,
)
from domain.context.calibration import TokenLesson
from domain.context.tool_result_guard import ToolResultDecision
from domain.context.window_guard import WindowVerdict
from domain.erasure import is_erased
from domain.errors import InvalidRequest
from domain.pruning import PruneAction, PruneDecision
from domain.session import Session, SessionEvent
from domain.settings import CompactionPolicy, SessionSettings
from domain.system_prompt import (
    FileStatus,
    InjectedFile,
    PartTokens,
    Skill,
    SystemPrompt,
    Tool,
)
from projections.session_history import DurableLog, RecordedCompaction, RecordedErasure
from projections.view_audit import ViewAudit
from proto.sessionstore.v1 import session_store_pb2 as pb

_ROLES = {
    pb.ROLE_USER: Role.USER,
    pb.ROLE_ASSISTANT: Role.ASSISTANT,
    pb.ROLE_TOOL: Role.TOOL,
    pb.ROLE_SYSTEM: Role.SYSTEM,
    pb.ROLE_CUSTOM: Role.CUSTOM,
}
_ROLE_NUMBERS = {role: number for number, role in _ROLES.items()}
_ACTIONS = {
    pb.PRUNE_ACTION_SOFT_TRIM: PruneAction.SOFT_TRIM,
    pb.PRUNE_ACTION_HARD_CLEAR: PruneAction.HARD_CLEAR,
}
_ACTION_NUMBERS = {action: number for number, action in _ACTIONS.items()}
_FORMATS = {
    pb.PROMPT_FORMAT_UNSPECIFIED: "openai",
    pb.PROMPT_FORMAT_OPENAI: "openai",
    pb.PROMPT_FORMAT_ANTHROPIC: "anthropic",
    pb.PROMPT_FORMAT_OPENAI_RESPONSES: "openai-responses",
    pb.PROMPT_FORMAT_GEMINI: "gemini",
}
_FORMAT_NUMBERS = {name: number for number, name in _FORMATS.items() if number}


def _unknown(field: str, value: int, enum: Any, allowed: Any) -> InvalidRequest:
    names = ", ".join(enum.Name(number) for number in allowed)
    return InvalidRequest(f"{field} {value} is not a value this server knows; use one of {names}")


def prompt_format(value: pb.PromptFormat.ValueType) -> str:
    return _known_format(value, "format")


def _known_format(value: pb.PromptFormat.ValueType, field: str) -> str:
    if value not in _FORMATS:
        raise _unknown(field, value, pb.PromptFormat, _FORMATS)
    return _FORMATS[value]


def format_to_pb(provider_format: str) -> pb.PromptFormat.ValueType:
    return _FORMAT_NUMBERS.get(provider_format, pb.PROMPT_FORMAT_OPENAI)


# -- time ---------------------------------------------------------------------------


def to_datetime(timestamp: Timestamp, field: str = "timestamp") -> datetime:
    try:
        return timestamp.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError):
        raise InvalidRequest(
            f"{field} (seconds={timestamp.seconds}, nanos={timestamp.nanos}) is not a valid "
            "time; use 0001-01-01 to 9999-12-31 with nanos in 0..999,999,999"
        ) from None


def to_timestamp(moment: datetime) -> Timestamp:
    timestamp = Timestamp()
    timestamp.FromDatetime(moment)
    return timestamp


# -- entries ------------------------------------------------------------------------


def entry_from_pb(message: pb.Entry, index: int) -> Entry:
    if message.role == pb.ROLE_UNSPECIFIED:
        raise InvalidRequest(
            f"entries[{index}]: role is missing; set ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL, "
            "ROLE_SYSTEM or ROLE_CUSTOM"
        )
    if message.role not in _ROLES:
        raise _unknown(f"entries[{index}].role", message.role, pb.Role, _ROLES)
    return Entry(
        id=message.id,
        parent_id=message.parent_id or None,
        timestamp=to_datetime(message.timestamp, f"entries[{index}].timestamp")
        if message.HasField("timestamp")
        else None,
        role=_ROLES[message.role],
        content=tuple(_block_from_pb(b, index, i) for i, b in enumerate(message.content)),
        usage=_usage_from_pb(message.usage) if message.HasField("usage") else None,
        custom_type=message.custom_type,
        metadata=MappingProxyType(dict(message.metadata)),
        prompt_ref=_prompt_ref_from_pb(message.prompt_ref, index)
        if message.HasField("prompt_ref")
        else None,
    )


def _prompt_ref_from_pb(ref: pb.PromptRef, index: int) -> PromptRef:
    field = f"entries[{index}].prompt_ref.format"
    return PromptRef(ref.version, _known_format(ref.format, field), ref.hash)


def _block_from_pb(block: pb.ContentBlock, entry_index: int, index: int) -> Block:
    kind = block.WhichOneof("block")
    if kind == "text":
        return TextBlock(block.text.text)
    if kind == "thinking":
        return ThinkingBlock(block.thinking.thinking, block.thinking.signature)
    if kind == "tool_call":
        call = block.tool_call
        return ToolCall(call.id, call.name, call.arguments_json or "{}")
    if kind == "tool_result":
        result = block.tool_result
        return ToolResult(result.tool_call_id, result.content, result.is_error)
    if kind == "image":
        return ImageRef(block.image.uri, block.image.media_type)
    if kind == "provider_item":
        return provider_item_from_pb(block.provider_item)
    raise InvalidRequest(f"entries[{entry_index}].content[{index}] is empty; set one block kind")


def provider_item_from_pb(item: pb.ProviderItem) -> ProviderItem:
    return ProviderItem(item.provider, item.type, item.json)


def provider_item_to_pb(item: ProviderItem) -> pb.ProviderItem:
    return pb.ProviderItem(provider=item.provider, type=item.type, json=item.json)


def _usage_from_pb(usage: pb.Usage) -> Usage:
    return Usage(
        usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens
    )


def usage_to_pb(usage: Usage) -> pb.Usage:
    return pb.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )


def entry_to_pb(entry: Entry, version: int = 0) -> pb.Entry:
    message = pb.Entry(
        id=entry.id,
        parent_id=entry.parent_id or "",
        role=_ROLE_NUMBERS[entry.role],
        content=[_block_to_pb(b) for b in entry.content],
        custom_type=entry.custom_type,
        metadata=dict(entry.metadata),
        token_count=entry.token_count,
        tokenizer=entry.tokenizer,
        version=version,
    )
    if entry.timestamp:
        message.timestamp.CopyFrom(to_timestamp(entry.timestamp))
    if entry.usage is not None:
        message.usage.CopyFrom(usage_to_pb(entry.usage))
    if entry.prompt_ref is not None:
        ref = entry.prompt_ref
        message.prompt_ref.CopyFrom(
            pb.PromptRef(version=ref.version, format=format_to_pb(ref.format), hash=ref.hash)
        )
    return message


def _block_to_pb(block: Block) -> pb.ContentBlock:
    match block:
        case TextBlock(text=text):
            return pb.ContentBlock(text=pb.TextBlock(text=text))
        case ThinkingBlock(thinking=thinking, signature=signature):
            return pb.ContentBlock(
                thinking=pb.ThinkingBlock(thinking=thinking, signature=signature)
            )
        case ToolCall(id=call_id, name=name, arguments_json=arguments):
            return pb.ContentBlock(
                tool_call=pb.ToolCallBlock(id=call_id, name=name, arguments_json=arguments)
            )
        case ToolResult(tool_call_id=call_id, content=content, is_error=is_error):
            return pb.ContentBlock(
                tool_result=pb.ToolResultBlock(
                    tool_call_id=call_id, content=content, is_error=is_error
                )
            )
        case ImageRef(uri=uri, media_type=media_type):
            return pb.ContentBlock(image=pb.ImageBlock(uri=uri, media_type=media_type))
        case ProviderItem():
            return pb.ContentBlock(provider_item=provider_item_to_pb(block))
    raise TypeError(f"not a content block: {block!r}")


# -- settings -----------------------------------------------------------------------


def _set_fields(message: Message) -> dict[str, Any]:
    return {field.name: value for field, value in message.ListFields()}


_POLICY_FIELDS = ("pruning", "compaction", "window_guard", "tool_result_guard", "memory")


def settings_from_pb(
    message: pb.SessionSettings, base: SessionSettings, remove_labels: Sequence[str] = ()
) -> SessionSettings:
    """``base`` with the fields the message sets (unset fields keep base's value), less the
    labels named in ``remove_labels``."""
    changes = {
        k: v for k, v in _set_fields(message).items() if k != "labels" and k not in _POLICY_FIELDS
    }
    labels = dict(message.labels) if message.labels else dict(base.labels)
    for key in remove_labels:
        labels.pop(key, None)
    if labels != base.labels:
        changes["labels"] = MappingProxyType(labels)
    for name in _POLICY_FIELDS:
        if message.HasField(name):  # type: ignore[arg-type]
            changes[name] = _policy_from_pb(getattr(message, name), getattr(base, name))
    return dataclasses.replace(base, **changes)


def _policy_from_pb(message: Message, base: Any) -> Any:
    fields = _set_fields(message)
    tools = fields.pop("tools", None)
    if tools is not None:  # the pruning policy's tool filter, set as a whole
        fields["allow_tools"], fields["deny_tools"] = tuple(tools.allow), tuple(tools.deny)
    chain = fields.pop("summarizers", None)
    if chain is not None:  # the compaction policy's summariser chain, set as a whole
        fields["summarizers"] = tuple(step.strip() for step in chain.steps)
    return dataclasses.replace(base, **fields)


def settings_to_pb(settings: SessionSettings, context_window_tokens: int) -> pb.SessionSettings:
    """The settings, showing the window in force whatever its source."""
    pruning = dataclasses.asdict(settings.pruning)
    tools = pb.ToolFilter(allow=pruning.pop("allow_tools"), deny=pruning.pop("deny_tools"))
    return pb.SessionSettings(
        model=settings.model,
        context_window_tokens=context_window_tokens,
        max_entry_bytes=settings.max_entry_bytes,
        title=settings.title,
        labels=dict(settings.labels),
        pruning=pb.PruningPolicy(**pruning, tools=tools),
        compaction=_compaction_policy_to_pb(settings.compaction),
        engine=settings.engine,
        window_guard=pb.WindowGuardPolicy(**dataclasses.asdict(settings.window_guard)),
        tool_result_guard=pb.ToolResultGuardPolicy(
            **dataclasses.asdict(settings.tool_result_guard)
        ),
        max_system_file_chars=settings.max_system_file_chars,
        memory=pb.MemoryPolicy(**dataclasses.asdict(settings.memory)),
    )


def _compaction_policy_to_pb(policy: CompactionPolicy) -> pb.CompactionPolicy:
    fields = dataclasses.asdict(policy)
    steps = fields.pop("summarizers")
    return pb.CompactionPolicy(**fields, summarizers=pb.SummarizerChain(steps=steps))


def session_to_pb(session: Session) -> pb.Session:
    return pb.Session(
        id=session.id,
        version=session.version,
        settings=settings_to_pb(session.settings, session.context_window_tokens),
        context_window_source=session.context_window_source,
        created_at=to_timestamp(session.created_on),
        updated_at=to_timestamp(session.modified_on),
        entry_count=session.entry_count,
        total_tokens=session.total_tokens,
        compaction_count=session.compaction_count,
        total_usage=usage_to_pb(session.usage),
        last_entry_id=session.last_entry_id or "",
        open_tool_call_ids=list(session.open_tool_calls),
        parent_session_id=session.parent_session_id,
        forked_at_version=session.forked_at_version,
        erased=(
            pb.Erasure(
                erased_by=session.erasure[0],
                reason=session.erasure[1],
                version=session.erasure[2],
                whole_session=True,
            )
            if session.erasure
            else None
        ),
    )


def erasure_to_pb(erasure: RecordedErasure) -> pb.Erasure:
    return pb.Erasure(
        entry_ids=list(erasure.entry_ids),
        tainted_compaction_versions=list(erasure.tainted_compactions),
        erased_by=erasure.erased_by,
        reason=erasure.reason,
        version=erasure.version,
        erased_at=to_timestamp(erasure.timestamp),
        whole_session=erasure.whole_session,
        erased_with=erasure.erased_with,
    )


def erasure_event_to_pb(event: Session.EntriesErased | Session.SessionErased) -> pb.Erasure:
    if isinstance(event, Session.EntriesErased):
        ids, tainted = list(event.entry_ids), list(event.tainted_compactions)
    else:
        ids, tainted = [], []
    return erasure_to_pb(
        RecordedErasure(
            ids,
            tainted,
            event.erased_by,
            event.reason,
            event.originator_version,
            event.timestamp,
            event.erased_with,
        )
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
    )


def compaction_to_pb(compaction: Compaction, version: int, timestamp: datetime) -> pb.Compaction:
    # The receipt's fields carry the same names in both.
    receipt = compaction.to_dict()
    receipt["details"] = dict(compaction.details)
    receipt["attempts"] = [pb.SummarizerAttempt(**a) for a in receipt["attempts"]]
    item = compaction.provider_item
    receipt["provider_item"] = None if item is None else provider_item_to_pb(item)
    return pb.Compaction(
        **receipt,
        version=version,
        timestamp=to_timestamp(timestamp),
        tainted=is_erased(compaction.details),
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
    return pb.TokenLesson(**lesson.to_dict())


def window_verdict_to_pb(verdict: WindowVerdict) -> pb.WindowGuardState:
    return pb.WindowGuardState(**verdict.to_dict())


# -- the system prompt --------------------------------------------------------------


def system_prompt_from_pb(message: pb.SystemPrompt) -> SystemPrompt:
    """The prompt as sent; the session cuts its files and counts its tokens."""
    return SystemPrompt(
        text=message.text,
        files=tuple(
            InjectedFile(f.path, "", 0, FileStatus.MISSING)
            if f.missing
            else InjectedFile(f.path, f.content, len(f.content), FileStatus.OK)
            for f in message.files
        ),
        skills=tuple(Skill(s.name, s.description) for s in message.skills),
        tools=tuple(Tool(t.name, t.description, t.parameters_json or "{}") for t in message.tools),
    )


_FILE_STATUSES = {
    FileStatus.OK: pb.FILE_STATUS_OK,
    FileStatus.TRUNCATED: pb.FILE_STATUS_TRUNCATED,
    FileStatus.MISSING: pb.FILE_STATUS_MISSING,
}


def file_status_to_pb(status: FileStatus) -> pb.FileStatus.ValueType:
    return _FILE_STATUSES[status]


def system_prompt_tokens_to_pb(tokens: PartTokens) -> pb.SystemPromptTokens:
    return pb.SystemPromptTokens(
        text=tokens.text,
        files=tokens.files,
        skills=tokens.skills,
        tool_list=tokens.tool_list,
        tool_schemas=tokens.tool_schemas,
        total=tokens.total,
        tokenizer=tokens.tokenizer,
    )


def system_prompt_to_pb(prompt: SystemPrompt) -> pb.SystemPrompt:
    return pb.SystemPrompt(
        text=prompt.text,
        files=[
            pb.InjectedFile(
                path=f.path,
                content=f.content,
                missing=f.status is FileStatus.MISSING,
                raw_chars=f.raw_chars,
                injected_chars=f.injected_chars,
                status=file_status_to_pb(f.status),
            )
            for f in prompt.files
        ],
        skills=[pb.Skill(name=s.name, description=s.description) for s in prompt.skills],
        tools=[
            pb.Tool(name=t.name, description=t.description, parameters_json=t.parameters_json)
            for t in prompt.tools
        ],
        tokens=system_prompt_tokens_to_pb(prompt.tokens),
    )


def recorded_compaction_to_pb(recorded: RecordedCompaction) -> pb.Compaction:
    return compaction_to_pb(recorded.compaction, recorded.version, recorded.timestamp)


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
    end = len(log.entries) if not page_size else min(len(log.entries), offset + page_size)
    room = max_bytes - message.ByteSize() if max_bytes else None
    entries: list[pb.Entry] = []
    position = offset
    while position < end:
        entry = entry_to_pb(log.entries[position], log.entry_versions[position])
        if room is not None:
            room -= entry.ByteSize() + _ELEMENT_OVERHEAD_BYTES
            if room < 0 and entries:
                break
        entries.append(entry)
        position += 1
    message.entries.extend(entries)
    return message, (position if position < len(log.entries) else None)


def compaction_undone_to_pb(event: Session.CompactionUndone) -> pb.CompactionUndone:
    return pb.CompactionUndone(
        compaction_version=event.compaction_version,
        reason=event.reason,
        requested_by=event.requested_by,
        restored_compaction_version=event.restored_compaction_version,
        first_kept_position=event.first_kept_position,
        prompt_tokens=event.prompt_tokens,
    )


def compaction_redone_to_pb(event: Session.CompactionRedone) -> pb.CompactionRedone:
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
        case Session.Started():
            message.started.settings.CopyFrom(
                settings_to_pb(event.settings, event.context_window_tokens)
            )
            message.started.parent_session_id = event.parent_session_id
            message.started.forked_at_version = event.forked_at_version
        case Session.ToolCallsAbandoned():
            message.tool_calls_abandoned.CopyFrom(
                pb.ToolCallsAbandoned(
                    tool_call_ids=list(event.tool_call_ids),
                    reason=event.reason,
                    entry=entry_to_pb(event.entry, version),
                )
            )
        case Session.EntriesAppended():
            message.entries_appended.entries.extend(entry_to_pb(e, version) for e in event.entries)
            message.entries_appended.idempotency_key = event.idempotency_key
            message.entries_appended.guarded.extend(guard_decision_to_pb(d) for d in event.guarded)
            message.entries_appended.lessons.extend(
                token_lesson_to_pb(lesson) for lesson in event.lessons or ()
            )
        case Session.CompactionRecorded():
            message.compaction_recorded.CopyFrom(
                compaction_to_pb(event.compaction, version, event.timestamp)
            )
        case Session.PruneRecorded():
            message.prune_recorded.entries.extend(prune_decision_to_pb(d) for d in event.decisions)
            message.prune_recorded.reason = event.reason
            message.prune_recorded.applied_edits_json = event.applied_edits_json
        case Session.SettingsChanged():
            message.settings_changed.settings.CopyFrom(
                settings_to_pb(event.settings, event.context_window_tokens)
            )
        case Session.CompactionFailed():
            message.compaction_failed.CopyFrom(
                failure_to_pb(event.failure, version, event.timestamp)
            )
        case Session.OverflowReported():
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
                )
            )
        case Session.SystemPromptSet():
            message.system_prompt_set.CopyFrom(system_prompt_to_pb(event.system_prompt))
        case Session.CompactionUndone():
            message.compaction_undone.CopyFrom(compaction_undone_to_pb(event))
        case Session.EntriesErased() | Session.SessionErased():
            message.erasure.CopyFrom(erasure_event_to_pb(event))
        case Session.CompactionRedone():
            message.compaction_redone.CopyFrom(compaction_redone_to_pb(event))
        case Session.EntryRetracted():
            message.entry_retracted.CopyFrom(
                pb.EntryRetracted(entry_id=event.entry_id, reason=event.reason)
            )
        case Session.SessionCleared():
            message.session_cleared.CopyFrom(
                pb.SessionCleared(entries_cleared=event.entries, reason=event.reason)
            )
        case _:
            assert_never(event)
    return message


def view_audit_to_pb(audit: ViewAudit) -> pb.ViewAudit:
    return pb.ViewAudit(
        session_id=audit.session_id,
        version=audit.version,
        entries=[
            pb.EntryStatus(
                entry_id=e.entry_id,
                role=e.role,
                version=e.version,
                status=e.status,
                detail=e.detail,
            )
            for e in audit.entries
        ],
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
