"""The Session aggregate: every change to a session is one of its events.

The aggregate's state is small and does not grow with the session (version,
settings, counters, the last entry, open tool calls, the cuts in force and
where the system entries are, at most 64 of each, a bounded window of
idempotency keys), so appending entry 100,000 costs what appending
entry 10 does, and snapshots stay tiny. The entries themselves live in the
events and in the read side; an append asks an ``IdLookup`` which of its ids
the session already used, and the rarer commands that look further back ask a
``History``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, TypeVar, cast

from eventsourcing.domain import (
    BaseAggregate,
    CanInitAggregate,
    CanMutateAggregate,
    CanSnapshotAggregate,
)

from domain.compaction import Compaction, CompactionFailure, History, check_cut_point
from domain.content import (
    Entry,
    Role,
    ToolResult,
    Usage,
    usage_total,
    validate_entry,
    validate_entry_ids,
)
from domain.context.budget import ContextBudget, context_budget
from domain.context.calibration import LearnedLimits, TokenLesson, WindowLesson, learn_tokens
from domain.context.shown import tokens_taken_out
from domain.context.tool_result_guard import GuardAction, ToolResultDecision, guard_entry
from domain.erasure import (
    MAX_ERASE_REASON_CHARS,
    MAX_ERASER_CHARS,
    SessionWasErased,
)
from domain.errors import (
    DuplicateEntry,
    EntryNotFound,
    IdempotencyKeyReused,
    InvalidCutPoint,
    InvalidPrune,
    InvalidRequest,
    TooLargeForWindow,
    ToolCallsOpen,
    UnknownToolCall,
    VersionConflict,
    VersionOutOfRange,
    quoted,
)
from domain.ids import IdLookup, UsedIds
from domain.pruning import PruneAction, PruneDecision
from domain.retraction import RetractionPlan
from domain.retraction import check_reason as check_retraction_reason
from domain.settings import SessionSettings
from domain.system_prompt import SystemPrompt, validate_system_prompt
from domain.tool_call_ids import original_call_id

# An event class, as a command answers the event it recorded.
E = TypeVar("E")

SESSION_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
TENANT = re.compile(r"[A-Za-z0-9._:@-]{1,64}")
# Between a tenant and a session id in a stream id: no session id holds one.
TENANT_SCOPE = "/"
MAX_ENTRIES_PER_APPEND = 10_000
# Retries come seconds after the first try; remembering the last few hundred
# keys answers them without letting the aggregate grow.
IDEMPOTENCY_WINDOW = 256
MAX_CUTS_KEPT = 64
MAX_SYSTEM_ENTRIES_KEPT = 64
MAX_UNDO_REASON_CHARS = 2_000
MAX_PROVIDER_MESSAGE_CHARS = 4_000
# The models whose lessons a session keeps (a session rarely changes model).
MAX_MODELS_LEARNED = 8
# The tenant of sessions made without authentication, and of those stored before tenants.
DEFAULT_TENANT = "default"


def validate_session_id(session_id: str) -> None:
    if not SESSION_ID.fullmatch(session_id):
        raise InvalidRequest(
            f"session id {quoted(session_id)} must be 1-128 characters of letters, digits "
            "and . _ : @ -"
        )


def stream_id(tenant: str, session_id: str) -> str:
    """The id of the event stream that holds a tenant's session: the session id in the
    default tenant (so ids stored before tenants keep their meaning), ``tenant/id`` in
    any other, so that tenants never share, or learn of each other's, ids."""
    return session_id if tenant == DEFAULT_TENANT else f"{tenant}{TENANT_SCOPE}{session_id}"


def validate_stream_id(value: str) -> None:
    """A session id, or one scoped by a tenant (``tenant/id``)."""
    tenant, _, session_id = value.rpartition(TENANT_SCOPE)
    validate_session_id(session_id)
    if TENANT_SCOPE in value and not TENANT.fullmatch(tenant):
        raise InvalidRequest(
            f"tenant {quoted(tenant)} in {quoted(value)} must be 1-64 characters of letters, "
            "digits and . _ : @ -"
        )


def _check_stream(value: str, tenant: str) -> None:
    """A new session's stream id must be its tenant's: no session is stored in
    another tenant's namespace."""
    validate_stream_id(value)
    owner, scoped, session_id = value.rpartition(TENANT_SCOPE)
    owned = owner == tenant if scoped else tenant == DEFAULT_TENANT
    if not owned:
        raise InvalidRequest(
            f"stream {quoted(value)} is not tenant {quoted(tenant)}'s; its sessions are "
            f"stored as {quoted(stream_id(tenant, session_id))}"
        )


def _label(offset: int, draft: Entry) -> str:
    # Name entries as the client sent them: generated ids mean nothing to it.
    return f"entries[{offset}]" + (f" ({quoted(draft.id)})" if draft.id else "")


def new_id() -> str:
    return uuid.uuid4().hex


class Session(BaseAggregate[str]):
    @dataclass(frozen=True)
    class Event(CanMutateAggregate[str]):
        originator_id: str
        originator_version: int
        timestamp: datetime

    @dataclass(frozen=True)
    class Started(Event, CanInitAggregate[str]):
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
        entries: Sequence[Entry]
        idempotency_key: str = ""
        fingerprint: str = ""
        # How the tool-result guard shows the results it did not keep whole, decided
        # with the window in force then, so every later view shows them the same way.
        guarded: Sequence[ToolResultDecision] = ()
        # What the provider's usage on these entries taught (None in events stored
        # before lessons were recorded: those teach nothing).
        lessons: Sequence[TokenLesson] | None = None

        def apply(self, session: Session) -> None:
            if any(entry.role is Role.USER for entry in self.entries):
                session.overflow_attempts = 0  # a new turn
            for lesson in self.lessons or ():
                learned = session.learned_for(lesson.model)
                session.learn(lesson.model, learned.after_tokens(lesson, accepted=True))
            session.prompt_tokens += sum(e.token_count for e in self.entries) - _guard_savings(
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
            if self.idempotency_key:
                keys = session.recent_appends
                keys[self.idempotency_key] = [self.fingerprint, self.originator_version]
                while len(keys) > IDEMPOTENCY_WINDOW:
                    del keys[next(iter(keys))]

    @dataclass(frozen=True)
    class ToolCallsAbandoned(Event):
        """Tool calls that will never be answered, closed by one synthetic error result
        each (``entry``, a tool entry flagged ``synthetic``), so the session may go on."""

        tool_call_ids: Sequence[str]
        reason: str
        entry: Entry

        def apply(self, session: Session) -> None:
            entry = self.entry
            session.prompt_tokens += entry.token_count
            session.entry_count += 1
            session.total_tokens += entry.token_count
            for call_id in self.tool_call_ids:
                session.open_tool_calls.pop(call_id, None)
            session.last_entry_id = entry.id
            session.entries_since_compaction += 1

    @dataclass(frozen=True)
    class CompactionRecorded(Event):
        compaction: Compaction
        first_kept_position: int
        # The prompt's tokens right after (summary, pinned and kept entries as the
        # guard shows them), counted by the store; -1 in events stored before it.
        prompt_tokens: int = -1
        # The version of the event that appended the first kept entry, so a cold
        # read starts there; 0 in events stored before it (a cold read then
        # folds the whole session).
        first_kept_version: int = 0
        # The session's learned limits when it was recorded (Session.limits), so a
        # read starting at this cut knows what the provider taught before it.
        limits: Sequence[Sequence[Any]] = ()

        def apply(self, session: Session) -> None:
            session.prompt_tokens = (
                self.prompt_tokens if self.prompt_tokens >= 0 else self.compaction.tokens_after
            )
            session.compaction_count += 1
            session.summary_tainted = False
            session.first_kept_position = self.first_kept_position
            session.entries_since_compaction = 0
            cut = (
                self.originator_version,
                self.first_kept_position,
                self.first_kept_version,
                session.settings_version,
                session.system_prompt_version,
            )
            session.cuts = (*tuple(session.cuts)[-(MAX_CUTS_KEPT - 1) :], cut)

    @dataclass(frozen=True)
    class CompactionUndone(Event):
        """A compaction taken back: the entries it covered are in the durable log
        again, and the cut is where it was before it (later compactions still in
        force are taken back with it). Compacting again re-applies a cut."""

        compaction_version: int
        reason: str
        # Where the cut is now, and the compaction that made it (0: no compaction
        # is in force, the log starts at the first entry).
        first_kept_position: int
        restored_compaction_version: int
        # The prompt's tokens right after, counted by the store.
        prompt_tokens: int
        requested_by: str = ""

        def apply(self, session: Session) -> None:
            session.prompt_tokens = self.prompt_tokens
            session.first_kept_position = self.first_kept_position
            session.summary_tainted = False  # the restored cut's state is the read side's
            session.entries_since_compaction = max(
                1, session.entry_count - self.first_kept_position
            )
            cuts = [c for c in session.cuts if c[0] < self.compaction_version]
            if self.restored_compaction_version and (
                not cuts or cuts[-1][0] != self.restored_compaction_version
            ):
                cuts = []  # the cut in force is older than what the aggregate keeps
            session.cuts = tuple(cuts)
            session.undo_count += 1

    @dataclass(frozen=True)
    class CompactionRedone(Event):
        """An undo taken back: the compactions it took back are in force again, exactly
        as they were recorded (same summaries, same cut), as if it never happened."""

        undo_version: int
        # The compactions in force again, oldest first; the last one makes the cut.
        compaction_versions: Sequence[int]
        reason: str
        first_kept_position: int
        # The prompt's tokens right after, counted by the store.
        prompt_tokens: int
        # The aggregate's cuts of those compactions (see ``Session.cuts``), so a
        # cold read starts at the cut again.
        cuts: Sequence[Sequence[int]]
        requested_by: str = ""

        def apply(self, session: Session) -> None:
            session.prompt_tokens = self.prompt_tokens
            session.first_kept_position = self.first_kept_position
            session.entries_since_compaction = max(
                1, session.entry_count - self.first_kept_position
            )
            cuts = (*tuple(session.cuts), *(tuple(c) for c in self.cuts))
            session.cuts = cuts[-MAX_CUTS_KEPT:]

    @dataclass(frozen=True)
    class CompactionFailed(Event):
        failure: CompactionFailure

        def apply(self, session: Session) -> None:
            session.compaction_failures += 1

    @dataclass(frozen=True)
    class OverflowReported(Event):
        """The provider refused a prompt view as too long: one attempt of this turn."""

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

        def apply(self, session: Session) -> None:
            session.overflow_attempts += 1
            if self.window is not None:
                model = self.window.model
                session.learn(model, session.learned_for(model).after_window(self.window))
            if self.lesson is not None:
                model = self.lesson.model
                learned = session.learned_for(model).after_tokens(self.lesson, accepted=False)
                session.learn(model, learned)

    @dataclass(frozen=True)
    class SystemPromptSet(Event):
        system_prompt: SystemPrompt
        fingerprint: str

        def apply(self, session: Session) -> None:
            session.system_prompt_tokens = self.system_prompt.tokens.total
            session.system_prompt_fingerprint = self.fingerprint
            session.system_prompt_version = self.originator_version

    @dataclass(frozen=True)
    class PruneRecorded(Event):
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

        def apply(self, session: Session) -> None:
            if self.prompt_tokens >= 0:
                session.prompt_tokens = self.prompt_tokens

    @dataclass(frozen=True)
    class SettingsChanged(Event):
        settings: SessionSettings
        context_window_tokens: int
        context_window_source: str

        def apply(self, session: Session) -> None:
            session.settings = self.settings
            session.context_window_tokens = self.context_window_tokens
            session.context_window_source = self.context_window_source
            session.settings_version = self.originator_version

    @dataclass(frozen=True)
    class EntriesErased(Event):
        """Entries whose content was erased (their data keys deleted), by whom and why.

        ``tainted_compactions`` are the versions of the compactions whose summaries
        may carry the erased content (every one whose cut lies past an erased
        entry): their summaries are erased with them, until compacted again."""

        entry_ids: Sequence[str]
        tainted_compactions: Sequence[int]
        erased_by: str
        reason: str
        # The session whose erasure this follows (this one a fork of it); empty when asked.
        erased_with: str = ""

        def apply(self, session: Session) -> None:
            session.erased_entries += len(self.entry_ids)
            if session.cuts and session.cuts[-1][0] in self.tainted_compactions:
                session.summary_tainted = True

    @dataclass(frozen=True)
    class SessionErased(Event):
        """The whole session's content erased: every data key deleted; no more writes."""

        erased_by: str
        reason: str
        erased_with: str = ""  # as in EntriesErased

        def apply(self, session: Session) -> None:
            session.erased = True
            session.erasure = (self.erased_by, self.reason, self.originator_version)
            # The title is content too: erased with the rest (and kept out of snapshots).
            session.settings = replace(session.settings, title="")

    @dataclass(frozen=True)
    class EntryRetracted(Event):
        """The log's latest entry taken back (a runtime's undo of its last item): the
        views leave it out from now on; the event that appended it stays."""

        entry_id: str
        position: int
        tokens: int
        closed_calls: Sequence[str]
        # (call id, position of the entry that made it) of each call open again.
        reopened_calls: Sequence[Sequence[Any]]
        last_entry_id: str
        reason: str = ""

        def apply(self, session: Session) -> None:
            session.prompt_tokens = max(0, session.prompt_tokens - self.tokens)
            for call_id in self.closed_calls:
                session.open_tool_calls.pop(call_id, None)
            for call_id, position in self.reopened_calls:
                session.open_tool_calls[call_id] = position
            session.last_entry_id = self.last_entry_id or None
            session.retracted_entries += 1
            if session.system_entries and any(
                p == self.position for p, _ in session.system_entries
            ):
                session.system_entries = None  # a cold read folds it all rather than pin it

    @dataclass(frozen=True)
    class SessionCleared(Event):
        """Every entry taken out of the views (a runtime's fresh start): the log starts
        empty at ``position``, the summary in force goes with the rest, the system
        prompt stays. The events before it stay, for audit and replay."""

        position: int
        # Entries the log showed when it was cleared.
        entries: int
        reason: str = ""

        def apply(self, session: Session) -> None:
            session.prompt_tokens = 0
            session.open_tool_calls = {}
            session.last_entry_id = None
            session.first_kept_position = self.position
            session.entries_since_compaction = 0
            session.overflow_attempts = 0
            if session.system_entries is not None:
                session.system_entries = ()  # none of them is pinned any more

    # State added after the first release: snapshots taken before it read
    # back with these class-level defaults.
    retracted_entries = 0
    compaction_failures = 0
    overflow_attempts = 0
    # What the provider taught, per model (see domain.context.calibration): each
    # [model, *LearnedLimits.to_list()], oldest first, at most MAX_MODELS_LEARNED.
    limits: Sequence[Sequence[Any]] = ()
    # Tokens of the prompt view's messages (the system prompt aside), kept exact
    # as events land (guard decisions, prunes, compactions and undos say what they
    # leave), so deciding whether to compact needs no read.
    prompt_tokens = 0
    system_prompt_tokens = 0
    system_prompt_fingerprint = ""
    parent_session_id = ""
    forked_at_version = 0
    # Where a cold read of the prompt view starts. ``cuts`` holds the compactions
    # in force, oldest first, each (version, first kept position, version that
    # appended the first kept entry, settings version and system prompt version
    # in force then); the last MAX_CUTS_KEPT only. ``system_entries`` holds
    # (position, version) of the system entries every cut keeps, or None past
    # MAX_SYSTEM_ENTRIES_KEPT (a cold read then folds the whole session).
    cuts: Sequence[Sequence[int]] = ()
    settings_version = 1
    system_prompt_version = 0
    system_entries: Sequence[Sequence[int]] | None = ()
    undo_count = 0
    tenant = DEFAULT_TENANT  # for snapshots taken before sessions had tenants
    erased = False
    # (erased by, reason, version) of the erasure of the whole session.
    erasure: tuple[str, str, int] | None = None
    erased_entries = 0
    # The summary in force was erased with entries it covered (see EntriesErased).
    summary_tainted = False

    @dataclass(frozen=True)
    class Snapshot(CanSnapshotAggregate[str]):
        originator_id: str
        originator_version: int
        timestamp: datetime
        topic: str
        state: dict[str, Any]

    def __init__(
        self,
        settings: SessionSettings,
        context_window_tokens: int,
        context_window_source: str,
        parent_session_id: str = "",
        forked_at_version: int = 0,
        tenant: str = DEFAULT_TENANT,
    ) -> None:
        # Called with the Started event's fields. Every attribute here is
        # bounded in size whatever the length of the session.
        self.parent_session_id = parent_session_id
        self.tenant = tenant
        self.forked_at_version = forked_at_version
        self.settings = settings
        self.context_window_tokens = context_window_tokens
        self.context_window_source = context_window_source
        self.entry_count = 0
        self.total_tokens = 0
        self.usage = Usage()
        self.last_entry_id: str | None = None
        # Tool call id -> position of the entry that made the call.
        self.open_tool_calls: dict[str, int] = {}
        self.compaction_count = 0
        self.first_kept_position = 0
        self.entries_since_compaction = 0
        # Idempotency key -> [request fingerprint, version], oldest first.
        self.recent_appends: dict[str, list[Any]] = {}

    def note_system_entry(self, position: int, version: int) -> None:
        if self.system_entries is None:
            return
        if len(self.system_entries) >= MAX_SYSTEM_ENTRIES_KEPT:
            self.system_entries = None
        else:
            self.system_entries = (*self.system_entries, (position, version))

    @property
    def cold_start(self) -> tuple[int, int, int, tuple[int, ...]] | None:
        """Where a cold read may start: (compaction version, first kept position,
        first kept version, versions of the earlier events it needs), or None when
        it must fold the whole session."""
        if not self.cuts or self.system_entries is None:
            return None
        version, position, first_kept_version, settings_v, prompt_v = self.cuts[-1]
        if first_kept_version <= 1:
            return None
        earlier = {settings_v, prompt_v, *(v for p, v in self.system_entries if p < position)}
        needed = tuple(sorted(v for v in earlier if 0 < v < first_kept_version))
        return version, position, first_kept_version, needed

    def __deepcopy__(self, memo: dict[int, Any]) -> Session:
        # Commands run on a copy, so a failed save leaves no trace. Everything
        # but the two small dicts and the pending list is immutable, so this is
        # much cheaper than a generic deep copy.
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.open_tool_calls = dict(self.open_tool_calls)
        clone.recent_appends = dict(self.recent_appends)
        clone._pending_events = list(self._pending_events)
        return clone

    def trigger_event(self, event_class: type[Any], **kwargs: Any) -> None:
        # Every command ends here: a session erased whole refuses them all.
        if self.erased:
            raise SessionWasErased(self.id)
        super().trigger_event(event_class, **kwargs)

    def _record(self, event_class: type[E], **kwargs: Any) -> E:
        """Triggers the event and answers it: a command answers what it decided."""
        self.trigger_event(event_class, **kwargs)
        return cast(E, self._pending_events[-1])

    # -- commands ---------------------------------------------------------------

    @classmethod
    def start(
        cls,
        session_id: str,
        settings: SessionSettings,
        context_window: tuple[int, str],
        *,
        max_entry_bytes_limit: int | None = None,
        timestamp: datetime | None = None,
        tenant: str = DEFAULT_TENANT,
    ) -> Session:
        """A new session of ``tenant`` in the stream ``session_id`` (see stream_id);
        ``timestamp`` is the time it started (now, unless imported)."""
        _check_stream(session_id, tenant)
        settings.validate(max_entry_bytes_limit)
        return cls._create(
            cls.Started,
            id=session_id,
            settings=settings,
            context_window_tokens=context_window[0],
            context_window_source=context_window[1],
            timestamp=timestamp,
            tenant=tenant,
        )

    @classmethod
    def fork(
        cls,
        session_id: str,
        parent_events: Sequence[SessionEvent],
        tenant: str = DEFAULT_TENANT,
    ) -> Session:
        """A new session whose history is a copy of the parent's events (its
        ``Started`` first): the same entries, ids, compactions, prunes, system
        prompt, settings and times, so every view of the fork up to the fork
        point equals the parent's. The parent is not touched; the fork belongs
        to ``tenant``, whoever owns the parent."""
        _check_stream(session_id, tenant)
        if not parent_events or not isinstance(parent_events[0], cls.Started):
            raise InvalidRequest("a fork needs the parent's events from its first version")
        started = parent_events[0]
        fork = cls._create(
            cls.Started,
            id=session_id,
            settings=started.settings,
            context_window_tokens=started.context_window_tokens,
            context_window_source=started.context_window_source,
            parent_session_id=started.originator_id,
            forked_at_version=parent_events[-1].originator_version,
            timestamp=started.timestamp,
            tenant=tenant,
        )
        for event in parent_events[1:]:
            fields = {
                k: v
                for k, v in event.__dict__.items()
                if k not in ("originator_id", "originator_version")
            }
            fork.trigger_event(type(event), **fields)
        return fork

    def check_expected_version(self, expected: int | None) -> None:
        if expected is not None and expected < 0:
            raise InvalidRequest(
                f"expected_version {expected} is negative; send the session's current version "
                "(0 or more), or leave it unset"
            )
        if expected is not None and expected != self.version:
            raise VersionConflict(expected, self.version)

    def earlier_append(self, idempotency_key: str, fingerprint: str) -> int | None:
        """The version of an earlier append with this key, if this is a retry of it."""
        if not idempotency_key or idempotency_key not in self.recent_appends:
            return None
        first_fingerprint, version = self.recent_appends[idempotency_key]
        if first_fingerprint != fingerprint:
            raise IdempotencyKeyReused(
                f"idempotency key {quoted(idempotency_key)} was used for a different append "
                f"(version {version}); use a new key for a new append"
            )
        return int(version)

    def append(
        self,
        entries: Sequence[Entry],
        ids: IdLookup,
        *,
        idempotency_key: str = "",
        fingerprint: str = "",
        timestamp: datetime | None = None,
        measure: Callable[[Entry], Entry] | None = None,
        estimate_at: Callable[[int], int | None] | None = None,
    ) -> list[Entry]:
        """Appends one turn. Fills in ids, parents and timestamps left empty.

        ``timestamp`` is the event's time: now, unless the turn is imported with
        the time it had. ``measure``, if given, completes each entry once it is
        known to be valid (the store counts its tokens there), so nothing invalid
        is measured, and an entry that could never fit the prompt even alone is
        refused. ``estimate_at(version)`` is the store's estimate of the prompt
        view at an earlier version, for usage that answered one (the aggregate
        knows only the latest).
        """
        if not entries:
            raise InvalidRequest("an append needs at least one entry")
        if len(entries) > MAX_ENTRIES_PER_APPEND:
            raise InvalidRequest(
                f"{len(entries)} entries in one append; send at most {MAX_ENTRIES_PER_APPEND}"
            )
        labels = [_label(offset, draft) for offset, draft in enumerate(entries)]
        for label, draft in zip(labels, entries, strict=True):
            validate_entry_ids(draft, label)
        used = self._used_ids(entries, ids)
        usage = self.usage
        now = timestamp or datetime.now(UTC)
        batch_ids: set[str] = set()
        batch_calls: set[str] = set()
        open_calls = dict(self.open_tool_calls)
        parent = self.last_entry_id
        final: list[Entry] = []
        for offset, (label, draft) in enumerate(zip(labels, entries, strict=True)):
            entry = _answering_open_calls(
                self._completed(draft, label, parent, now, batch_ids, used), open_calls
            )
            validate_entry(entry, self.settings.max_entry_bytes, label)
            if entry.usage is not None:
                usage = usage_total(usage, entry.usage, label)
            _pair_tool_calls(
                entry,
                label,
                self.entry_count + offset,
                open_calls,
                batch_calls,
                used,
            )
            batch_ids.add(entry.id)
            parent = entry.id
            final.append(measure(entry) if measure else entry)
        guarded = self._guarded(final)
        if measure is not None:
            self._check_fits_alone(final, guarded, labels)
        self.trigger_event(
            self.EntriesAppended,
            entries=final,
            idempotency_key=idempotency_key,
            fingerprint=fingerprint,
            guarded=guarded,
            timestamp=timestamp,
            lessons=self._lessons(final, estimate_at),
        )
        return final

    def _check_fits_alone(
        self,
        entries: Sequence[Entry],
        guarded: Sequence[ToolResultDecision],
        labels: Sequence[str],
    ) -> None:
        """Refuses an entry that, as the prompt would show it and beside the system
        prompt, is over the budget. Tool results never are (the guard caps them, and
        pruning can clear them); a message may be."""
        for label, entry in zip(labels, entries, strict=True):
            shown = entry.token_count - _guard_savings((entry,), guarded)
            self.check_fits(
                f"{label} ({entry.role.value})",
                "entry",
                shown,
                "split it into smaller messages, send large content as a tool result (which "
                "the guard trims), or use a model with a larger window",
            )

    def check_fits(
        self,
        what: str,
        kind: str,
        tokens: int,
        remedy: str,
        *,
        beside: int | None = None,
        budget: ContextBudget | None = None,
        settings: SessionSettings | None = None,
    ) -> None:
        """Refuses ``tokens`` of something the prompt must hold whole, were it over the
        budget beside the system prompt (``beside``, ``budget`` and ``settings``: what it
        would be beside and under, by default the session's). Only sessions whose engine
        keeps the prompt within the window (compaction ``auto``) promise a view that
        fits; the others are served as they are."""
        budget = budget or self.budget()
        if (settings or self.settings).compaction.mode != "auto":
            return  # the client keeps the prompt within its window; views are served as is
        system = self.system_prompt_tokens if beside is None else beside
        if system + tokens <= budget.budget_estimate:
            return
        besides = f", and the system prompt takes {system:,}" if system else ""
        raise TooLargeForWindow(
            f"{what} needs ~{budget.provider_tokens(tokens):,} tokens of the prompt, but the "
            f"prompt holds at most {budget.describe()}{besides}; no compaction could ever fit "
            f"it: {remedy}",
            kind,
            budget.provider_tokens(tokens),
            budget.budget_tokens,
        )

    def abandon_tool_calls(
        self,
        call_ids: Sequence[str],
        reason: str,
        count: Callable[[Entry], Entry],
        *,
        entry_id: str = "",
        timestamp: datetime | None = None,
    ) -> Entry:
        """Closes open tool calls that will never be answered (all open ones when
        ``call_ids`` is empty) with one synthetic error result each, in one tool
        entry flagged ``synthetic``; ``count`` fills in its token count."""
        if not self.open_tool_calls:
            raise UnknownToolCall("no tool calls are open in this session; nothing to abandon")
        if len(reason) > MAX_ABANDON_REASON_CHARS:
            raise InvalidRequest(
                f"reason is {len(reason):,} characters; send at most {MAX_ABANDON_REASON_CHARS:,}"
            )
        # A call a prompt view showed under a rewritten id is named by that id too.
        named = (original_call_id(c, self.open_tool_calls) for c in call_ids)
        chosen = list(dict.fromkeys(named)) or list(self.open_tool_calls)
        for call_id in chosen:
            if call_id not in self.open_tool_calls:
                raise UnknownToolCall(
                    f"tool call {quoted(call_id)} is not open in this session (never made, or "
                    "already answered); open calls: "
                    + (", ".join(repr(c) for c in list(self.open_tool_calls)[:5]) or "none")
                )
        text = abandoned_result_text(reason)
        entry = Entry(
            id=entry_id or new_id(),
            parent_id=self.last_entry_id,
            timestamp=timestamp or datetime.now(UTC),
            role=Role.TOOL,
            content=tuple(ToolResult(call_id, text, is_error=True) for call_id in chosen),
            metadata=MappingProxyType(
                {SYNTHETIC_KEY: "abandoned", **({"reason": reason} if reason else {})}
            ),
        )
        entry = count(entry)
        self.trigger_event(
            self.ToolCallsAbandoned,
            tool_call_ids=chosen,
            reason=reason,
            entry=entry,
            timestamp=timestamp,
        )
        return entry

    def _guarded(self, entries: Sequence[Entry]) -> list[ToolResultDecision]:
        """The tool-result guard's decisions for results it does not show whole."""
        policy = self.settings.tool_result_guard
        if not policy.enabled:
            return []
        return [
            decision
            for entry in entries
            for decision in guard_entry(entry, self.window_tokens, policy)
            if decision.action is not GuardAction.KEEP
        ]

    def _used_ids(self, drafts: Sequence[Entry], ids: IdLookup) -> UsedIds:
        """Which of the drafts' ids the session holds: one question for the whole turn."""
        entry_ids = {d.id for d in drafts if d.id}
        entry_ids.update(
            d.parent_id for d in drafts if d.parent_id and d.parent_id != self.last_entry_id
        )
        call_ids = {call.id for d in drafts for call in d.tool_calls}
        if not entry_ids and not call_ids:
            return UsedIds()
        return ids.used(entry_ids, call_ids)

    def _completed(
        self,
        draft: Entry,
        label: str,
        parent: str | None,
        now: datetime,
        batch_ids: set[str],
        used: UsedIds,
    ) -> Entry:
        """The draft with id, parent and timestamp filled in, once they are known to be sound."""
        if draft.id and (draft.id in batch_ids or draft.id in used.entry_ids):
            raise DuplicateEntry(
                f"{label}: entry id {quoted(draft.id)} is already in this session; "
                "ids must be unique"
            )
        if draft.parent_id:
            known = draft.parent_id in batch_ids or draft.parent_id == self.last_entry_id
            if not known and draft.parent_id not in used.entry_ids:
                raise InvalidRequest(
                    f"{label}: parent_id {quoted(draft.parent_id)} is not in this session; "
                    "leave it empty to chain to the previous entry"
                )
        return replace(
            draft,
            id=draft.id or new_id(),
            parent_id=draft.parent_id or parent,
            timestamp=draft.timestamp or now,
        )

    @property
    def estimated_prompt_tokens(self) -> int:
        return self.system_prompt_tokens + self.prompt_tokens

    @property
    def calibrated_prompt_tokens(self) -> int:
        return self.budget().provider_tokens(self.estimated_prompt_tokens)

    # -- what the provider taught ------------------------------------------------

    def learned_for(self, model: str) -> LearnedLimits:
        stored = next((row for row in self.limits if row[0] == model), None)
        return LearnedLimits.from_list(list(stored[1:])) if stored else LearnedLimits()

    def learn(self, model: str, limits: LearnedLimits) -> None:
        kept = [row for row in self.limits if row[0] != model][-(MAX_MODELS_LEARNED - 1) :]
        self.limits = (*kept, (model, *limits.to_list()))

    @property
    def learned(self) -> LearnedLimits:
        """What the provider taught about the session's model."""
        return self.learned_for(self.settings.model)

    @property
    def calibration(self) -> float:
        """Provider tokens per estimated token for the session's model (1.0 untaught)."""
        return self.learned.calibration or 1.0

    @property
    def window_tokens(self) -> int:
        """The window in force: the resolved one, or the provider's when it said less."""
        return self.learned.window(self.context_window_tokens)

    def budget(self, asked_tokens: int | None = None) -> ContextBudget:
        """What the prompt may hold now (see domain.context.budget)."""
        return self._budget_under(self.settings, self.context_window_tokens, asked_tokens)

    def _budget_under(
        self, settings: SessionSettings, window_tokens: int, asked_tokens: int | None = None
    ) -> ContextBudget:
        learned = self.learned_for(settings.model)
        return context_budget(
            learned.window(window_tokens),
            settings.compaction,
            calibration=learned.calibration or 1.0,
            learned_reserve_tokens=learned.output_tokens,
            asked_tokens=asked_tokens,
        )

    def crossed_threshold(self) -> bool:
        """Whether automatic compaction should start: the calibrated estimate is over
        the threshold (which the reserve caps)."""
        return self.settings.compaction.mode == "auto" and self.budget().over_threshold(
            self.estimated_prompt_tokens
        )

    def _lessons(
        self, entries: Sequence[Entry], estimate_at: Callable[[int], int | None] | None
    ) -> list[TokenLesson]:
        """What the provider's usage on these entries teaches: each assistant entry that
        names the view it answered, its reported prompt tokens against the store's
        estimate of that view."""
        lessons: list[TokenLesson] = []
        current = self.learned.calibration
        for entry in entries:
            ref, usage = entry.prompt_ref, entry.usage
            if ref is None or usage is None or not 0 < ref.version <= self.version:
                continue
            estimate = self.estimated_prompt_tokens if ref.version == self.version else None
            if estimate is None and estimate_at is not None:
                estimate = estimate_at(ref.version)
            if estimate is None:
                continue
            lesson = learn_tokens(
                current,
                self.settings.model,
                estimate,
                usage.prompt_total(ref.format),
                f"usage of entry {entry.id} (view at version {ref.version})",
            )
            if lesson is not None:
                lessons.append(lesson)
                current = lesson.calibration
        return lessons

    def record_compaction(
        self,
        compaction: Compaction,
        history: History,
        *,
        prompt_tokens: int = -1,
        timestamp: datetime | None = None,
    ) -> Session.CompactionRecorded:
        compaction.validate()
        if self.entry_count == 0:
            raise InvalidCutPoint("the session has no entries to compact")
        self.check_fits("the summary", "summary", compaction.summary_tokens, "write a shorter one")
        position = check_cut_point(
            compaction.first_kept_entry_id,
            history,
            self.open_tool_calls,
            self.first_kept_position,
        )
        stale = self.compaction_count and not self.entries_since_compaction
        if stale and position <= self.first_kept_position:
            # Nothing new would be summarised: the cut must move forward.
            raise InvalidCutPoint(
                f"nothing was appended since the last compaction, and first_kept_entry_id "
                f"{quoted(compaction.first_kept_entry_id)} is where it already cuts; a "
                "compaction that directly follows another must cut later"
            )
        compaction.check_shrinks()
        return self._record(
            self.CompactionRecorded,
            compaction=compaction,
            first_kept_position=position,
            prompt_tokens=prompt_tokens,
            first_kept_version=history.entry_version(position),
            limits=[list(row) for row in self.limits],
            timestamp=timestamp,
        )

    def undo_compaction(
        self,
        compaction_version: int,
        reason: str,
        *,
        restored: tuple[int, int],
        prompt_tokens: int,
        requested_by: str = "",
    ) -> Session.CompactionUndone:
        """Takes back the compaction recorded at ``compaction_version``, which must be in
        force; ``restored`` is the cut in force before it, (compaction version or 0,
        first kept position), as the history folded it."""
        if len(reason) > MAX_UNDO_REASON_CHARS:
            raise InvalidRequest(
                f"reason is {len(reason):,} characters; send at most {MAX_UNDO_REASON_CHARS:,}"
            )
        restored_version, position = restored
        if position > self.first_kept_position:
            raise InvalidRequest("undoing a compaction cannot move the cut forward")
        return self._record(
            self.CompactionUndone,
            compaction_version=compaction_version,
            reason=reason,
            first_kept_position=position,
            restored_compaction_version=restored_version,
            prompt_tokens=prompt_tokens,
            requested_by=requested_by,
        )

    def redo_compaction(
        self,
        undo_version: int,
        reason: str,
        *,
        compaction_versions: Sequence[int],
        first_kept_position: int,
        cuts: Sequence[Sequence[int]],
        prompt_tokens: int,
        requested_by: str = "",
    ) -> Session.CompactionRedone:
        """Takes back the undo recorded at ``undo_version``: the compactions it took
        back (``compaction_versions``, oldest first, whose ``cuts`` the history
        gives) are in force again, and the cut is the newest one's."""
        if len(reason) > MAX_UNDO_REASON_CHARS:
            raise InvalidRequest(
                f"reason is {len(reason):,} characters; send at most {MAX_UNDO_REASON_CHARS:,}"
            )
        if not compaction_versions or len(cuts) != len(compaction_versions):
            raise InvalidRequest("taking back an undo needs the compactions it took back")
        if first_kept_position < self.first_kept_position:
            raise InvalidRequest("taking back an undo cannot move the cut backward")
        return self._record(
            self.CompactionRedone,
            undo_version=undo_version,
            compaction_versions=list(compaction_versions),
            reason=reason,
            first_kept_position=first_kept_position,
            prompt_tokens=prompt_tokens,
            cuts=[list(c) for c in cuts],
            requested_by=requested_by,
        )

    def record_prune(
        self,
        decisions: Sequence[PruneDecision],
        reason: str,
        history: History,
        prompt_tokens_after: Callable[[Sequence[PruneDecision]], int] | None = None,
        applied_edits_json: str = "",
    ) -> Session.PruneRecorded:
        """Records prunes of tool results in the prompt view; ``prompt_tokens_after``
        counts the prompt's tokens with them, so the running estimate stays exact.
        A provider's report of its own edits (``applied_edits_json``) is recorded
        even when it cleared nothing the view still shows."""
        if not decisions and not applied_edits_json:
            raise InvalidRequest("a prune needs at least one entry")
        seen: set[str] = set()
        for decision in decisions:
            decision.validate()
            if decision.entry_id in seen:
                raise InvalidRequest(
                    f"entry {quoted(decision.entry_id)} is pruned twice in one request"
                )
            seen.add(decision.entry_id)
            position = history.position_of(decision.entry_id)
            if position is None:
                raise EntryNotFound(f"entry {quoted(decision.entry_id)} is not in this session")
            if history.role_at(position) is not Role.TOOL:
                raise InvalidPrune(
                    f"entry {quoted(decision.entry_id)} is not a tool result; "
                    "only tool output is pruned"
                )
            if position < self.first_kept_position:
                raise InvalidPrune(
                    f"entry {quoted(decision.entry_id)} was compacted away and is not in the prompt"
                )
        policy = self.settings.pruning
        sized = [
            d.sized(policy.soft_trim_head_chars, policy.soft_trim_tail_chars) for d in decisions
        ]
        chars = [_prune_chars(history.entry(d.entry_id), d) for d in sized]
        return self._record(
            self.PruneRecorded,
            decisions=sized,
            reason=reason,
            chars=chars,
            prompt_tokens=prompt_tokens_after(sized) if prompt_tokens_after else -1,
            applied_edits_json=applied_edits_json,
        )

    def record_compaction_failure(self, failure: CompactionFailure) -> None:
        self.trigger_event(self.CompactionFailed, failure=failure)

    def report_overflow(
        self,
        *,
        provider: str,
        status_code: int,
        message: str,
        kind: str,
        view_version: int,
        view_hash: str,
        stated: tuple[int, int, int] = (0, 0, 0),
        view_estimate: int | None = None,
    ) -> None:
        """Records the provider's refusal; ``overflow_attempts`` counts them per turn.

        ``stated`` is what the provider's error said: (window, its count of the
        refused prompt, the answer's room asked for), 0 where it said nothing;
        ``view_estimate`` the store's estimate of the refused view. Both are lessons:
        the window in force and the calibration learn from them."""
        if not 1 <= view_version <= self.version:
            raise VersionOutOfRange(
                f"view_version {view_version} is not a version of this session (1 to "
                f"{self.version}); send the version of the prompt view the provider refused"
            )
        window_tokens, prompt_tokens, output_tokens = stated
        quoted_error = message[:200]
        model = self.settings.model
        window = None
        if window_tokens or output_tokens:
            window = WindowLesson(
                model, window_tokens, output_tokens, f"{provider} overflow: {quoted_error}"
            )
        lesson = None
        if prompt_tokens and view_estimate:
            lesson = learn_tokens(
                self.learned.calibration,
                model,
                view_estimate,
                prompt_tokens,
                f"{provider} overflow (view at version {view_version}): {quoted_error}",
            )
        self.trigger_event(
            self.OverflowReported,
            provider=provider,
            status_code=status_code,
            message=message[:MAX_PROVIDER_MESSAGE_CHARS],
            kind=kind,
            view_version=view_version,
            view_hash=view_hash,
            window=window,
            lesson=lesson,
        )

    def erase_entries(
        self,
        entry_ids: Sequence[str],
        tainted_compactions: Sequence[int],
        *,
        erased_by: str,
        reason: str,
        erased_with: str = "",
    ) -> Session.EntriesErased:
        """Records the erasure of entries the history found in this session
        (``erased_with``: of the session this one was forked from, which erased them)."""
        _check_erasure(erased_by, reason)
        if not entry_ids:
            raise InvalidRequest("name at least one entry to erase")
        return self._record(
            self.EntriesErased,
            entry_ids=list(entry_ids),
            tainted_compactions=list(tainted_compactions),
            erased_by=erased_by,
            reason=reason,
            erased_with=erased_with,
        )

    def erase(self, *, erased_by: str, reason: str, erased_with: str = "") -> Session.SessionErased:
        """Records the erasure of the whole session's content (``erased_with``: as in
        erase_entries)."""
        _check_erasure(erased_by, reason)
        return self._record(
            self.SessionErased, erased_by=erased_by, reason=reason, erased_with=erased_with
        )

    def retract_entry(self, plan: RetractionPlan, reason: str) -> None:
        """Takes the log's latest entry out of the views, as the history planned it."""
        check_retraction_reason(reason)
        self.trigger_event(
            self.EntryRetracted,
            entry_id=plan.entry.id,
            position=plan.position,
            tokens=plan.tokens,
            closed_calls=list(plan.closed_calls),
            reopened_calls=[list(c) for c in plan.reopened_calls],
            last_entry_id=plan.last_entry_id,
            reason=reason,
        )

    def clear(self, entries_shown: int, reason: str) -> None:
        """Takes every entry out of the views: the log starts empty after this."""
        check_retraction_reason(reason)
        self.trigger_event(
            self.SessionCleared, position=self.entry_count, entries=entries_shown, reason=reason
        )

    def set_system_prompt(self, system_prompt: SystemPrompt, fingerprint: str) -> None:
        """Stores the client's system prompt; the same prompt again records nothing."""
        validate_system_prompt(system_prompt)
        if fingerprint == self.system_prompt_fingerprint:
            return
        self.check_fits(
            "the system prompt",
            "system_prompt",
            system_prompt.tokens.total,
            "shorten it (fewer or smaller injected files, fewer tools), or use a model with a "
            "larger window",
            beside=0,
        )
        self.trigger_event(
            self.SystemPromptSet, system_prompt=system_prompt, fingerprint=fingerprint
        )

    def change_settings(
        self,
        settings: SessionSettings,
        context_window: tuple[int, str],
        *,
        max_entry_bytes_limit: int | None = None,
        largest_message_tokens: int = 0,
    ) -> None:
        """Records new settings; settings equal to the current ones record nothing.

        Refused when the prompt could no longer be served under them: the system prompt,
        or ``largest_message_tokens`` (the largest message the prompt keeps, which no
        compaction may shorten while its turn goes on), over the new budget."""
        settings.validate(max_entry_bytes_limit)
        window_tokens, window_source = context_window
        if (settings, window_tokens, window_source) == (
            self.settings,
            self.context_window_tokens,
            self.context_window_source,
        ):
            return
        budget = self._budget_under(settings, window_tokens)
        remedy = "choose a larger window, or a model that has one"
        self.check_fits(
            "the system prompt",
            "system_prompt",
            self.system_prompt_tokens,
            remedy,
            beside=0,
            budget=budget,
            settings=settings,
        )
        self.check_fits(
            "the largest message the prompt keeps",
            "entry",
            largest_message_tokens,
            remedy,
            budget=budget,
            settings=settings,
        )
        self.trigger_event(
            self.SettingsChanged,
            settings=settings,
            context_window_tokens=context_window[0],
            context_window_source=context_window[1],
        )


def _prune_chars(entry: Entry, decision: PruneDecision) -> list[int]:
    """[characters of the entry's tool output, characters of it the prune keeps]:
    a soft trim keeps at most its head and tail of each result, a hard clear none."""
    sizes = [len(result.content) for result in entry.tool_results]
    if decision.action is PruneAction.HARD_CLEAR:
        return [sum(sizes), 0]
    kept = (decision.head_chars or 0) + (decision.tail_chars or 0)
    return [sum(sizes), sum(min(size, kept) for size in sizes)]


def _guard_savings(entries: Sequence[Entry], guarded: Sequence[ToolResultDecision]) -> int:
    """The tokens the tool-result guard keeps out of the prompt for these entries."""
    if not guarded:
        return 0
    by_entry = {e.id: e for e in entries}
    return sum(
        tokens_taken_out(by_entry[d.entry_id], None, (d,))
        for d in guarded
        if d.entry_id in by_entry
    )


# Every event a session can record. Readers dispatch over it with match and
# assert_never, so a new event type is a type error until each handles it.
SessionEvent = (
    Session.Started
    | Session.EntriesAppended
    | Session.CompactionRecorded
    | Session.CompactionFailed
    | Session.OverflowReported
    | Session.SystemPromptSet
    | Session.PruneRecorded
    | Session.SettingsChanged
    | Session.ToolCallsAbandoned
    | Session.CompactionUndone
    | Session.EntriesErased
    | Session.SessionErased
    | Session.CompactionRedone
    | Session.EntryRetracted
    | Session.SessionCleared
)


def _check_erasure(erased_by: str, reason: str) -> None:
    if len(reason) > MAX_ERASE_REASON_CHARS:
        raise InvalidRequest(
            f"reason is {len(reason):,} characters; send at most {MAX_ERASE_REASON_CHARS:,}"
        )
    if len(erased_by) > MAX_ERASER_CHARS:
        raise InvalidRequest(
            f"erased_by is {len(erased_by):,} characters; send at most {MAX_ERASER_CHARS:,}"
        )


SYNTHETIC_KEY = "synthetic"
MAX_ABANDON_REASON_CHARS = 2_000


def abandoned_result_text(reason: str) -> str:
    """What the model reads for a call that was abandoned: marked as synthetic, so
    it is never taken for the tool's own output."""
    because = f": {reason}" if reason else ""
    return f"[synthetic result] This tool call was abandoned and never ran{because}"


def _answering_open_calls(entry: Entry, open_calls: Mapping[str, int]) -> Entry:
    """The entry with each result for a call id a prompt view rewrote (see
    domain.tool_call_ids) answering the open call it stands for."""
    if entry.role is not Role.TOOL or not open_calls:
        return entry
    content = tuple(
        replace(block, tool_call_id=original_call_id(block.tool_call_id, open_calls))
        if isinstance(block, ToolResult) and block.tool_call_id not in open_calls
        else block
        for block in entry.content
    )
    return entry if content == entry.content else replace(entry, content=content)


def _pair_tool_calls(
    entry: Entry,
    label: str,
    position: int,
    open_calls: dict[str, int],
    batch_calls: set[str],
    used: UsedIds,
) -> None:
    """Keeps every tool call directly followed by its result, as providers require.

    ``open_calls`` and ``batch_calls`` are updated with what this entry makes
    and answers.
    """
    if open_calls and entry.role not in (Role.TOOL, Role.CUSTOM):
        waiting = ", ".join(repr(call) for call in list(open_calls)[:3])
        raise ToolCallsOpen(
            f"{label}: tool calls {waiting} are still open; append their results "
            "first (with is_error for calls that were aborted): providers reject a prompt "
            "where anything but results follows a tool call"
        )
    for call in entry.tool_calls:
        if call.id in open_calls or call.id in batch_calls or call.id in used.call_ids:
            raise DuplicateEntry(
                f"{label}: tool call id {quoted(call.id)} is already used in this "
                "session; tool call ids must be unique"
            )
        open_calls[call.id] = position
        batch_calls.add(call.id)
    for result in entry.tool_results:
        if open_calls.pop(result.tool_call_id, None) is None:
            raise UnknownToolCall(
                f"{label} answers tool call {quoted(result.tool_call_id)}, which is not "
                "open in this session (never made, or already answered)"
            )
