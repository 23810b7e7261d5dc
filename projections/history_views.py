"""What a session's history answers: the records of its compactions, undos, redos,
erasures, prunes and failures, the durable log and the prompt view."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from domain.compaction import Compaction, CompactionFailure
from domain.compaction_events import CompactionRedone, CompactionUndone
from domain.content import Entry, Role, ToolResult
from domain.context import shown
from domain.context.budget import ContextBudget, context_budget
from domain.context.calibration import LearnedLimits
from domain.context.shown import tokens_taken_out
from domain.context.tool_result_guard import ToolResultDecision
from domain.pruning import PruneDecision
from domain.session_events import EntriesErased, SessionErased
from domain.settings import SessionSettings
from domain.system_prompt import SystemPrompt


@dataclass(frozen=True, slots=True)
class RecordedCompaction:
    compaction: Compaction
    first_kept_position: int
    version: int
    timestamp: datetime
    # The key of the Compact call that recorded it ("" for any other).
    idempotency_key: str = ""


@dataclass(frozen=True, slots=True)
class RecordedUndo:
    compaction_version: int
    reason: str
    requested_by: str
    # The compaction in force after the undo (None: no cut, the log starts at 0).
    restored: RecordedCompaction | None
    version: int
    timestamp: datetime

    @classmethod
    def of(cls, event: CompactionUndone, restored: RecordedCompaction | None) -> RecordedUndo:
        return cls(
            event.compaction_version,
            event.reason,
            event.requested_by,
            restored,
            event.originator_version,
            event.timestamp,
        )


@dataclass(frozen=True, slots=True)
class RecordedErasure:
    """An erasure: of the whole session (no entry ids) or of some entries, by whom, when."""

    entry_ids: Sequence[str]
    tainted_compactions: Sequence[int]
    erased_by: str
    reason: str
    version: int
    timestamp: datetime
    # The session this fork was erased with (empty: its own erasure was asked for).
    erased_with: str = ""

    @property
    def whole_session(self) -> bool:
        return not self.entry_ids

    @classmethod
    def of(cls, event: EntriesErased | SessionErased) -> RecordedErasure:
        """The erasure an event records: of some entries, or of the whole session."""
        entry_ids: tuple[str, ...] = ()
        tainted: tuple[int, ...] = ()
        if isinstance(event, EntriesErased):
            entry_ids, tainted = tuple(event.entry_ids), tuple(event.tainted_compactions)
        return cls(
            entry_ids,
            tainted,
            event.erased_by,
            event.reason,
            event.originator_version,
            event.timestamp,
            event.erased_with,
        )


@dataclass(frozen=True, slots=True)
class RecordedRedo:
    """An undo taken back: ``compactions`` (oldest first) are in force again."""

    undo_version: int
    reason: str
    requested_by: str
    compactions: Sequence[RecordedCompaction]
    version: int
    timestamp: datetime

    @classmethod
    def of(cls, event: CompactionRedone, again: Sequence[RecordedCompaction]) -> RecordedRedo:
        return cls(
            event.undo_version,
            event.reason,
            event.requested_by,
            tuple(again),
            event.originator_version,
            event.timestamp,
        )


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
    # Every erasure of the session, whatever the version: erasure reaches back.
    erasures: Sequence[RecordedErasure] = ()

    @property
    def summary_tokens(self) -> int:
        """The tokens of the summary in force (0 without one)."""
        return self.compaction.compaction.summary_tokens if self.compaction else 0


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
    # What the provider taught about the model by this version.
    learned: LearnedLimits = field(default_factory=LearnedLimits)

    @property
    def window_tokens(self) -> int:
        """The window in force: the resolved one, or the provider's when it said less."""
        return self.learned.window(self.context_window_tokens)

    @property
    def window_source(self) -> str:
        learned = self.window_tokens != self.context_window_tokens
        return "learned" if learned else self.context_window_source

    @property
    def calibration(self) -> float:
        return self.learned.calibration or 1.0

    def budget(self, asked_tokens: int | None = None) -> ContextBudget:
        """What this view may hold (see domain.context.budget)."""
        return context_budget(
            self.window_tokens,
            self.settings.compaction,
            calibration=self.calibration,
            learned_reserve_tokens=self.learned.output_tokens,
            asked_tokens=asked_tokens,
        )

    @property
    def calibrated_tokens(self) -> int:
        """The estimate in the provider's tokens: the figure every budget compares."""
        return self.budget().provider_tokens(self.estimated_tokens)

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

    def largest_message(self) -> Entry | None:
        """The message the prompt keeps that needs the most tokens, tool results aside
        (the tool-result guard cuts those to the window): what any window must hold."""
        messages = [e for e in self.as_shown() if e.role is not Role.TOOL]
        return max(messages, key=lambda e: e.token_count, default=None)

    def largest_message_tokens(self) -> int:
        largest = self.largest_message()
        return largest.token_count if largest is not None else 0

    def as_sent(self) -> list[Entry]:
        """The pinned and kept entries as the model sees them: counted as shown, and their
        tool results holding the text shown. What a summariser is given."""
        sent = []
        for entry in self.as_shown():
            if entry.id in self.pruned or entry.id in self.guarded:
                content = tuple(
                    replace(b, content=self.shown_result(entry.id, b))
                    if isinstance(b, ToolResult)
                    else b
                    for b in entry.content
                )
                entry = replace(entry, content=content)
            sent.append(entry)
        return sent

    def tokens_shown_if(self, entry: Entry, decision: PruneDecision) -> int:
        """The tokens ``entry`` (as stored) would show were ``decision`` its prune."""
        guarded = self.guarded.get(entry.id, ())
        return entry.token_count - tokens_taken_out(entry, decision, guarded)

    def shown_result(self, entry_id: str, result: ToolResult) -> str:
        """A tool result as the model sees it in this view."""
        return shown.shown_result(result, self.pruned.get(entry_id), self.guarded.get(entry_id, ()))
