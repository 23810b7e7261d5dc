"""The events of a session: every change to one is one of these, stored for good.

Each event's ``apply`` folds it into the aggregate's small state (see
domain.session_state). The events were first defined inside ``Session``, and
stored events name them so: each is still written under that topic
(``TOPIC``), and ``Session`` still names each class, so that the topic
resolves in any process and every stored session reads back as written.
Those of compactions are in domain.compaction_events; ``SessionEvent``, the
union of them all, is in domain.session.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from eventsourcing.domain import CanInitAggregate, CanMutateAggregate

from domain.content import Entry, Role
from domain.context.calibration import ByteLesson, TokenLesson, WindowLesson
from domain.context.shown import guard_savings
from domain.context.tool_result_guard import ToolResultDecision
from domain.pruning import PruneDecision
from domain.session_state import SessionState
from domain.settings import SessionSettings
from domain.streams import DEFAULT_TENANT
from domain.system_prompt import SystemPrompt


@dataclass(frozen=True)
class Event(CanMutateAggregate[str]):
    originator_id: str
    originator_version: int
    timestamp: datetime


@dataclass(frozen=True)
class Started(Event, CanInitAggregate[str]):
    TOPIC = "domain.session:Session.Started"

    originator_topic: str
    settings: SessionSettings
    context_window_tokens: int
    context_window_source: str
    # A fork names the session it was forked from and the parent's version it
    # copies (the fork's own history up to that version is the parent's).
    parent_session_id: str = ""
    forked_at_version: int = 0
    # Who owns the session; events stored before tenants existed load as DEFAULT_TENANT.
    tenant: str = DEFAULT_TENANT


@dataclass(frozen=True)
class EntriesAppended(Event):
    TOPIC = "domain.session:Session.EntriesAppended"

    entries: Sequence[Entry]
    idempotency_key: str = ""
    fingerprint: str = ""
    # How the tool-result guard shows the results it did not keep whole, decided
    # with the window in force then, so every later view shows them the same way.
    guarded: Sequence[ToolResultDecision] = ()
    # What the provider's usage on these entries taught (None in events stored
    # before lessons were recorded: those teach nothing).
    lessons: Sequence[TokenLesson] | None = None

    def apply(self, session: SessionState) -> None:
        if any(entry.role is Role.USER for entry in self.entries):
            session.overflow_attempts = 0  # a new turn
        for lesson in self.lessons or ():
            session.learn_from(lesson, accepted=True)
        session.prompt_tokens += sum(e.token_count for e in self.entries) - guard_savings(
            self.entries, self.guarded
        )
        for entry in self.entries:
            position = session.entry_count
            if entry.role is Role.SYSTEM:
                session.note_system_entry(position, self.originator_version)
            session.entry_count += 1
            session.total_tokens += entry.token_count
            if entry.usage is not None:
                session.usage = session.usage + entry.usage
            for call in entry.tool_calls:
                session.open_tool_calls[call.id] = position
            for result in entry.tool_results:
                session.open_tool_calls.pop(result.tool_call_id, None)
            session.last_entry_id = entry.id
        session.entries_since_compaction += len(self.entries)
        session.remember_key(self.idempotency_key, self.fingerprint, self.originator_version)


@dataclass(frozen=True)
class ToolCallsAbandoned(Event):
    """Tool calls that will never be answered, closed by one synthetic error result
    each (``entry``, a tool entry flagged ``synthetic``), so the session may go on."""

    TOPIC = "domain.session:Session.ToolCallsAbandoned"

    tool_call_ids: Sequence[str]
    reason: str
    entry: Entry

    def apply(self, session: SessionState) -> None:
        entry = self.entry
        session.prompt_tokens += entry.token_count
        session.entry_count += 1
        session.total_tokens += entry.token_count
        for call_id in self.tool_call_ids:
            session.open_tool_calls.pop(call_id, None)
        session.last_entry_id = entry.id
        session.entries_since_compaction += 1


@dataclass(frozen=True)
class OverflowReported(Event):
    """The provider refused a prompt view as too long: one attempt of this turn."""

    TOPIC = "domain.session:Session.OverflowReported"

    provider: str
    status_code: int
    message: str
    kind: str
    view_version: int
    view_hash: str = ""
    # What the provider's error stated: its window (and the answer's room), and
    # its count of the refused prompt against the store's estimate of it.
    window: WindowLesson | None = None
    lesson: TokenLesson | None = None
    # A request refused for its bytes: its size, the limit later views keep under
    # (None in events stored before byte limits were learned: those teach none).
    byte_limit: ByteLesson | None = None
    # The refused request's size in bytes as the client sent it (0: it sent none,
    # or the event was stored before clients could).
    request_bytes_sent: int = 0

    def apply(self, session: SessionState) -> None:
        session.overflow_attempts += 1
        for lesson in (self.byte_limit, self.window, self.lesson):
            if lesson is not None:
                session.learn_from(lesson)


@dataclass(frozen=True)
class SystemPromptSet(Event):
    TOPIC = "domain.session:Session.SystemPromptSet"

    system_prompt: SystemPrompt
    fingerprint: str

    def apply(self, session: SessionState) -> None:
        session.system_prompt_tokens = self.system_prompt.tokens.total
        session.system_prompt_fingerprint = self.fingerprint
        session.system_prompt_version = self.originator_version


@dataclass(frozen=True)
class PruneRecorded(Event):
    TOPIC = "domain.session:Session.PruneRecorded"

    decisions: Sequence[PruneDecision]
    reason: str = ""
    # Per decision, [characters of the entry's tool output as stored,
    # characters of it the prune keeps]; empty in events stored before.
    chars: Sequence[Sequence[int]] = ()
    # The prompt's tokens right after (as the guard and every prune show them),
    # counted by the store; -1 in events stored before it.
    prompt_tokens: int = -1
    # The provider's report this prune follows (Anthropic context editing's
    # applied_edits), as the client sent it; empty for the client's own prune.
    applied_edits_json: str = ""

    def apply(self, session: SessionState) -> None:
        if self.prompt_tokens >= 0:
            session.prompt_tokens = self.prompt_tokens


@dataclass(frozen=True)
class SettingsChanged(Event):
    TOPIC = "domain.session:Session.SettingsChanged"

    settings: SessionSettings
    context_window_tokens: int
    context_window_source: str
    # The client set context_window_tokens over a smaller window an overflow error
    # had taught for the model: the window set is in force from here on (False in
    # events stored before the rule, which changed nothing learned).
    supersedes_learned_window: bool = False

    def apply(self, session: SessionState) -> None:
        session.settings = self.settings
        session.context_window_tokens = self.context_window_tokens
        session.context_window_source = self.context_window_source
        session.settings_version = self.originator_version
        if self.supersedes_learned_window:
            model = self.settings.model
            session.learn(model, session.learned_for(model).without_window())


@dataclass(frozen=True)
class LearnedLimitsForgotten(Event):
    """What providers' overflow errors taught, forgotten at the client's word
    (UpdateSettings ``forget_learned_limits``): every model's learned window, the
    answer's room and limit in bytes (see ``LearnedLimits.forgotten``; the calibration
    stays). Views are fitted to the resolved window again, until an error teaches
    anew. The events that taught them stay, and a replay to a version before this one
    shows the limits then in force."""

    TOPIC = "domain.session:Session.LearnedLimitsForgotten"

    # What was in force, for the audit: [model, *LearnedLimits.to_list()] per model
    # that had a limit, oldest first.
    forgotten: Sequence[Sequence[Any]]

    def apply(self, session: SessionState) -> None:
        for model, *_ in self.forgotten:
            session.learn(model, session.learned_for(model).forgotten())


@dataclass(frozen=True)
class EntriesErased(Event):
    """Entries whose content was erased (their data keys deleted), by whom and why.

    ``tainted_compactions`` are the versions of the compactions whose summaries
    may carry the erased content (every one whose cut lies past an erased
    entry): their summaries are erased with them, until compacted again."""

    TOPIC = "domain.session:Session.EntriesErased"

    entry_ids: Sequence[str]
    tainted_compactions: Sequence[int]
    erased_by: str
    reason: str
    # The session whose erasure this follows (this one a fork of it); empty when asked.
    erased_with: str = ""

    def apply(self, session: SessionState) -> None:
        session.erased_entries += len(self.entry_ids)
        if session.cuts and session.cuts[-1][0] in self.tainted_compactions:
            session.summary_tainted = True


@dataclass(frozen=True)
class SessionErased(Event):
    """The whole session's content erased: every data key deleted; no more writes."""

    TOPIC = "domain.session:Session.SessionErased"

    erased_by: str
    reason: str
    erased_with: str = ""  # as in EntriesErased

    def apply(self, session: SessionState) -> None:
        session.erased = True
        session.erasure = (self.erased_by, self.reason, self.originator_version)
        # The title is content too: erased with the rest (and kept out of snapshots).
        session.settings = replace(session.settings, title="")


@dataclass(frozen=True)
class EntryRetracted(Event):
    """The log's latest entry taken back (a runtime's undo of its last item): the
    views leave it out from now on; the event that appended it stays."""

    TOPIC = "domain.session:Session.EntryRetracted"

    entry_id: str
    position: int
    tokens: int
    closed_calls: Sequence[str]
    # (call id, position of the entry that made it) of each call open again.
    reopened_calls: Sequence[Sequence[Any]]
    last_entry_id: str
    reason: str = ""

    def apply(self, session: SessionState) -> None:
        session.prompt_tokens = max(0, session.prompt_tokens - self.tokens)
        for call_id in self.closed_calls:
            session.open_tool_calls.pop(call_id, None)
        for call_id, position in self.reopened_calls:
            session.open_tool_calls[call_id] = position
        session.last_entry_id = self.last_entry_id or None
        session.retracted_entries += 1
        if session.system_entries and any(p == self.position for p, _ in session.system_entries):
            session.system_entries = None  # a cold read folds it all rather than pin it


@dataclass(frozen=True)
class SessionCleared(Event):
    """Every entry taken out of the views (a runtime's fresh start): the log starts
    empty at ``position``, the summary in force goes with the rest, the system
    prompt stays. The events before it stay, for audit and replay."""

    TOPIC = "domain.session:Session.SessionCleared"

    position: int
    # Entries the log showed when it was cleared.
    entries: int
    reason: str = ""

    def apply(self, session: SessionState) -> None:
        session.prompt_tokens = 0
        session.open_tool_calls = {}
        session.last_entry_id = None
        session.first_kept_position = self.position
        session.entries_since_compaction = 0
        session.overflow_attempts = 0
        if session.system_entries is not None:
            session.system_entries = ()  # none of them is pinned any more
