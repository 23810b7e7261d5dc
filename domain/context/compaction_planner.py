"""The compaction planner: when to compact, where to cut, and how to chunk the rest.

SPEC 3.3 (seed 000, 13.5, OpenClaw's ``compaction.ts`` and Pi's
``findCutPoint``), as a pure plan that a dry run can return and an engine can
carry out:

* :func:`should_compact` - the threshold rule (``threshold_ratio`` x window)
  and Pi's reserve rule (window - reserve, the reserve never below the
  20,000-token floor).
* :func:`choose_cut` - the first kept entry: the most recent entries worth
  about ``keep_recent_tokens`` are kept; the cut never lands on a tool result,
  never separates a tool call from its result or a user message from the
  assistant's reply, and never leaves nothing to summarise. System entries are
  pinned: kept whatever the cut, never summarised.
* :func:`chunk_for_summary` - the adaptive greedy chunking of what is
  summarised, sized for the summarising model's window (which may differ from
  the conversation's): every chunk, plus the output reserve and the rolling
  summary, fits that window. Messages too large to summarise at all are set
  apart with the seed's note.
* :func:`plan_hard_drop` - the fallback with no model: keep the newest
  messages that fit ``maxHistoryShare`` of the window, drop the rest.
* :func:`plan_compaction` - all of it as one :class:`CompactionPlan`.

Token counts are the entries' own (counted once at ingest); nothing here
tokenises.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from domain.content import Entry, Role
from domain.settings import CompactionPolicy

SAFETY_MARGIN = 1.2
BASE_CHUNK_RATIO = 0.4
MIN_CHUNK_RATIO = 0.15
SUMMARIZATION_OVERHEAD_TOKENS = 4_096
# The least a structured summary takes, whatever it covers.
MIN_SUMMARY_TOKENS = 200
OVERSIZED_WINDOW_SHARE = 0.5
MAX_HISTORY_SHARE = 0.8
RESERVE_FLOOR_TOKENS = 20_000


def counted(tokens: int) -> int:
    """An entry's tokens with the 20% safety margin, as chunking counts them."""
    return math.ceil(tokens * SAFETY_MARGIN)


# -- (a) when -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CompactionNeed:
    needed: bool
    # "threshold", "reserve", "threshold+reserve" or "" when not needed.
    reason: str
    estimated_tokens: int
    threshold_tokens: int
    # Compact above this: the window less the reserve (never less than the floor).
    reserve_limit_tokens: int


def should_compact(
    estimated_prompt_tokens: int,
    window_tokens: int,
    policy: CompactionPolicy,
    *,
    reserve_floor_tokens: int = RESERVE_FLOOR_TOKENS,
) -> CompactionNeed:
    """Whether the prompt is too full: over ``threshold_ratio`` of the window (seed 001,
    QwenPaw), or leaving less than the reserve free (Pi)."""
    threshold = int(window_tokens * policy.threshold_ratio)
    limit = window_tokens - max(policy.reserve_tokens, reserve_floor_tokens)
    rules = []
    if estimated_prompt_tokens > threshold:
        rules.append("threshold")
    # A reserve larger than the window leaves nothing to compare with.
    if limit > 0 and estimated_prompt_tokens > limit:
        rules.append("reserve")
    return CompactionNeed(bool(rules), "+".join(rules), estimated_prompt_tokens, threshold, limit)


def prompt_budget(window_tokens: int, policy: CompactionPolicy) -> int:
    """The most a prompt may hold before it must be compacted: the threshold, or less
    when the reserve asks for more room (a reserve larger than the window is ignored)."""
    threshold = int(window_tokens * policy.threshold_ratio)
    limit = window_tokens - max(policy.reserve_tokens, policy.reserve_floor_tokens)
    return min(threshold, limit) if limit > 0 else threshold


# -- (b) where --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CutChoice:
    """The position of the first kept entry, or None and why there is no valid cut."""

    position: int | None
    reason: str


class _Calls:
    """Where each tool call was made and which results answer which calls."""

    def __init__(self, entries: Sequence[Entry], open_call_ids: Collection[str]) -> None:
        self.call_position: dict[str, int] = {}
        # Result entry position -> lowest position of a call it answers.
        self.answered: dict[int, int] = {}
        for position, entry in enumerate(entries):
            for call in entry.tool_calls:
                self.call_position[call.id] = position
            made = [
                self.call_position[r.tool_call_id]
                for r in entry.tool_results
                if r.tool_call_id in self.call_position
            ]
            if made:
                self.answered[position] = min(made)
        self.open_positions = sorted(
            self.call_position[c] for c in open_call_ids if c in self.call_position
        )

    def split_call_before(self, cut: int) -> int | None:
        """The earliest call before ``cut`` whose result is at or after it (or still open)."""
        split = [call for at, call in self.answered.items() if at >= cut and call < cut]
        split += [call for call in self.open_positions if call < cut]
        return min(split, default=None)


def choose_cut(
    entries: Sequence[Entry],
    keep_recent_tokens: int,
    *,
    open_call_ids: Collection[str] = (),
) -> CutChoice:
    """The first kept entry: about ``keep_recent_tokens`` of the newest entries are kept,
    moved earlier until the cut is valid."""
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
    calls = _Calls(entries, open_call_ids)
    cut = _valid_cut_at_or_before(entries, candidate, calls)
    if not any(entries[i].role is not Role.SYSTEM for i in range(cut)):
        return CutChoice(
            None,
            "nothing to compact: the newest turn alone exceeds keep_recent_tokens and cannot "
            "be split without separating a tool call from its result",
        )
    return CutChoice(cut, f"keeping about {keep_recent_tokens:,} tokens of the newest entries")


def _valid_cut_at_or_before(entries: Sequence[Entry], cut: int, calls: _Calls) -> int:
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


# -- (c) how the summarised part is chunked ---------------------------------------------


@dataclass(frozen=True, slots=True)
class Chunk:
    entry_ids: tuple[str, ...]
    tokens: int
    # tokens with the safety margin: what chunking compared with the budget.
    counted_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_ids": list(self.entry_ids),
            "tokens": self.tokens,
            "counted_tokens": self.counted_tokens,
        }


@dataclass(frozen=True, slots=True)
class OversizedEntry:
    """An entry too large for the summariser: left out, with a note in the summary."""

    entry_id: str
    role: str
    tokens: int

    @property
    def note(self) -> str:
        return f"[Large {self.role} (~{round(self.tokens / 1000)}K tokens) omitted from summary]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "role": self.role,
            "tokens": self.tokens,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class Chunking:
    chunks: tuple[Chunk, ...]
    oversized: tuple[OversizedEntry, ...]
    chunk_ratio: float
    max_chunk_tokens: int
    # The most one summariser call's messages may count (chunk budget for a lone message).
    max_message_tokens: int


def adaptive_chunk_ratio(entries: Sequence[Entry], window_tokens: int) -> float:
    """``max(0.15, 0.4 - avgMsgTokens / window)``: smaller chunks when messages are big."""
    if not entries:
        return BASE_CHUNK_RATIO
    average = sum(e.token_count for e in entries) / len(entries)
    return max(MIN_CHUNK_RATIO, BASE_CHUNK_RATIO - average / window_tokens)


def chunk_for_summary(
    entries: Sequence[Entry],
    summariser_window_tokens: int,
    *,
    summary_budget_tokens: int = SUMMARIZATION_OVERHEAD_TOKENS,
) -> Chunking:
    """Greedy chunks of ``entries`` that each fit one call of the summarising model.

    Each call carries a chunk, the rolling summary so far (at most
    ``summary_budget_tokens``) and room for the output
    (``SUMMARIZATION_OVERHEAD_TOKENS``). Chunks are filled up to
    ``maxChunkTokens = window x chunkRatio - overhead``, counting each message x
    1.2; a message over that budget gets a chunk of its own. A message counting
    more than half the summariser's window (or more than a call can carry, for a
    very small window) is oversized: it is set apart, not chunked.
    """
    window = summariser_window_tokens
    ratio = adaptive_chunk_ratio(entries, window)
    room = window - SUMMARIZATION_OVERHEAD_TOKENS - summary_budget_tokens
    max_chunk = max(1, min(math.floor(window * ratio) - SUMMARIZATION_OVERHEAD_TOKENS, room))
    max_message = max(1, min(math.floor(window * OVERSIZED_WINDOW_SHARE), room))
    chunks: list[Chunk] = []
    oversized: list[OversizedEntry] = []
    ids: list[str] = []
    tokens = weighed = 0
    for entry in entries:
        weight = counted(entry.token_count)
        if weight > max_message:
            oversized.append(OversizedEntry(entry.id, entry.role.value, entry.token_count))
            continue
        if ids and weighed + weight > max_chunk:
            chunks.append(Chunk(tuple(ids), tokens, weighed))
            ids, tokens, weighed = [], 0, 0
        ids.append(entry.id)
        tokens += entry.token_count
        weighed += weight
    if ids:
        chunks.append(Chunk(tuple(ids), tokens, weighed))
    return Chunking(tuple(chunks), tuple(oversized), ratio, max_chunk, max_message)


# -- (d) the fallback with no model -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HardDropPlan:
    """Keep the newest messages that fit, drop the rest (pruneHistoryForContextShare)."""

    # None when not even the newest message fits beside the pinned ones.
    first_kept_entry_id: str | None
    dropped_messages: int
    dropped_tokens: int
    kept_tokens: int
    budget_tokens: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "firstKeptEntryId": self.first_kept_entry_id,
            "droppedMessages": self.dropped_messages,
            "droppedTokens": self.dropped_tokens,
            "keptTokens": self.kept_tokens,
            "budgetTokens": self.budget_tokens,
            "reason": self.reason,
        }


def plan_hard_drop(
    entries: Sequence[Entry],
    window_tokens: int,
    *,
    max_history_share: float = MAX_HISTORY_SHARE,
    open_call_ids: Collection[str] = (),
) -> HardDropPlan:
    """The newest entries whose tokens (x1.2, pinned system entries first) fit
    ``max_history_share`` of the window; the cut then moves later, never earlier, until
    it is valid, so the budget holds. Token figures are the entries' own counts."""
    budget = math.floor(window_tokens * max_history_share)
    pinned = [i for i, e in enumerate(entries) if e.role is Role.SYSTEM]
    used = sum(counted(entries[i].token_count) for i in pinned)
    cut = len(entries)
    for position in range(len(entries) - 1, -1, -1):
        if entries[position].role is Role.SYSTEM:
            continue
        weight = counted(entries[position].token_count)
        if used + weight > budget:
            break
        used += weight
        cut = position
    else:
        cut = 0
    calls = _Calls(entries, open_call_ids)
    while cut < len(entries) and (
        entries[cut].role in (Role.TOOL, Role.SYSTEM) or calls.split_call_before(cut) is not None
    ):
        cut += 1
    dropped = [e for e in entries[:cut] if e.role is not Role.SYSTEM]
    kept = [e for i, e in enumerate(entries) if i >= cut or e.role is Role.SYSTEM]
    first = entries[cut].id if cut < len(entries) else None
    if first is None:
        reason = f"not even the newest message fits {max_history_share:.0%} of the window"
    elif not dropped:
        reason = "everything fits; nothing dropped"
    else:
        reason = f"dropped the oldest {len(dropped)} entries to fit {budget:,} tokens"
    return HardDropPlan(
        first,
        len(dropped),
        sum(e.token_count for e in dropped),
        sum(e.token_count for e in kept),
        budget,
        reason,
    )


# -- (e) the plan ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EntryRange:
    first_id: str
    last_id: str
    count: int


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What a compaction would do: the dry run's answer, and the engine's instructions."""

    first_kept_entry_id: str
    summarised: EntryRange
    chunks: tuple[Chunk, ...]
    oversized: tuple[OversizedEntry, ...]
    pinned_entry_ids: tuple[str, ...]
    tokens_before: int
    # summary budget + kept + pinned
    estimated_tokens_after: int
    summary_budget_tokens: int
    kept_tokens: int
    pinned_tokens: int
    summarised_tokens: int
    chunk_ratio: float
    max_chunk_tokens: int
    summariser_window_tokens: int
    # At least the reserve floor is free in the conversation's window afterwards.
    leaves_reserve_floor: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "first_kept_entry_id": self.first_kept_entry_id,
            "summarised": {
                "first_id": self.summarised.first_id,
                "last_id": self.summarised.last_id,
                "count": self.summarised.count,
            },
            "chunks": [c.to_dict() for c in self.chunks],
            "oversized": [o.to_dict() for o in self.oversized],
            "pinned_entry_ids": list(self.pinned_entry_ids),
            "tokens_before": self.tokens_before,
            "estimated_tokens_after": self.estimated_tokens_after,
            "summary_budget_tokens": self.summary_budget_tokens,
            "kept_tokens": self.kept_tokens,
            "pinned_tokens": self.pinned_tokens,
            "summarised_tokens": self.summarised_tokens,
            "chunk_ratio": self.chunk_ratio,
            "max_chunk_tokens": self.max_chunk_tokens,
            "summariser_window_tokens": self.summariser_window_tokens,
            "leaves_reserve_floor": self.leaves_reserve_floor,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class CompactionRefused:
    reason: str


def plan_compaction(
    entries: Sequence[Entry],
    window_tokens: int,
    policy: CompactionPolicy,
    *,
    summariser_window_tokens: int | None = None,
    previous_summary_tokens: int = 0,
    summary_budget_tokens: int = SUMMARIZATION_OVERHEAD_TOKENS,
    open_call_ids: Collection[str] = (),
    entries_since_last_compaction: int | None = None,
    reserve_floor_tokens: int = RESERVE_FLOOR_TOKENS,
) -> CompactionPlan | CompactionRefused:
    """Plan a compaction of the durable log's ``entries`` (those after the latest
    compaction's summary, whose size is ``previous_summary_tokens``).

    ``entries_since_last_compaction=0`` refuses: the log already ends in a compaction.
    """
    if entries_since_last_compaction == 0:
        return CompactionRefused("nothing to compact: no entries since the last compaction")
    choice = choose_cut(entries, policy.keep_recent_tokens, open_call_ids=open_call_ids)
    if choice.position is None:
        return CompactionRefused(choice.reason)
    cut = choice.position
    summarised = [e for e in entries[:cut] if e.role is not Role.SYSTEM]
    pinned = [e for e in entries[:cut] if e.role is Role.SYSTEM]
    kept_tokens = sum(e.token_count for e in entries[cut:])
    pinned_tokens = sum(e.token_count for e in pinned)
    tokens_before = previous_summary_tokens + sum(e.token_count for e in entries)
    summarised_tokens = previous_summary_tokens + sum(e.token_count for e in summarised)
    # The summary takes at most its budget, and, of a short history, about half of it.
    expected_summary = min(summary_budget_tokens, max(MIN_SUMMARY_TOKENS, summarised_tokens // 2))
    after = expected_summary + kept_tokens + pinned_tokens
    if after >= tokens_before:
        return CompactionRefused(
            f"compacting would not shrink the context: about {after:,} tokens after "
            f"(a summary of ~{expected_summary:,}) against {tokens_before:,} before"
        )
    summariser_window = summariser_window_tokens or window_tokens
    chunking = chunk_for_summary(
        summarised, summariser_window, summary_budget_tokens=summary_budget_tokens
    )
    return CompactionPlan(
        first_kept_entry_id=entries[cut].id,
        summarised=EntryRange(summarised[0].id, summarised[-1].id, len(summarised)),
        chunks=chunking.chunks,
        oversized=chunking.oversized,
        pinned_entry_ids=tuple(e.id for e in pinned),
        tokens_before=tokens_before,
        estimated_tokens_after=after,
        summary_budget_tokens=summary_budget_tokens,
        kept_tokens=kept_tokens,
        pinned_tokens=pinned_tokens,
        summarised_tokens=sum(e.token_count for e in summarised),
        chunk_ratio=chunking.chunk_ratio,
        max_chunk_tokens=chunking.max_chunk_tokens,
        summariser_window_tokens=summariser_window,
        leaves_reserve_floor=window_tokens - after >= reserve_floor_tokens,
        reason=choice.reason,
    )
