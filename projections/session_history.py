"""The read side of one session: an incremental fold over its events.

Everything in a session is append-only, so the state at any earlier version
is a prefix of what is kept here: the entries appended by then, the latest
compaction recorded by then, the prunes recorded by then. "Replay to version
N" is therefore a bisect, not a re-fold, and the same object answers both the
current views and any past ones. (An undone compaction is a change of cut
recorded at its own version, so the cut in force at N is a bisect too.)

A history may also be loaded from the latest cut (``from_cut``): the events from
the one that appended the first kept entry on, plus the few earlier ones still in
force (settings, system prompt, pinned system entries). It answers the views from
the latest compaction on at once; asked about anything earlier, it folds the
whole session once (``whole``) and hands the question to that.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import assert_never

from domain.compaction import Compaction
from domain.content import Entry, Role, block_texts
from domain.context.calibration import LearnedLimits
from domain.context.shown import tokens_taken_out
from domain.context.tool_result_guard import ToolResultDecision
from domain.errors import (
    EntryNotFound,
    VersionOutOfRange,
    quoted,
)
from domain.pruning import PruneDecision
from domain.session import Session, SessionEvent
from domain.settings import SessionSettings
from domain.system_prompt import SystemPrompt
from projections.history_views import (
    DurableLog,
    PromptView,
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


# Earlier events within this many versions of each other are read in one query.
EARLIER_SPAN_READ_WHOLE = 32


def load_from_cut(
    session: Session, fetch: Callable[[int, int | None], list[SessionEvent]]
) -> SessionHistory | None:
    """The session's history loaded from its latest cut, reading only what the prompt
    keeps (``fetch(after, upto)`` reads events), or None when the aggregate does not
    know where that is (no compaction in force, or one recorded before it noted it)."""
    start = session.cold_start
    if start is None:
        return None
    compaction_version, position, first_kept_version, needed = start
    settings = None
    cut_settings_version = session.cuts[-1][3]
    if session.settings_version == cut_settings_version < first_kept_version:
        # Unchanged since the cut: the aggregate holds them, no read needed.
        settings = (
            cut_settings_version,
            session.settings,
            session.context_window_tokens,
            session.context_window_source,
        )
        needed = tuple(v for v in needed if v != cut_settings_version)
    tail = fetch(first_kept_version - 1, None)
    recorded = next((e for e in tail if e.originator_version == compaction_version), None)
    first = tail[0] if tail else None
    if not isinstance(recorded, Session.CompactionRecorded) or first is None:
        return None
    if isinstance(first, Session.EntriesAppended):
        entries = list(first.entries)
    elif isinstance(first, Session.ToolCallsAbandoned):
        entries = [first.entry]
    else:
        return None
    kept_id = recorded.compaction.first_kept_entry_id
    index = next((i for i, e in enumerate(entries) if e.id == kept_id), None)
    if first.originator_version != first_kept_version or index is None:
        return None  # not what the aggregate said: fold it all
    earlier: list[SessionEvent] = []
    if needed and needed[-1] - needed[0] < EARLIER_SPAN_READ_WHOLE:
        # Usually all near the start (Started, the system prompt): one read.
        wanted = set(needed)
        earlier = [e for e in fetch(needed[0] - 1, needed[-1]) if e.originator_version in wanted]
    else:
        earlier = [event for version in needed for event in fetch(version - 1, version)]
    return SessionHistory.from_cut(
        session.id,
        earlier,
        tail,
        base_position=position - index,
        complete_from=compaction_version,
        system_positions=[(p, v) for p, v in session.system_entries or ()],
        loader=lambda: fetch(0, None),
        settings=settings,
    )


# Rough per-entry memory beyond its text: the objects, indexes and lists.
ENTRY_OVERHEAD_BYTES = 600


class SessionHistory:
    """All of one session's events, folded for fast reads at any version."""

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
        self._whole: SessionHistory | None = None
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
        self._overflows: list[Session.OverflowReported] = []
        # What the provider taught, as it changed: (version, model, limits after).
        self._learned: list[tuple[int, str, LearnedLimits]] = []
        self._abandonments: list[Session.ToolCallsAbandoned] = []
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
    ) -> SessionHistory:
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
            if isinstance(
                event, Session.Started | Session.SettingsChanged | Session.SystemPromptSet
            ):
                history._apply_one(event)
            if isinstance(event, Session.EntriesAppended):
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
    def loaded_whole(self) -> SessionHistory | None:
        """The whole history, if this one loaded from a cut had to fold it."""
        return self._whole

    def whole(self) -> SessionHistory:
        """This history with every event folded (itself, unless loaded from a cut)."""
        if self._loader is None:
            return self
        with self._lock:
            if self._whole is None:
                whole = SessionHistory(self.session_id)
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
            case Session.EntriesAppended():
                self._apply_entries(event.entries, event.guarded, version)
                for lesson in event.lessons or ():
                    learned = self.learned(version, lesson.model).after_tokens(
                        lesson, accepted=True
                    )
                    self._learned.append((version, lesson.model, learned))
            case Session.ToolCallsAbandoned():
                # The synthetic results are entries of the log like any other,
                # flagged in their metadata; the guard never trims them.
                self._apply_entries((event.entry,), (), version)
                self._abandonments.append(event)
            case Session.CompactionRecorded():
                recorded = RecordedCompaction(
                    event.compaction, event.first_kept_position, version, event.timestamp
                )
                self._compactions.append(recorded)
                self._stack.append(recorded)
                self._cuts.append((version, recorded))
                for model, *limits in event.limits:
                    self._learned.append((version, model, LearnedLimits.from_list(limits)))
            case Session.CompactionUndone():
                while self._stack and self._stack[-1].version >= event.compaction_version:
                    self._stack.pop()
                restored = self._stack[-1] if self._stack else None
                known = (restored.version if restored else 0) == event.restored_compaction_version
                self._cuts.append((version, self._held_cut(restored) if known else UNKNOWN_CUT))
                self._undos.append(
                    RecordedUndo(
                        event.compaction_version,
                        event.reason,
                        event.requested_by,
                        restored,
                        version,
                        event.timestamp,
                    )
                )
            case Session.CompactionRedone():
                by_version = {c.version: c for c in self._compactions}
                again = [by_version[v] for v in event.compaction_versions if v in by_version]
                self._stack.extend(again)
                top = event.compaction_versions[-1]
                cut = self._stack[-1] if self._stack and self._stack[-1].version == top else None
                self._cuts.append((version, self._held_cut(cut or UNKNOWN_CUT)))
                self._redos.append(
                    RecordedRedo(
                        event.undo_version,
                        event.reason,
                        event.requested_by,
                        tuple(again),
                        version,
                        event.timestamp,
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
                if event.window is not None:
                    model = event.window.model
                    learned = self.learned(version, model).after_window(event.window)
                    self._learned.append((version, model, learned))
                if event.lesson is not None:
                    model = event.lesson.model
                    learned = self.learned(version, model).after_tokens(
                        event.lesson, accepted=False
                    )
                    self._learned.append((version, model, learned))
            case Session.EntriesErased():
                # The content is gone from the store; a server holding it in
                # memory folds the session again (services.app.sessions).
                self._erasures.append(
                    RecordedErasure(
                        tuple(event.entry_ids),
                        tuple(event.tainted_compactions),
                        event.erased_by,
                        event.reason,
                        version,
                        event.timestamp,
                        event.erased_with,
                    )
                )
            case Session.SessionErased():
                self._erasures.append(
                    RecordedErasure(
                        (),
                        (),
                        event.erased_by,
                        event.reason,
                        version,
                        event.timestamp,
                        event.erased_with,
                    )
                )
            case Session.EntryRetracted():
                self._retractions.append((version, event.position))
                # Its results answer nothing now (what a cut may separate).
                self._answered_call_position.pop(event.position, None)
            case Session.SessionCleared():
                self._clears.append((version, event.position))
            case _:
                assert_never(event)

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
        for entry in entries:
            position = self._base + len(self.entries)
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
            if self._loader is not None and len(answered) < len(entry.tool_results):
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
            raise EntryNotFound(f"no entry {quoted(entry_id)} in session {quoted(self.session_id)}")
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
            )
        return version + self._time_offset

    def resolve_version(self, version: int | None) -> int:
        if version is None or version == 0:
            return self.version
        if not 1 <= version <= self.version:
            raise VersionOutOfRange(
                f"version {version} is out of range; session {quoted(self.session_id)} has "
                f"versions 1 to {self.version}"
            )
        return version

    def _earlier(self, version: int) -> SessionHistory | None:
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

    def prune_count(self, version: int | None = None) -> int:
        if self._loader is not None:
            return self.whole().prune_count(version)
        version = self.resolve_version(version)
        return bisect_right(self._prunes, version, key=lambda p: p.version)

    def failures(self, version: int | None = None) -> list[RecordedFailure]:
        if self._loader is not None:
            return self.whole().failures(version)
        version = self.resolve_version(version)
        return [f for f in self._failures if f.version <= version]

    def overflows_since(self, version: int) -> list[Session.OverflowReported]:
        if self._loader is not None and version < self._time_offset:
            return self.whole().overflows_since(version)
        return [o for o in self._overflows if o.originator_version > version]

    def abandonments(self, version: int | None = None) -> list[Session.ToolCallsAbandoned]:
        """The tool calls abandoned by ``version``, oldest first."""
        if self._loader is not None:
            return self.whole().abandonments(version)
        version = self.resolve_version(version)
        return [a for a in self._abandonments if a.originator_version <= version]

    def erasures(self) -> list[RecordedErasure]:
        """Every erasure, oldest first: erasure reaches back, so every version shows them.
        (A session with erasures is never loaded from a cut: services.app.sessions.)"""
        return list(self._erasures)

    def erased(self) -> RecordedErasure | None:
        """The erasure of the whole session, if it was erased whole."""
        return next((e for e in self.erasures() if e.whole_session), None)

    def tainted_compactions(self) -> set[int]:
        """Versions of the compactions whose summaries were erased with entries they covered."""
        return {v for e in self.erasures() for v in e.tainted_compactions}

    def compactions(self, version: int | None = None) -> list[RecordedCompaction]:
        """Every compaction recorded by ``version``, undone or not, oldest first."""
        if self._loader is not None:
            return self.whole().compactions(version)
        version = self.resolve_version(version)
        return [c for c in self._compactions if c.version <= version]

    def compactions_in_force(self, version: int | None = None) -> list[RecordedCompaction]:
        """The compactions in force at ``version``, oldest first: undoing the last one
        brings back the cut of the one before it."""
        if self._loader is not None:
            return self.whole().compactions_in_force(version)
        version = self.resolve_version(version)
        stack: list[RecordedCompaction] = []
        changes: list[RecordedCompaction | RecordedUndo | RecordedRedo] = [
            *self._compactions,
            *self._undos,
            *self._redos,
        ]
        for change in sorted(changes, key=lambda c: c.version):
            if change.version > version:
                break
            if isinstance(change, RecordedCompaction):
                stack.append(change)
            elif isinstance(change, RecordedUndo):
                stack = [c for c in stack if c.version < change.compaction_version]
            else:
                stack.extend(change.compactions)
        return stack

    def _recorded(self, compaction_version: int) -> RecordedCompaction | None:
        if not compaction_version:
            return None
        return next(c for c in self.whole()._compactions if c.version == compaction_version)

    def prompt_tokens_with_cut(self, compaction_version: int) -> int:
        """The prompt's message tokens (the system prompt aside) were the compaction
        recorded at ``compaction_version`` the cut in force (0: no cut)."""
        view = self.whole().prompt_view_with_cut(self._recorded(compaction_version))
        return view.estimated_tokens - view.system_prompt.tokens.total

    def cut_versions(self, compaction_version: int) -> tuple[int, int, int]:
        """For the compaction at that version: the versions that appended its first kept
        entry, and of the settings and the system prompt in force when it was recorded."""
        whole = self.whole()
        compaction = whole._recorded(compaction_version)
        assert compaction is not None
        return (
            whole.entry_version(compaction.first_kept_position),
            whole._latest_settings(compaction.version)[0],
            whole._system_prompt_version(compaction.version),
        )

    def _system_prompt_version(self, version: int) -> int:
        index = bisect_right(self._system_prompts, version, key=lambda s: s[0])
        return self._system_prompts[index - 1][0] if index else 0

    def redos(self, version: int | None = None) -> list[RecordedRedo]:
        if self._loader is not None:
            return self.whole().redos(version)
        version = self.resolve_version(version)
        return [r for r in self._redos if r.version <= version]

    def undos(self, version: int | None = None) -> list[RecordedUndo]:
        if self._loader is not None:
            return self.whole().undos(version)
        version = self.resolve_version(version)
        return [u for u in self._undos if u.version <= version]

    def _latest_settings(self, version: int) -> tuple[int, SessionSettings, int, str]:
        index = bisect_right(self._settings, version, key=lambda s: s[0])
        return self._settings[index - 1]

    def _latest(self, version: int) -> RecordedCompaction | None:
        """The compaction in force at ``version``."""
        index = bisect_right(self._cuts, version, key=lambda c: c[0])
        return self._cuts[index - 1][1] if index else None
