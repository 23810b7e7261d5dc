"""Translation of sessions, their settings, erasures and system prompts between the
v1 protobuf messages and the domain's values."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from google.protobuf.message import Message

from domain.session import Session
from domain.session_events import EntriesErased, SessionErased
from domain.settings import CompactionPolicy, SessionSettings
from domain.system_prompt import (
    FileStatus,
    InjectedFile,
    PartTokens,
    Skill,
    SystemPrompt,
    Tool,
)
from projections.session_history import RecordedErasure
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.grpc.mapping_entries import to_timestamp, usage_to_pb

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


def _values(policy: Any) -> dict[str, Any]:
    """A policy's fields by name. Not dataclasses.asdict, which deep-copies every
    value: it made this mapping some 160 µs of every session shown (policies are
    flat and frozen, so their values need no copy)."""
    return {f.name: getattr(policy, f.name) for f in dataclasses.fields(policy)}


# The messages of the settings shown last, by the settings' identity: a session's
# settings object lives as long as its aggregate, and is shown on every GetSession
# and listing, where building its message took some 60 us. Holding the settings
# keeps their id from being reused while they are held.
_SHOWN: dict[int, tuple[SessionSettings, int, pb.SessionSettings]] = {}
_SHOWN_MAX = 1_024


def settings_to_pb(settings: SessionSettings, context_window_tokens: int) -> pb.SessionSettings:
    """The settings, showing the window in force whatever its source. Shared between
    calls: copy it (as a message field given to a constructor is), never change it."""
    shown = _SHOWN.get(id(settings))
    if shown is not None and shown[0] is settings and shown[1] == context_window_tokens:
        return shown[2]
    message = _settings_message(settings, context_window_tokens)
    if len(_SHOWN) >= _SHOWN_MAX:
        _SHOWN.clear()
    _SHOWN[id(settings)] = (settings, context_window_tokens, message)
    return message


def _settings_message(settings: SessionSettings, context_window_tokens: int) -> pb.SessionSettings:
    pruning = _values(settings.pruning)
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
        window_guard=pb.WindowGuardPolicy(**_values(settings.window_guard)),
        tool_result_guard=pb.ToolResultGuardPolicy(**_values(settings.tool_result_guard)),
        max_system_file_chars=settings.max_system_file_chars,
        memory=pb.MemoryPolicy(**_values(settings.memory)),
    )


def _compaction_policy_to_pb(policy: CompactionPolicy) -> pb.CompactionPolicy:
    fields = _values(policy)
    steps = fields.pop("summarizers")
    return pb.CompactionPolicy(**fields, summarizers=pb.SummarizerChain(steps=steps))


def session_to_pb(session: Session) -> pb.Session:
    return pb.Session(
        id=session.id,
        version=session.version,
        # The window in force, as views and the context report show it: a smaller one
        # an overflow taught, not the resolved one it supersedes.
        settings=settings_to_pb(session.settings, session.window_tokens),
        context_window_source=session.window_source,
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


def erasure_event_to_pb(event: EntriesErased | SessionErased) -> pb.Erasure:
    return erasure_to_pb(RecordedErasure.of(event))


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
