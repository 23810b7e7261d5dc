"""Folding a session's events into the state its history is read from.

``HistoryFold`` holds everything a session's events say, kept in the order they were
recorded (entries, cuts, prunes, settings, system prompts, ...), so any earlier
version is a prefix of it and a bisect away (see projections.session_history). It
also loads from a cut and, asked about what lies before it, folds the whole session.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Self, assert_never

from domain.compaction import Compaction
from domain.compaction_events import (
    CompactionFailed,
    CompactionRecorded,
    CompactionRedone,
    CompactionUndone,
)
from domain.content import Entry, Role, ToolCall, ToolResult, block_texts
from domain.context.calibration import LearnedLimits, Lesson
from domain.context.shown import tokens_taken_out
from domain.context.tool_result_guard import ToolResultDecision
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
from domain.settings import SessionSettings
from domain.system_prompt import SystemPrompt
from projections.history_views import (
    RecordedCompaction,
    RecordedErasure,
    RecordedFailure,
    RecordedPrune,
    RecordedRedo,
    RecordedUndo,
)

# In a history loaded from a cut: the cut in force is one whose entries it does not
# hold (an undo went back past its first event); the whole history answers.
UNKNOWN_CUT = RecordedCompaction(Compaction("", ""), -1, -1, datetime.min)

# Read from a module name: an enum member looked up on its class costs more, per entry.
_SYSTEM = Role.SYSTEM
# Rough per-entry memory beyond its text: the objects, indexes and lists.
ENTRY_OVERHEAD_BYTES = 600


class HistoryFold:
    """One session's events, folded: the state the reads bisect by version."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.version = 0
        # Loaded from a cut: the position of entries[0] and the first version of
        # the contiguous tail (0 and 1 for a whole history); views before
        # _complete_from ask the whole history, which _loader gives the events of.
        self._base = 0
        self._time_offset = 0
        self._complete_from = 0
        self._loader: Callable[[], list[SessionEvent]] | None = None
        self._whole: Self | None = None
        self._lock = threading.Lock()
        # System entries from before the tail: (position, entry, version).
        self._early_pinned: list[tuple[int, Entry, int]] = []
        # Positions whose tool results answer calls made before the tail.
        self._answers_before_base: list[int] = []
        self.entries: list[Entry] = []
        self._positions: dict[str, int] = {}
        # Parallel to entries: the version of the event that appended each one.
        self._entry_versions: list[int] = []
        # _token_prefix[i] is the token total of entries[:i].
        self._token_prefix: list[int] = [0]
        self._event_times: list[datetime] = []
        self._compactions: list[RecordedCompaction] = []
        # The compactions in force now, oldest first, and each change of the cut:
        # (version, compaction in force from then on).
        self._stack: list[RecordedCompaction] = []
        self._cuts: list[tuple[int, RecordedCompaction | None]] = []
        self._undos: list[RecordedUndo] = []
        self._redos: list[RecordedRedo] = []
        self._prunes: list[RecordedPrune] = []
        # (version, settings, window tokens, window source), oldest first.
        self._settings: list[tuple[int, SessionSettings, int, str]] = []
        self._call_positions: dict[str, int] = {}
        self._system_positions: list[int] = []
        self._system_prompts: list[tuple[int, SystemPrompt]] = []
        # (position, entry id, decisions, tokens the guard takes out), by position.
        self._guarded: list[tuple[int, str, tuple[ToolResultDecision, ...], int]] = []
        self._failures: list[RecordedFailure] = []
        self._erasures: list[RecordedErasure] = []
        # (version, position) of each retracted entry, and of each clear (where the log
        # starts after it), oldest first: the views from then on leave them out.
        self._retractions: list[tuple[int, int]] = []
        self._clears: list[tuple[int, int]] = []
        self._overflows: list[OverflowReported] = []
        # What the provider taught, as it changed: (version, model, limits after).
        self._learned: list[tuple[int, str, LearnedLimits]] = []
        # The versions at which the client had the session forget them, oldest first.
        self._forgets: list[int] = []
        self._abandonments: list[ToolCallsAbandoned] = []
        # Position of each tool result entry -> lowest position of a call it answers.
        self._answered_call_position: dict[int, int] = {}
        # Estimated memory held, for the cache that keeps histories.
        self.weight = 0

    # -- folding ------------------------------------------------------------------

    @classmethod
    def from_cut(
        cls,
        session_id: str,
        earlier: Sequence[SessionEvent],
        tail: Sequence[SessionEvent],
        *,
        base_position: int,
        complete_from: int,
        system_positions: Sequence[tuple[int, int]],
        loader: Callable[[], list[SessionEvent]],
        settings: tuple[int, SessionSettings, int, str] | None = None,
    ) -> Self:
        """A history of the events from ``tail[0]`` on, whose first entry is at
        ``base_position``, with the ``earlier`` events still in force (settings,
        system prompt, events holding system entries before the cut, whose
        (position, version) ``system_positions`` gives). It answers versions from
        ``complete_from`` on; ``loader`` gives every event, for the rest. ``settings``
        is (version, settings, window tokens, window source) in force at the cut,
        when the aggregate knows them and no earlier event is read for them."""
        history = cls(session_id)
        history._base = base_position
        history._complete_from = complete_from
        history._loader = loader
        start = tail[0].originator_version
        for event in earlier:
            version = event.originator_version
            if isinstance(event, Started | SettingsChanged | SystemPromptSet):
                history._apply_one(event)
            if isinstance(event, EntriesAppended):
                # Only its system entries, at the positions the aggregate noted.
                positions = sorted(p for p, v in system_positions if v == version)
                system = [e for e in event.entries if e.role is Role.SYSTEM]
                for position, entry in zip(positions, system, strict=True):
                    history._early_pinned.append((position, entry, version))
        history._early_pinned.sort(key=lambda p: p[0])
        if settings is not None:
            history._settings.append(settings)
            history._settings.sort(key=lambda s: s[0])
        history.version = start - 1
        history._time_offset = start - 1
        history.apply(tail)
        # Where an undo in the tail went back past it (then a redo came), those
        # versions are the whole history's to answer too.
        for (_, cut), (after, _) in zip(history._cuts, history._cuts[1:], strict=False):
            if cut is UNKNOWN_CUT:
                history._complete_from = max(history._complete_from, after)
        return history

    @property
    def is_whole(self) -> bool:
        return self._loader is None

    @property
    def loaded_whole(self) -> Self | None:
        """The whole history, if this one loaded from a cut had to fold it."""
        return self._whole

    def whole(self) -> Self:
        """This history with every event folded (itself, unless loaded from a cut)."""
        if self._loader is None:
            return self
        with self._lock:
            if self._whole is None:
                whole = type(self)(self.session_id)
                whole.apply(self._loader())
                self._whole = whole
            return self._whole

    def apply(self, events: Iterable[SessionEvent]) -> None:
        if self._loader is None:
            self._apply(events)
            return
        events = list(events)
        with self._lock:
            self._apply(events)
            if self._whole is not None:
                whole = self._whole
                whole._apply(e for e in events if e.originator_version > whole.version)

    def _apply(self, events: Iterable[SessionEvent]) -> None:
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
            case EntriesAppended():
                self._apply_entries(event.entries, event.guarded, version)
                for lesson in event.lessons or ():
                    self._learn(version, lesson.model, lesson, accepted=True)
            case ToolCallsAbandoned():
                # The synthetic results are entries of the log like any other,
                # flagged in their metadata; the guard never trims them.
                self._apply_entries((event.entry,), (), version)
                self._abandonments.append(event)
            case CompactionRecorded():
                recorded = RecordedCompaction(
                    event.compaction,
                    event.first_kept_position,
                    version,
                    event.timestamp,
                    event.idempotency_key,
                )
                self._compactions.append(recorded)
                self._stack.append(recorded)
                self._cuts.append((version, recorded))
                for model, *limits in event.limits:
                    self._learned.append((version, model, LearnedLimits.from_list(limits)))
            case CompactionUndone():
                while self._stack and self._stack[-1].version >= event.compaction_version:
                    self._stack.pop()
                restored = self._stack[-1] if self._stack else None
                known = (restored.version if restored else 0) == event.restored_compaction_version
                self._cuts.append((version, self._held_cut(restored) if known else UNKNOWN_CUT))
                self._undos.append(RecordedUndo.of(event, restored))
            case CompactionRedone():
                by_version = {c.version: c for c in self._compactions}
                again = [by_version[v] for v in event.compaction_versions if v in by_version]
                self._stack.extend(again)
                top = event.compaction_versions[-1]
                cut = self._stack[-1] if self._stack and self._stack[-1].version == top else None
                self._cuts.append((version, self._held_cut(cut or UNKNOWN_CUT)))
                self._redos.append(RecordedRedo.of(event, again))
            case PruneRecorded():
                self._prunes.append(
                    RecordedPrune(tuple(event.decisions), event.reason, version, event.timestamp)
                )
            case Started() | SettingsChanged():
                self._settings.append(
                    (
                        version,
                        event.settings,
                        event.context_window_tokens,
                        event.context_window_source,
                    )
                )
                if isinstance(event, SettingsChanged) and event.supersedes_learned_window:
                    self._learn(version, event.settings.model, None)
            case SystemPromptSet():
                self._system_prompts.append((version, event.system_prompt))
            case CompactionFailed():
                self._failures.append(RecordedFailure(event.failure, version, event.timestamp))
            case OverflowReported():
                self._overflows.append(event)
                for taught in (event.byte_limit, event.window, event.lesson):
                    if taught is not None:
                        self._learn(version, taught.model, taught)
            case EntriesErased() | SessionErased():
                # The content is gone from the store; a server holding it in
                # memory folds the session again (services.app.sessions).
                self._erasures.append(RecordedErasure.of(event))
            case EntryRetracted():
                self._retractions.append((version, event.position))
                # Its results answer nothing now (what a cut may separate).
                self._answered_call_position.pop(event.position, None)
            case SessionCleared():
                self._clears.append((version, event.position))
            case LearnedLimitsForgotten():
                for model, *_ in event.forgotten:
                    self._learned.append((version, model, self.learned(version, model).forgotten()))
                self._forgets.append(version)
            case _:
                assert_never(event)

    def _learn(
        self, version: int, model: str, lesson: Lesson | None, *, accepted: bool = False
    ) -> None:
        """``model``'s limits after ``lesson`` (None: the client set the window itself,
        which supersedes a learned one), from ``version`` on."""
        limits = self.learned(version, model)
        limits = (
            limits.without_window() if lesson is None else limits.after(lesson, accepted=accepted)
        )
        self._learned.append((version, model, limits))

    def learned(self, version: int, model: str) -> LearnedLimits:
        """What the provider taught about ``model`` by ``version``."""
        for at, learned_model, limits in reversed(self._learned):
            if at <= version and learned_model == model:
                return limits
        return LearnedLimits()

    def _held_cut(self, cut: RecordedCompaction | None) -> RecordedCompaction | None:
        """``cut``, or UNKNOWN_CUT when this history (loaded from a cut) does not hold
        the entries it keeps: an undo went back past the tail, or named a compaction
        recorded before it. Views then ask the whole history (see _earlier)."""
        if self._loader is None:
            return cut
        if (cut.first_kept_position if cut else 0) < self._base:
            return UNKNOWN_CUT
        return cut

    def _apply_entries(
        self,
        entries: Sequence[Entry],
        guarded_decisions: Sequence[ToolResultDecision],
        version: int,
    ) -> None:
        # Once per entry folded (every kept entry of a cold load): the lists held in
        # locals, and one look at each block for the calls and results it makes.
        held, positions, call_positions = self.entries, self._positions, self._call_positions
        versions, token_prefix = self._entry_versions, self._token_prefix
        from_cut = self._loader is not None
        for entry in entries:
            position = self._base + len(held)
            held.append(entry)
            positions[entry.id] = position
            versions.append(version)
            token_prefix.append(token_prefix[-1] + entry.token_count)
            if entry.role is _SYSTEM:
                self._system_positions.append(position)
            self.weight += ENTRY_OVERHEAD_BYTES + sum(map(len, block_texts(entry.content)))
            results: list[ToolResult] = []
            for block in entry.content:
                if isinstance(block, ToolCall):
                    call_positions[block.id] = position
                elif isinstance(block, ToolResult):
                    results.append(block)
            if not results:
                continue
            # After every call of the entry is noted, as a result may answer one of them.
            answered = [
                call_positions[r.tool_call_id] for r in results if r.tool_call_id in call_positions
            ]
            if answered:
                self._answered_call_position[position] = min(answered)
            if from_cut and len(answered) < len(results):
                self._answers_before_base.append(position)
        guarded: dict[str, list[ToolResultDecision]] = {}
        for decision in guarded_decisions:
            guarded.setdefault(decision.entry_id, []).append(decision)
        for entry_id, decisions in guarded.items():
            position = self._positions[entry_id]
            saving = tokens_taken_out(self._at(position), None, decisions)
            self._guarded.append((position, entry_id, tuple(decisions), saving))

    def _at(self, position: int) -> Entry:
        return self.entries[position - self._base]

    def _holds(self, position: int) -> bool:
        return self._base <= position < self._base + len(self.entries)

    # -- what was in force at a version ------------------------------------------

    def _system_prompt_version(self, version: int) -> int:
        index = bisect_right(self._system_prompts, version, key=lambda s: s[0])
        return self._system_prompts[index - 1][0] if index else 0

    def _latest_settings(self, version: int) -> tuple[int, SessionSettings, int, str]:
        index = bisect_right(self._settings, version, key=lambda s: s[0])
        return self._settings[index - 1]

    def _latest(self, version: int) -> RecordedCompaction | None:
        """The compaction in force at ``version``."""
        index = bisect_right(self._cuts, version, key=lambda c: c[0])
        return self._cuts[index - 1][1] if index else None
