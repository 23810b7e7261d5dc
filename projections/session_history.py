"""The read side of one session: an incremental fold over its events.

Everything in a session is append-only, so the state at any earlier version
is a prefix of what is kept here: the entries appended by then, the latest
compaction recorded by then, the prunes recorded by then. "Replay to version
N" is therefore a bisect, not a re-fold, and the same object answers both the
current views and any past ones.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import assert_never

from domain.compaction import Compaction, CompactionFailure
from domain.content import Entry, Role, ToolResult, block_texts
from domain.context import shown
from domain.context.shown import tokens_taken_out
from domain.context.tool_result_guard import ToolResultDecision
from domain.errors import EntryNotFound, VersionOutOfRange, quoted
from domain.pruning import PruneDecision
from domain.session import Session, SessionEvent
from domain.settings import SessionSettings
from domain.system_prompt import SystemPrompt


@dataclass(frozen=True, slots=True)
class RecordedCompaction:
    compaction: Compaction
    first_kept_position: int
    version: int
    timestamp: datetime


@dataclass(frozen=True, slots=True)
class RecordedPrune:
    decisions: Sequence[PruneDecision]
    reason: str
    version: int
    timestamp: datetime


@dataclass(frozen=True, slots=True)
class DurableLog:
    """The session as persisted after compaction, as of ``version``."""

    session_id: str
    version: int
    compaction: RecordedCompaction | None
    entries: Sequence[Entry]
    # Parallel to entries: the version whose event appended each one.
    entry_versions: Sequence[int]
    first_position: int
    total_tokens: int
    # System entries from before the cut: the system prompt survives every
    # compaction, ahead of the summary.
    pinned: Sequence[Entry] = ()
    pinned_versions: Sequence[int] = ()


@dataclass(frozen=True, slots=True)
class RecordedFailure:
    failure: CompactionFailure
    version: int
    timestamp: datetime


@dataclass(frozen=True, slots=True)
class PromptView:
    """The durable log with the prunes recorded by ``version`` applied."""

    log: DurableLog
    settings: SessionSettings
    context_window_tokens: int
    # Latest decision per pruned entry that is still in the log.
    pruned: dict[str, PruneDecision]
    # The system prompt's, tools' and log's tokens, less what the tool-result
    # guard and pruning took out, pro rata by characters.
    estimated_tokens: int
    system_prompt: SystemPrompt = field(default_factory=SystemPrompt)
    # Entry id -> the guard's decisions for its tool results, for entries in the log.
    guarded: dict[str, tuple[ToolResultDecision, ...]] = field(default_factory=dict)
    # Where the window came from: session, modelsConfig, model or default.
    context_window_source: str = "default"

    def as_shown(self) -> list[Entry]:
        """The pinned and kept entries, each counted as the model sees it (guarded or
        pruned tool results count only what they show): what compaction plans with."""
        shown = []
        for entry in [*self.log.pinned, *self.log.entries]:
            pruned, guarded = self.pruned.get(entry.id), self.guarded.get(entry.id, ())
            if pruned is not None or guarded:
                saved = tokens_taken_out(entry, pruned, guarded)
                entry = replace(entry, token_count=entry.token_count - saved)
            shown.append(entry)
        return shown

    def shown_result(self, entry_id: str, result: ToolResult) -> str:
        """A tool result as the model sees it in this view."""
        return shown.shown_result(result, self.pruned.get(entry_id), self.guarded.get(entry_id, ()))


# Rough per-entry memory beyond its text: the objects, indexes and lists.
ENTRY_OVERHEAD_BYTES = 600


class SessionHistory:
    """All of one session's events, folded for fast reads at any version."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.version = 0
        self.entries: list[Entry] = []
        self._positions: dict[str, int] = {}
        # Parallel to entries: the version of the event that appended each one.
        self._entry_versions: list[int] = []
        # _token_prefix[i] is the token total of entries[:i].
        self._token_prefix: list[int] = [0]
        self._event_times: list[datetime] = []
        self._compactions: list[RecordedCompaction] = []
        self._prunes: list[RecordedPrune] = []
        # (version, settings, window tokens, window source), oldest first.
        self._settings: list[tuple[int, SessionSettings, int, str]] = []
        self._call_positions: dict[str, int] = {}
        self._system_positions: list[int] = []
        self._system_prompts: list[tuple[int, SystemPrompt]] = []
        # (position, entry id, decisions, tokens the guard takes out), by position.
        self._guarded: list[tuple[int, str, tuple[ToolResultDecision, ...], int]] = []
        self._failures: list[RecordedFailure] = []
        self._overflows: list[Session.OverflowReported] = []
        self._abandonments: list[Session.ToolCallsAbandoned] = []
        # Position of each tool result entry -> lowest position of a call it answers.
        self._answered_call_position: dict[int, int] = {}
        # Estimated memory held, for the cache that keeps histories.
        self.weight = 0

    # -- folding ------------------------------------------------------------------

    def apply(self, events: Iterable[SessionEvent]) -> None:
        for event in events:
            if event.originator_version != self.version + 1:
                raise ValueError(
                    f"event {event.originator_version} of session {self.session_id} "
                    f"does not follow version {self.version}"
                )
            self._apply_one(event)
            self.version = event.originator_version
            # Servers' clocks may disagree a little; keeping the times sorted
            # keeps "as of a time" a bisect and never goes back in versions.
            latest = self._event_times[-1] if self._event_times else event.timestamp
            self._event_times.append(max(latest, event.timestamp))

    def _apply_one(self, event: SessionEvent) -> None:
        version = event.originator_version
        match event:
            case Session.EntriesAppended():
                self._apply_entries(event.entries, event.guarded, version)
            case Session.ToolCallsAbandoned():
                # The synthetic results are entries of the log like any other,
                # flagged in their metadata; the guard never trims them.
                self._apply_entries((event.entry,), (), version)
                self._abandonments.append(event)
            case Session.CompactionRecorded():
                self._compactions.append(
                    RecordedCompaction(
                        event.compaction, event.first_kept_position, version, event.timestamp
                    )
                )
            case Session.PruneRecorded():
                self._prunes.append(
                    RecordedPrune(tuple(event.decisions), event.reason, version, event.timestamp)
                )
            case Session.Started() | Session.SettingsChanged():
                self._settings.append(
                    (
                        version,
                        event.settings,
                        event.context_window_tokens,
                        event.context_window_source,
                    )
                )
            case Session.SystemPromptSet():
                self._system_prompts.append((version, event.system_prompt))
            case Session.CompactionFailed():
                self._failures.append(RecordedFailure(event.failure, version, event.timestamp))
            case Session.OverflowReported():
                self._overflows.append(event)
            case _:
                assert_never(event)

    def _apply_entries(
        self,
        entries: Sequence[Entry],
        guarded_decisions: Sequence[ToolResultDecision],
        version: int,
    ) -> None:
        for entry in entries:
            position = len(self.entries)
            self.entries.append(entry)
            self._positions[entry.id] = position
            self._entry_versions.append(version)
            self._token_prefix.append(self._token_prefix[-1] + entry.token_count)
            if entry.role is Role.SYSTEM:
                self._system_positions.append(position)
            self.weight += ENTRY_OVERHEAD_BYTES + sum(map(len, block_texts(entry.content)))
            for call in entry.tool_calls:
                self._call_positions[call.id] = position
            answered = [
                self._call_positions[r.tool_call_id]
                for r in entry.tool_results
                if r.tool_call_id in self._call_positions
            ]
            if answered:
                self._answered_call_position[position] = min(answered)
        guarded: dict[str, list[ToolResultDecision]] = {}
        for decision in guarded_decisions:
            guarded.setdefault(decision.entry_id, []).append(decision)
        for entry_id, decisions in guarded.items():
            position = self._positions[entry_id]
            saving = tokens_taken_out(self.entries[position], None, decisions)
            self._guarded.append((position, entry_id, tuple(decisions), saving))

    # -- what the aggregate may ask (domain.compaction.History) ---------------------

    def position_of(self, entry_id: str) -> int | None:
        return self._positions.get(entry_id)

    def role_at(self, position: int) -> Role:
        return self.entries[position].role

    def call_position(self, call_id: str) -> int | None:
        return self._call_positions.get(call_id)

    def earliest_call_answered_from(self, position: int) -> int | None:
        # list() copies atomically: a reader may run while events are applied.
        answered = [
            call for at, call in list(self._answered_call_position.items()) if at >= position
        ]
        return min(answered, default=None)

    # -- reads ----------------------------------------------------------------------

    def entry(self, entry_id: str) -> Entry:
        position = self._positions.get(entry_id)
        if position is None:
            raise EntryNotFound(f"no entry {quoted(entry_id)} in session {quoted(self.session_id)}")
        return self.entries[position]

    def entry_version(self, position: int) -> int:
        return self._entry_versions[position]

    def version_at_time(self, moment: datetime) -> int:
        """The last version recorded at or before ``moment``."""
        version = bisect_right(self._event_times, moment)
        if version == 0:
            raise VersionOutOfRange(
                f"session {quoted(self.session_id)} did not exist yet at {moment.isoformat()}; "
                f"it starts at {self._event_times[0].isoformat()}"
            )
        return version

    def resolve_version(self, version: int | None) -> int:
        if version is None or version == 0:
            return self.version
        if not 1 <= version <= self.version:
            raise VersionOutOfRange(
                f"version {version} is out of range; session {quoted(self.session_id)} has "
                f"versions 1 to {self.version}"
            )
        return version

    def durable_log(self, version: int | None = None) -> DurableLog:
        version = self.resolve_version(version)
        end = bisect_right(self._entry_versions, version)
        compaction = self._latest(self._compactions, version)
        start = compaction.first_kept_position if compaction else 0
        summary_tokens = compaction.compaction.summary_tokens if compaction else 0
        pinned = self._pinned_before(start)
        return DurableLog(
            session_id=self.session_id,
            version=version,
            compaction=compaction,
            entries=self.entries[start:end],
            entry_versions=self._entry_versions[start:end],
            first_position=start,
            total_tokens=self._log_tokens(start, end, summary_tokens),
            pinned=[self.entries[p] for p in pinned],
            pinned_versions=[self._entry_versions[p] for p in pinned],
        )

    def tokens_if_cut_at(self, position: int, summary_tokens: int) -> int:
        """The durable log's tokens now, were it compacted to keep ``position`` on."""
        return self._log_tokens(position, len(self.entries), summary_tokens)

    def prompt_tokens_if_cut_at(self, position: int, summary_tokens: int) -> int:
        """The prompt's message tokens now, were it compacted to keep ``position`` on:
        the summary, the system entries, and the kept entries as the model sees them."""
        kept = sum(
            e.token_count
            for e in self.prompt_view().as_shown()
            if e.role is Role.SYSTEM or self._positions[e.id] >= position
        )
        return summary_tokens + kept

    def _pinned_before(self, start: int) -> list[int]:
        """Positions of the system entries a cut at ``start`` keeps ahead of the summary."""
        return self._system_positions[: bisect_left(self._system_positions, start)]

    def _log_tokens(self, start: int, end: int, summary_tokens: int) -> int:
        pinned = sum(self.entries[p].token_count for p in self._pinned_before(start))
        return summary_tokens + pinned + self._token_prefix[end] - self._token_prefix[start]

    def prompt_view(self, version: int | None = None) -> PromptView:
        log = self.durable_log(version)
        end = log.first_position + len(log.entries)
        in_log = range(log.first_position, end)
        pruned: dict[str, PruneDecision] = {}
        for prune in self._prunes:
            if prune.version > log.version:
                break
            for decision in prune.decisions:
                if self._positions[decision.entry_id] in in_log:
                    pruned[decision.entry_id] = decision
        settings_at = self._latest_settings(log.version)
        system_prompt = self.system_prompt(log.version)
        tokens = system_prompt.tokens.total + log.total_tokens
        guarded = {}
        first = bisect_left(self._guarded, log.first_position, key=lambda g: g[0])
        for position, entry_id, decisions, saving in self._guarded[first:]:
            if position >= end:
                break
            guarded[entry_id] = decisions
            if entry_id not in pruned:
                tokens -= saving
        tokens -= sum(
            tokens_taken_out(
                self.entries[self._positions[entry_id]], decision, guarded.get(entry_id, ())
            )
            for entry_id, decision in pruned.items()
        )
        return PromptView(
            log,
            settings_at[1],
            settings_at[2],
            pruned,
            tokens,
            system_prompt,
            guarded,
            settings_at[3],
        )

    def system_prompt(self, version: int | None = None) -> SystemPrompt:
        """The system prompt in force at ``version`` (empty if none was ever set)."""
        version = self.resolve_version(version)
        index = bisect_right(self._system_prompts, version, key=lambda s: s[0])
        return self._system_prompts[index - 1][1] if index else SystemPrompt()

    def prune_count(self, version: int | None = None) -> int:
        version = self.resolve_version(version)
        return bisect_right(self._prunes, version, key=lambda p: p.version)

    def failures(self, version: int | None = None) -> list[RecordedFailure]:
        version = self.resolve_version(version)
        return [f for f in self._failures if f.version <= version]

    def overflows_since(self, version: int) -> list[Session.OverflowReported]:
        return [o for o in self._overflows if o.originator_version > version]

    def abandonments(self, version: int | None = None) -> list[Session.ToolCallsAbandoned]:
        """The tool calls abandoned by ``version``, oldest first."""
        version = self.resolve_version(version)
        return [a for a in self._abandonments if a.originator_version <= version]

    def compactions(self, version: int | None = None) -> list[RecordedCompaction]:
        version = self.resolve_version(version)
        return [c for c in self._compactions if c.version <= version]

    def _latest_settings(self, version: int) -> tuple[int, SessionSettings, int, str]:
        index = bisect_right(self._settings, version, key=lambda s: s[0])
        return self._settings[index - 1]

    @staticmethod
    def _latest(records: Sequence[RecordedCompaction], version: int) -> RecordedCompaction | None:
        index = bisect_right(records, version, key=lambda r: r.version)
        return records[index - 1] if index else None
