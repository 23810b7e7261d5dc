"""Where a compaction may cut the log, and where the turn in progress begins.

A cut (the first kept entry) never lands on a tool result, never leaves a tool
call before it with its result after it (or still to come), and never splits a
user message from the assistant's reply when it can help it. System entries
are pinned: kept whatever the cut. The turn in progress (the newest user
message and everything after it) is what the model is working on: a cut never
goes past its start unless nothing else would fit, and then the user message
is carried verbatim (see domain.context.fit_planner).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from domain.content import Entry, Role
from domain.errors import quoted


class CallIndex:
    """Where each tool call was made and which results answer which calls."""

    def __init__(self, entries: Sequence[Entry], open_call_ids: Collection[str] = ()) -> None:
        self.call_position: dict[str, int] = {}
        # Result entry position -> lowest position of a call it answers.
        self.answered: dict[int, int] = {}
        for position, entry in enumerate(entries):
            for made_call in entry.tool_calls:
                self.call_position[made_call.id] = position
            calls_answered = [
                self.call_position[r.tool_call_id]
                for r in entry.tool_results
                if r.tool_call_id in self.call_position
            ]
            if calls_answered:
                self.answered[position] = min(calls_answered)
        self.open_positions = sorted(
            self.call_position[c] for c in open_call_ids if c in self.call_position
        )
        # splitting[p]: a cut at p would leave a call before it and its result at or after
        # it (or still to come), counted by a sweep over the calls' spans.
        depth = [0] * (len(entries) + 1)
        spans = [(made, at) for at, made in self.answered.items() if made < at]
        spans += [(made, len(entries)) for made in self.open_positions]
        for made, at in spans:
            depth[made + 1] += 1
            depth[min(at + 1, len(entries))] -= 1
        self.splitting = [False] * len(entries)
        running = 0
        for position in range(len(entries)):
            running += depth[position]
            self.splitting[position] = running > 0
        self.first_conversation = next(
            (i for i, e in enumerate(entries) if e.role is not Role.SYSTEM), len(entries)
        )

    def split_call_before(self, cut: int) -> int | None:
        """The earliest call before ``cut`` whose result is at or after it (or still open)."""
        split = [call for at, call in self.answered.items() if at >= cut and call < cut]
        split += [call for call in self.open_positions if call < cut]
        return min(split, default=None)


def turn_start(entries: Sequence[Entry]) -> int | None:
    """The position of the newest user message: where the turn in progress begins."""
    for position in range(len(entries) - 1, -1, -1):
        if entries[position].role is Role.USER:
            return position
    return None


def is_valid_cut(entries: Sequence[Entry], position: int, calls: CallIndex) -> bool:
    """Whether the log may be cut to keep ``position`` on: a conversation entry that is
    not a tool result, with every call before it answered before it, and something
    before it to summarise."""
    return (
        entries[position].role not in (Role.TOOL, Role.SYSTEM)
        and not calls.splitting[position]
        and calls.first_conversation < position
    )


@dataclass(frozen=True, slots=True)
class CutChoice:
    """The position of the first kept entry, or None and why there is no valid cut."""

    position: int | None
    reason: str


def choose_cut(
    entries: Sequence[Entry],
    keep_recent_tokens: int,
    *,
    open_call_ids: Collection[str] = (),
    latest: int | None = None,
) -> CutChoice:
    """The first kept entry: about ``keep_recent_tokens`` of the newest entries are kept,
    never cutting after ``latest`` (the turn in progress), moved earlier until the cut is
    valid."""
    movable = [i for i, e in enumerate(entries) if e.role is not Role.SYSTEM]
    if not movable:
        return CutChoice(None, "nothing to compact: the log holds no conversation entries")
    kept = 0
    candidate: int | None = None
    for position in reversed(movable):
        kept += entries[position].token_count
        if kept >= keep_recent_tokens:
            candidate = position
            break
    if candidate is None:
        return CutChoice(
            None,
            f"nothing to compact: the whole log ({kept:,} tokens) is within "
            f"keep_recent_tokens ({keep_recent_tokens:,})",
        )
    reason = f"keeping about {keep_recent_tokens:,} tokens of the newest entries"
    if latest is not None and candidate > latest:
        candidate = latest
        reason = "keeping the turn in progress whole"
    calls = CallIndex(entries, open_call_ids)
    cut = valid_cut_at_or_before(entries, candidate, calls)
    if not any(entries[i].role is not Role.SYSTEM for i in range(cut)):
        return CutChoice(None, _why_no_cut_before(entries, candidate, latest, calls))
    return CutChoice(cut, reason)


def _why_no_cut_before(
    entries: Sequence[Entry], candidate: int, latest: int | None, calls: CallIndex
) -> str:
    """Why the only valid cut at or before ``candidate`` keeps the whole log: named by
    the entry the cut fell on, so the caller sees what holds it back (a large tool
    result, say, rather than the turn in progress)."""
    entry = entries[candidate]
    if candidate == latest and candidate == calls.first_conversation:
        return (
            "nothing to compact: the log is one turn, the one in progress, and a cut "
            "never goes past its start"
        )
    named = f"{entry.role.value} entry {quoted(entry.id)} ({entry.token_count:,} tokens)"
    if entry.role is Role.TOOL:
        why = ", a tool result, which must stay with the call that made it"
    elif calls.split_call_before(candidate) is not None:
        why = ", after a tool call whose result comes later (or is still to come)"
    elif candidate == latest:
        why = ", the start of the turn in progress"
    else:
        why = ""
    return (
        f"nothing to compact: the newest entries to keep reach back to {named}{why}; the "
        "only valid cut at or before it is the log's first entry, which would keep everything"
    )


def valid_cut_at_or_before(entries: Sequence[Entry], cut: int, calls: CallIndex) -> int:
    """The nearest cut at or before ``cut`` that separates nothing (0 when none)."""
    while True:
        moved = cut
        entry = entries[cut]
        if entry.role is Role.TOOL:
            # Cut at the assistant entry that made the call instead.
            moved = min(calls.answered.get(cut, cut - 1), cut - 1)
        else:
            split = calls.split_call_before(cut)
            if split is not None:
                moved = split
            elif entry.role is Role.ASSISTANT:
                previous = _previous_conversation_entry(entries, cut)
                if previous is not None and entries[previous].role is Role.USER:
                    moved = previous  # keep the user's message with its reply
        if moved == cut or moved < 0:
            return max(moved, 0)
        cut = moved


def _previous_conversation_entry(entries: Sequence[Entry], position: int) -> int | None:
    for i in range(position - 1, -1, -1):
        if entries[i].role is not Role.SYSTEM:
            return i
    return None
