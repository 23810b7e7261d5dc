"""Reading a folded history: what the aggregate asks, entries, and the views.

The durable log and the prompt view at any version, and what they would hold were
the session cut or pruned otherwise (what compaction and pruning plan with). A
history loaded from a cut hands what lies before it to the whole history.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from datetime import datetime
from typing import Self

from domain.content import Entry, Role
from domain.context.shown import tokens_taken_out
from domain.errors import (
    EntryNotFound,
    VersionOutOfRange,
    quoted,
)
from domain.pruning import PruneDecision
from domain.system_prompt import SystemPrompt
from projections.history_fold import UNKNOWN_CUT, HistoryFold
from projections.history_views import DurableLog, PromptView, RecordedCompaction


class HistoryReads(HistoryFold):
    """The reads of a folded history: entries and positions, the durable log and
    the prompt view, at any version."""

    # -- what the aggregate may ask (domain.compaction.History) ---------------------

    def position_of(self, entry_id: str) -> int | None:
        position = self._positions.get(entry_id)
        if position is None and self._loader is not None:
            return self.whole().position_of(entry_id)
        return position

    def role_at(self, position: int) -> Role:
        if not self._holds(position) and self._loader is not None:
            return self.whole().role_at(position)
        return self._at(position).role

    def call_position(self, call_id: str) -> int | None:
        position = self._call_positions.get(call_id)
        if position is None and self._loader is not None:
            return self.whole().call_position(call_id)
        return position

    def earliest_call_answered_from(self, position: int) -> int | None:
        if self._loader is not None and (
            position < self._base
            or (self._answers_before_base and self._answers_before_base[-1] >= position)
        ):
            return self.whole().earliest_call_answered_from(position)
        # list() copies atomically: a reader may run while events are applied.
        answered = [
            call for at, call in list(self._answered_call_position.items()) if at >= position
        ]
        return min(answered, default=None)

    # -- reads ----------------------------------------------------------------------

    def entry(self, entry_id: str) -> Entry:
        position = self._positions.get(entry_id)
        if position is None:
            if self._loader is not None:
                return self.whole().entry(entry_id)
            raise EntryNotFound(
                f"no entry {quoted(entry_id)} in session {quoted(self.session_id)}"
            ).about(self.session_id)
        return self._at(position)

    def entries_upto(self, version: int) -> list[tuple[Entry, int]]:
        """Every entry appended by ``version``, with the version that appended it."""
        whole = self.whole()
        end = bisect_right(whole._entry_versions, version)
        return list(zip(whole.entries[:end], whole._entry_versions[:end], strict=True))

    def entry_version(self, position: int) -> int:
        if not self._holds(position) and self._loader is not None:
            return self.whole().entry_version(position)
        return self._entry_versions[position - self._base]

    def version_at_time(self, moment: datetime) -> int:
        """The last version recorded at or before ``moment``."""
        version = bisect_right(self._event_times, moment)
        if version == 0:
            if self._loader is not None:
                return self.whole().version_at_time(moment)
            raise VersionOutOfRange(
                f"session {quoted(self.session_id)} did not exist yet at {moment.isoformat()}; "
                f"it starts at {self._event_times[0].isoformat()}"
            ).about(self.session_id)
        return version + self._time_offset

    def resolve_version(self, version: int | None) -> int:
        if version is None or version == 0:
            return self.version
        if not 1 <= version <= self.version:
            raise VersionOutOfRange(
                f"version {version} is out of range; session {quoted(self.session_id)} has "
                f"versions 1 to {self.version}"
            ).about(self.session_id)
        return version

    def _earlier(self, version: int) -> Self | None:
        """The whole history, when this one (loaded from a cut) cannot answer ``version``."""
        if self._loader is not None and (
            version < self._complete_from or self._latest(version) is UNKNOWN_CUT
        ):
            return self.whole()
        return None

    def durable_log(self, version: int | None = None) -> DurableLog:
        version = self.resolve_version(version)
        if (whole := self._earlier(version)) is not None:
            return whole.durable_log(version)
        return self._durable_log(version, self._latest(version))

    def _durable_log(self, version: int, compaction: RecordedCompaction | None) -> DurableLog:
        end = bisect_right(self._entry_versions, version) + self._base
        floor, cleared_at = self._floor(version)
        if compaction is not None and compaction.version < cleared_at:
            compaction = None  # cleared with everything before it
        start = max(compaction.first_kept_position if compaction else 0, floor)
        summary_tokens = compaction.compaction.summary_tokens if compaction else 0
        hidden = self._retracted(version)
        pinned = self._pinned_before(start, floor, hidden)
        entries = self.entries[start - self._base : end - self._base]
        versions = self._entry_versions[start - self._base : end - self._base]
        if hidden:
            shown = [i for i, p in enumerate(range(start, end)) if p not in hidden]
            entries, versions = [entries[i] for i in shown], [versions[i] for i in shown]
        return DurableLog(
            session_id=self.session_id,
            version=version,
            compaction=compaction,
            entries=entries,
            entry_versions=versions,
            first_position=start,
            total_tokens=self._log_tokens(start, end, summary_tokens, floor, hidden),
            pinned=[entry for entry, _ in pinned],
            pinned_versions=[version for _, version in pinned],
            erasures=tuple(self._erasures),
        )

    def tokens_if_cut_at(self, position: int, summary_tokens: int) -> int:
        """The durable log's tokens now, were it compacted to keep ``position`` on."""
        if position < self._base:
            return self.whole().tokens_if_cut_at(position, summary_tokens)
        floor, _ = self._floor(self.version)
        end = self._base + len(self.entries)
        hidden = self._retracted(self.version)
        return self._log_tokens(max(position, floor), end, summary_tokens, floor, hidden)

    def prompt_tokens_if_cut_at(self, position: int, summary_tokens: int) -> int:
        """The prompt's message tokens now, were it compacted to keep ``position`` on:
        the summary, the system entries, and the kept entries as the model sees them."""
        if position < self._base:
            return self.whole().prompt_tokens_if_cut_at(position, summary_tokens)
        kept = sum(
            e.token_count
            for e in self.prompt_view().as_shown()
            if e.role is Role.SYSTEM or self._positions[e.id] >= position
        )
        return summary_tokens + kept

    def covered_if_cut_at(self, position: int) -> list[Entry]:
        """The entries a compaction keeping ``position`` on would replace: the durable
        log's before it, its pinned system entries aside (as the engine's plan counts)."""
        if position < self._base:
            return self.whole().covered_if_cut_at(position)
        return [
            e
            for e in self.prompt_view().log.entries
            if e.role is not Role.SYSTEM and self._positions[e.id] < position
        ]

    def prompt_tokens_if_pruned(self, decisions: Sequence[PruneDecision]) -> int:
        """The prompt's message tokens now (the system prompt aside), were ``decisions``
        recorded: each replaces the entry's current prune."""
        view = self.prompt_view()
        tokens = view.estimated_tokens - view.system_prompt.tokens.total
        for decision in decisions:
            if decision.entry_id not in {e.id for e in view.log.entries}:
                continue
            entry = self.entry(decision.entry_id)
            guarded = view.guarded.get(decision.entry_id, ())
            before = tokens_taken_out(entry, view.pruned.get(decision.entry_id), guarded)
            tokens -= tokens_taken_out(entry, decision, guarded) - before
        return tokens

    def _pinned_before(
        self, start: int, floor: int = 0, hidden: frozenset[int] = frozenset()
    ) -> list[tuple[Entry, int]]:
        """The system entries a cut at ``start`` keeps ahead of the summary, with the
        versions that appended them (none from before a clear at ``floor``, and none of
        the ``hidden`` positions, retracted)."""
        early = [(e, v) for p, e, v in self._early_pinned if p >= floor and p not in hidden]
        return early + [
            (self._at(p), self._entry_versions[p - self._base])
            for p in self._system_positions[: bisect_left(self._system_positions, start)]
            if p >= floor and p not in hidden
        ]

    def _log_tokens(
        self, start: int, end: int, summary_tokens: int, floor: int, hidden: frozenset[int]
    ) -> int:
        pinned = sum(entry.token_count for entry, _ in self._pinned_before(start, floor, hidden))
        kept = self._token_prefix[end - self._base] - self._token_prefix[start - self._base]
        kept -= sum(self._at(p).token_count for p in hidden if start <= p < end)
        return summary_tokens + pinned + kept

    def _floor(self, version: int) -> tuple[int, int]:
        """Where the log starts at ``version`` for the latest clear by then, and that
        clear's version: (0, 0) when none."""
        index = bisect_right(self._clears, version, key=lambda c: c[0])
        return (self._clears[index - 1][1], self._clears[index - 1][0]) if index else (0, 0)

    def _retracted(self, version: int) -> frozenset[int]:
        """Positions of the entries retracted by ``version``."""
        return frozenset(p for v, p in self._retractions if v <= version)

    def withdrawn(self, version: int) -> dict[int, str]:
        """Position -> how it left the views by ``version``: "retracted" or "cleared", with
        the version that did it (for the audit of what the model saw)."""
        left = {p: f"retracted at version {v}" for v, p in self._retractions if v <= version}
        start = 0
        for cleared_at, floor in self._clears:
            if cleared_at > version:
                break
            for position in range(start, floor):
                left.setdefault(position, f"cleared at version {cleared_at}")
            start = max(start, floor)
        return left

    def prompt_view(self, version: int | None = None) -> PromptView:
        version = self.resolve_version(version)
        if (whole := self._earlier(version)) is not None:
            return whole.prompt_view(version)
        return self._prompt_view(self.durable_log(version))

    def prompt_view_with_cut(self, compaction: RecordedCompaction | None) -> PromptView:
        """The prompt view now, were ``compaction`` the one in force (None: no cut)."""
        whole = self.whole()
        return whole._prompt_view(whole._durable_log(whole.version, compaction))

    def _prompt_view(self, log: DurableLog) -> PromptView:
        end = bisect_right(self._entry_versions, log.version) + self._base
        in_log = range(log.first_position, end)
        hidden = self._retracted(log.version)
        pruned: dict[str, PruneDecision] = {}
        for prune in self._prunes:
            if prune.version > log.version:
                break
            for decision in prune.decisions:
                position = self._positions.get(decision.entry_id, -1)
                if position in in_log and position not in hidden:
                    pruned[decision.entry_id] = decision
        settings_at = self._latest_settings(log.version)
        system_prompt = self.system_prompt(log.version)
        tokens = system_prompt.tokens.total + log.total_tokens
        guarded = {}
        first = bisect_left(self._guarded, log.first_position, key=lambda g: g[0])
        for position, entry_id, decisions, saving in self._guarded[first:]:
            if position >= end:
                break
            if position in hidden:
                continue
            guarded[entry_id] = decisions
            if entry_id not in pruned:
                tokens -= saving
        tokens -= sum(
            tokens_taken_out(
                self._at(self._positions[entry_id]), decision, guarded.get(entry_id, ())
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
            self.learned(log.version, settings_at[1].model),
        )

    def log_tail(self) -> tuple[Entry, int, str] | None:
        """The durable log's latest entry now, the prompt tokens it takes as shown, and
        the id of the entry before it ("" when none); None when the log is empty."""
        view = self.prompt_view()
        entries = view.log.entries
        if not entries:
            return None
        before = entries[-2].id if len(entries) > 1 else ""
        return entries[-1], view.as_shown()[-1].token_count, before

    def system_prompt(self, version: int | None = None) -> SystemPrompt:
        """The system prompt in force at ``version`` (empty if none was ever set)."""
        version = self.resolve_version(version)
        if (whole := self._earlier(version)) is not None:
            return whole.system_prompt(version)
        index = bisect_right(self._system_prompts, version, key=lambda s: s[0])
        return self._system_prompts[index - 1][1] if index else SystemPrompt()
