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

Its roles live apart: projections.history_fold folds the events, history_reads
answers entries and views, history_records the records (compactions, undos, prunes,
erasures, ...); ``SessionHistory`` is all three. The records and views themselves
are in projections.history_views.
"""

from __future__ import annotations

from collections.abc import Callable

from domain.compaction_events import CompactionRecorded
from domain.session import Session, SessionEvent
from domain.session_events import EntriesAppended, ToolCallsAbandoned
from projections.history_records import HistoryRecords
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

__all__ = [
    "DurableLog",
    "PromptView",
    "RecordedCompaction",
    "RecordedErasure",
    "RecordedFailure",
    "RecordedPrune",
    "RecordedRedo",
    "RecordedUndo",
    "SessionHistory",
    "load_from_cut",
]


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
    if not isinstance(recorded, CompactionRecorded) or first is None:
        return None
    if isinstance(first, EntriesAppended):
        entries = list(first.entries)
    elif isinstance(first, ToolCallsAbandoned):
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


class SessionHistory(HistoryRecords):
    """All of one session's events, folded for fast reads at any version."""
