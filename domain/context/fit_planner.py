"""The plan that always fits: what to drop and trim when summarising was not enough.

SPEC 3.3's last fallback (pruneHistoryForContextShare: keep the newest messages
that fit, drop the rest), made to land every time, in this order:

1. Drop the oldest entries before the turn in progress: the earliest valid cut
   whose kept entries, beside the system prompt, the pinned entries and a
   summary of ``summary_tokens``, fit ``limit``.
2. Else keep the turn in progress from its start and trim its tool results
   (and any kept before it), oldest first, the newest last, a step at a time:
   to their head and tail, then to a shorter head and tail (a log's last line,
   where its error is, still shows), then cleared. Only the prompt view
   changes; the outputs stay stored.
3. Else cut inside the turn, carrying the user message that began it verbatim
   (the summary holds it word for word), so the model still reads what it was
   asked; the newest entries that fit stay.

What cannot fit even then (a user message and the entries the provider needs
with it, larger than the budget) is reported with its figures. All figures are
the store's estimate, as the prompt shows each entry.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from domain.content import Entry, Role
from domain.context.cuts import CallIndex, is_valid_cut, turn_start
from domain.pruning import PruneDecision

# The least room the note of a hard drop takes (how many entries went, their ids,
# that the store keeps them), in the store's estimate: what a message accepted
# beside the system prompt needs beside it once the history before it must go.
HARD_DROP_NOTE_TOKENS = 100


@dataclass(frozen=True, slots=True)
class Trim:
    """One way to show a tool result entry shorter, and its tokens shown that way."""

    decision: PruneDecision
    shown_tokens: int


@dataclass(frozen=True, slots=True)
class FitPlan:
    fits: bool
    # The position (in the entries given) of the first kept entry; None: no cut.
    cut: int | None
    # Entry id of the user message the summary carries verbatim (a cut inside its turn).
    carried: str | None
    tokens_before: int
    tokens_after: int
    limit_tokens: int
    reason: str
    prunes: tuple[PruneDecision, ...] = field(default_factory=tuple)

    def to_dict(self, entries: Sequence[Entry]) -> dict[str, object]:
        dropped = [e for e in entries[: self.cut or 0] if e.role is not Role.SYSTEM]
        return {
            "firstKeptEntryId": entries[self.cut].id if self.cut is not None else None,
            "droppedMessages": len(dropped),
            "droppedTokens": sum(e.token_count for e in dropped),
            "keptTokens": self.tokens_after,
            "budgetTokens": self.limit_tokens,
            "trimmedToolResults": len(self.prunes),
            "carriedUserMessage": self.carried or "",
            "reason": self.reason,
        }


def plan_fit(
    entries: Sequence[Entry],
    *,
    system_tokens: int,
    limit: int,
    summary_tokens: int,
    summary_in_force_tokens: int = 0,
    open_call_ids: Collection[str] = (),
    trims: Mapping[str, Sequence[Trim]] | None = None,
    cut_inside_turn: bool = True,
) -> FitPlan:
    """What to drop and trim so the prompt (``entries``, counted as shown, beside a
    system prompt of ``system_tokens``) fits ``limit``; see the module's order. A cut
    adds a summary of ``summary_tokens``, which replaces the one in force (of
    ``summary_in_force_tokens``); without a cut, the one in force stays."""
    trims = trims or {}
    calls = CallIndex(entries, open_call_ids)
    shown = {e.id: e.token_count for e in entries}
    pinned = sum(e.token_count for e in entries if e.role is Role.SYSTEM)
    # suffix[i]: the conversation tokens from position i on, as shown before any trim.
    suffix = [0] * (len(entries) + 1)
    for i in range(len(entries) - 1, -1, -1):
        conversation = entries[i].role is not Role.SYSTEM
        suffix[i] = suffix[i + 1] + (entries[i].token_count if conversation else 0)
    before = system_tokens + pinned + summary_in_force_tokens + suffix[0]
    start = turn_start(entries)
    last = len(entries) - 1 if start is None else start
    valid = [c for c in range(1, len(entries)) if is_valid_cut(entries, c, calls)]
    chosen_at: dict[int, PruneDecision] = {}  # position -> its trim
    saved: dict[int, int] = {}  # position -> tokens its trim saves

    def after(cut: int | None, carried: int = 0) -> int:
        start_at = cut or 0
        trimmed = sum(tokens for position, tokens in saved.items() if position >= start_at)
        summary = summary_tokens + carried if cut is not None else summary_in_force_tokens
        return system_tokens + pinned + summary + suffix[start_at] - trimmed

    def plan(cut: int | None, reason: str, carried: str | None = None) -> FitPlan:
        prunes = tuple(
            decision for position, decision in chosen_at.items() if cut is None or position >= cut
        )
        tokens = after(cut, shown[carried] if carried else 0)
        return FitPlan(tokens <= limit, cut, carried, before, tokens, limit, reason, prunes)

    # 1. The oldest before the turn in progress go.
    for cut in valid:
        if cut <= last and after(cut) <= limit:
            return plan(cut, f"dropped the oldest entries to fit {limit:,} tokens")
    # 2. Trim the tool results kept, oldest first, the newest last.
    latest_cut = max((c for c in valid if c <= last), default=None)
    for stage in range(max(map(len, trims.values()), default=0)):
        for position in range(latest_cut or 0, len(entries)):
            entry = entries[position]
            options = trims.get(entry.id, ())
            if len(options) <= stage or options[stage].shown_tokens >= shown[entry.id]:
                continue
            chosen_at[position] = options[stage].decision
            shown[entry.id] = options[stage].shown_tokens
            saved[position] = entry.token_count - shown[entry.id]
            if after(latest_cut) <= limit:
                return plan(
                    latest_cut,
                    f"kept the turn in progress and trimmed {len(chosen_at)} tool results",
                )
    # 3. Cut inside the turn, carrying its user message verbatim.
    if start is not None and cut_inside_turn:
        for inner in valid:
            if inner > start and after(inner, shown[entries[start].id]) <= limit:
                return plan(
                    inner,
                    "cut inside the turn in progress; its user message is carried verbatim",
                    entries[start].id,
                )
    best = plan(latest_cut, "")
    return FitPlan(
        False,
        best.cut,
        None,
        before,
        best.tokens_after,
        limit,
        f"even with every tool result cleared and the oldest entries dropped, the prompt "
        f"needs ~{best.tokens_after:,} tokens against {limit:,}: "
        + _largest(entries, shown, start),
        best.prunes,
    )


def least_loss_fit(
    entries: Sequence[Entry],
    *,
    system_tokens: int,
    limits: Sequence[int],
    summary_rooms: Sequence[int],
    carried_tokens: int = 0,
    summary_in_force_tokens: int = 0,
    open_call_ids: Collection[str] = (),
    trims: Mapping[str, Sequence[Trim]] | None = None,
) -> tuple[FitPlan, int]:
    """The plan that loses least of what the model reads: the turn in progress whole
    (its results trimmed, at any of the ``limits``, preferred in order) before a
    summary shrunk to the next of ``summary_rooms``, and either before a cut inside
    the turn, which leaves only its user message of it. ``carried_tokens``: a user
    message the summary carries besides. Answers the plan and its summary's room."""
    plan = None
    for inside in (False, True):
        for room in summary_rooms:
            for limit in limits:
                plan = plan_fit(
                    entries,
                    system_tokens=system_tokens,
                    limit=limit,
                    summary_tokens=room + carried_tokens,
                    summary_in_force_tokens=summary_in_force_tokens,
                    open_call_ids=open_call_ids,
                    trims=trims,
                    cut_inside_turn=inside,
                )
                if plan.fits:
                    return plan, room
    assert plan is not None, "no limits or no summary rooms"
    return plan, summary_rooms[-1]


def _largest(entries: Sequence[Entry], shown: Mapping[str, int], start: int | None) -> str:
    """What fills the prompt that nothing may drop: the turn in progress's largest."""
    turn = entries[start or 0 :]
    largest = max(turn, key=lambda e: shown[e.id], default=None)
    if largest is None:
        return "the system prompt alone fills it"
    return (
        f"the turn in progress holds {sum(shown[e.id] for e in turn):,} tokens, the largest "
        f"its {largest.role.value} entry {largest.id} ({shown[largest.id]:,} tokens)"
    )
