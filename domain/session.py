"""The Session aggregate: every change to a session is one of its events.

Its state (domain.session_state) is small and does not grow with the
session; the entries themselves live in the events (domain.session_events,
domain.compaction_events) and in the read side. The commands are split by
what they change: appends (domain.session_appends), what the prompt keeps of
the history (domain.session_compactions), and here the session's life: start,
fork, settings, system prompt, retraction and erasure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias

from eventsourcing.domain import CanSnapshotAggregate

from domain import compaction_events as compactions
from domain import session_events as events
from domain.context.calibration import LearnedLimits
from domain.erasure import MAX_ERASE_REASON_CHARS, MAX_ERASER_CHARS
from domain.errors import IdempotencyKeyReused, InvalidRequest, VersionConflict
from domain.retraction import RetractionPlan
from domain.retraction import check_reason as check_retraction_reason
from domain.session_appends import AppendCommands
from domain.session_compactions import CompactionCommands
from domain.settings import SessionSettings
from domain.streams import DEFAULT_TENANT, check_stream
from domain.system_prompt import SystemPrompt, validate_system_prompt

# Every event a session can record. Readers dispatch over it with match and
# assert_never, so a new event type is a type error until each handles it.
SessionEvent: TypeAlias = (
    events.Started
    | events.EntriesAppended
    | compactions.CompactionRecorded
    | compactions.CompactionFailed
    | events.OverflowReported
    | events.SystemPromptSet
    | events.PruneRecorded
    | events.SettingsChanged
    | events.ToolCallsAbandoned
    | compactions.CompactionUndone
    | events.EntriesErased
    | events.SessionErased
    | compactions.CompactionRedone
    | events.EntryRetracted
    | events.SessionCleared
    | events.LearnedLimitsForgotten
)


class Session(AppendCommands, CompactionCommands):
    # Stored events name their class as Session's attribute, where the classes
    # were first defined (their TOPIC): a stored topic resolves through these in
    # any process, one that never recorded such an event too. Code imports the
    # classes from domain.session_events and domain.compaction_events.
    Event = events.Event
    Started = events.Started
    EntriesAppended = events.EntriesAppended
    ToolCallsAbandoned = events.ToolCallsAbandoned
    CompactionRecorded = compactions.CompactionRecorded
    CompactionUndone = compactions.CompactionUndone
    CompactionRedone = compactions.CompactionRedone
    CompactionFailed = compactions.CompactionFailed
    OverflowReported = events.OverflowReported
    SystemPromptSet = events.SystemPromptSet
    PruneRecorded = events.PruneRecorded
    SettingsChanged = events.SettingsChanged
    EntriesErased = events.EntriesErased
    SessionErased = events.SessionErased
    EntryRetracted = events.EntryRetracted
    SessionCleared = events.SessionCleared
    LearnedLimitsForgotten = events.LearnedLimitsForgotten

    @dataclass(frozen=True)
    class Snapshot(CanSnapshotAggregate[str]):
        originator_id: str
        originator_version: int
        timestamp: datetime
        topic: str
        state: dict[str, Any]

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
        check_stream(session_id, tenant)
        settings.validate(max_entry_bytes_limit)
        return cls._create(
            events.Started,
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
        check_stream(session_id, tenant)
        if not parent_events or not isinstance(parent_events[0], events.Started):
            raise InvalidRequest("a fork needs the parent's events from its first version")
        started = parent_events[0]
        fork = cls._create(
            events.Started,
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
            raise IdempotencyKeyReused.of(idempotency_key, int(version))
        return int(version)

    def erase_entries(
        self,
        entry_ids: Sequence[str],
        tainted_compactions: Sequence[int],
        *,
        erased_by: str,
        reason: str,
        erased_with: str = "",
    ) -> events.EntriesErased:
        """Records the erasure of entries the history found in this session
        (``erased_with``: of the session this one was forked from, which erased them)."""
        _check_erasure(erased_by, reason)
        if not entry_ids:
            raise InvalidRequest("name at least one entry to erase")
        return self._record(
            events.EntriesErased,
            entry_ids=list(entry_ids),
            tainted_compactions=list(tainted_compactions),
            erased_by=erased_by,
            reason=reason,
            erased_with=erased_with,
        )

    def erase(self, *, erased_by: str, reason: str, erased_with: str = "") -> events.SessionErased:
        """Records the erasure of the whole session's content (``erased_with``: as in
        erase_entries)."""
        _check_erasure(erased_by, reason)
        return self._record(
            events.SessionErased, erased_by=erased_by, reason=reason, erased_with=erased_with
        )

    def retract_entry(self, plan: RetractionPlan, reason: str) -> None:
        """Takes the log's latest entry out of the views, as the history planned it."""
        check_retraction_reason(reason)
        self.trigger_event(
            events.EntryRetracted,
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
            events.SessionCleared, position=self.entry_count, entries=entries_shown, reason=reason
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
            events.SystemPromptSet, system_prompt=system_prompt, fingerprint=fingerprint
        )

    def forget_learned_limits(self) -> events.LearnedLimitsForgotten | None:
        """Forgets what overflow errors taught about every model of the session (see
        LearnedLimitsForgotten). Records nothing when none taught a limit, so a retry
        changes nothing."""
        taught = [
            list(row) for row in self.limits if LearnedLimits.from_list(list(row[1:])).holds_a_limit
        ]
        if not taught:
            return None
        return self._record(events.LearnedLimitsForgotten, forgotten=taught)

    def change_settings(
        self,
        settings: SessionSettings,
        context_window: tuple[int, str],
        *,
        max_entry_bytes_limit: int | None = None,
        largest_message_tokens: int = 0,
        sets_window: bool = False,
    ) -> None:
        """Records new settings; settings equal to the current ones record nothing.

        ``sets_window``: the client named ``context_window_tokens`` in this change. Its
        window then supersedes a smaller one an overflow error taught for the model
        (the remedy the window guard names), even when the setting already held it.

        Refused when the prompt could no longer be served under them: the system prompt,
        or ``largest_message_tokens`` (the largest message the prompt keeps, which no
        compaction may shorten while its turn goes on), over the new budget."""
        settings.validate(max_entry_bytes_limit)
        window_tokens, window_source = context_window
        learned = self.learned_for(settings.model)
        supersedes = (
            sets_window
            and settings.context_window_tokens > 0
            and learned.window(window_tokens) < window_tokens
        )
        if not supersedes and (settings, window_tokens, window_source) == (
            self.settings,
            self.context_window_tokens,
            self.context_window_source,
        ):
            return
        if supersedes:
            learned = learned.without_window()
        budget = self._budget_under(settings, window_tokens, learned=learned)
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
            events.SettingsChanged,
            settings=settings,
            context_window_tokens=context_window[0],
            context_window_source=context_window[1],
            supersedes_learned_window=supersedes,
        )


def _check_erasure(erased_by: str, reason: str) -> None:
    # The reason is the record of why content was destroyed for good: never left out.
    if not reason.strip():
        raise InvalidRequest(
            "reason is blank: say why the content is erased (e.g. 'user request'); "
            "the erasure keeps it for the audit"
        )
    if len(reason) > MAX_ERASE_REASON_CHARS:
        raise InvalidRequest(
            f"reason is {len(reason):,} characters; send at most {MAX_ERASE_REASON_CHARS:,}"
        )
    if len(erased_by) > MAX_ERASER_CHARS:
        raise InvalidRequest(
            f"erased_by is {len(erased_by):,} characters; send at most {MAX_ERASER_CHARS:,}"
        )
