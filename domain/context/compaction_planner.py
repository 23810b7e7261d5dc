"""The compaction planner: where to cut, and how to chunk what is summarised.

SPEC 3.3 (seed 000, 13.5, OpenClaw's ``compaction.ts`` and Pi's
``findCutPoint``), as a pure plan that a dry run can return and an engine can
carry out:

* :func:`plan_compaction` - the cut that keeps about ``keep_recent_tokens`` of the
  newest entries (never past the start of the turn in progress), sized so that
  the summary and what is kept fit the budget's target (see domain.context.budget:
  under the threshold, the reserve floor free), with what comes before it chunked.
* :func:`chunk_for_summary` - the adaptive greedy chunking of what is
  summarised, sized for the summarising model's window (which may differ from
  the conversation's): every chunk, plus the output reserve and the rolling
  summary, fits that window. Messages too large to summarise at all are set
  apart with the seed's note.

Token counts are the entries' own as the prompt shows them (counted once at
ingest, less what the guard and prunes take out), in the store's estimate: the
budget converts its figures into that unit, so every rule compares one figure.
Where the plan cannot fit, domain.context.fit_planner takes over.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from domain.content import Entry, Role
from domain.context.budget import ContextBudget
from domain.context.cuts import CallIndex, choose_cut, is_valid_cut, turn_start

SAFETY_MARGIN = 1.2
BASE_CHUNK_RATIO = 0.4
MIN_CHUNK_RATIO = 0.15
SUMMARIZATION_OVERHEAD_TOKENS = 4_096
# The least a structured summary takes, whatever it covers.
MIN_SUMMARY_TOKENS = 200
OVERSIZED_WINDOW_SHARE = 0.5


def counted(tokens: int) -> int:
    """An entry's tokens with the 20% safety margin, as chunking counts them."""
    return math.ceil(tokens * SAFETY_MARGIN)


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
    # The prompt is expected at or under the target afterwards: under the threshold,
    # with the reserve floor free.
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
    budget: ContextBudget,
    *,
    system_tokens: int = 0,
    summariser_window_tokens: int | None = None,
    previous_summary_tokens: int = 0,
    open_call_ids: Collection[str] = (),
) -> CompactionPlan | CompactionRefused:
    """Plan a compaction of the prompt view's ``entries`` (the pinned and kept entries,
    counted as shown; the latest summary, ``previous_summary_tokens``, comes before
    them), beside a system prompt of ``system_tokens``, to fit ``budget``'s target.

    The cut keeps about ``keep_recent_tokens`` (less when the target leaves less room),
    never past the start of the turn in progress; it is refused when nothing before
    that start can go, or when what it keeps still would not fit (the fit planner
    then trims or drops more).
    """
    summary_budget = budget.in_estimate(budget.summary_max_tokens)
    pinned_tokens = sum(e.token_count for e in entries if e.role is Role.SYSTEM)
    room = budget.target_estimate - system_tokens - pinned_tokens - summary_budget
    if room <= 0:
        return CompactionRefused(
            f"no room to keep anything: the system prompt ({system_tokens:,} tokens), pinned "
            f"entries ({pinned_tokens:,}) and a summary ({summary_budget:,}) fill the target "
            f"of {budget.target_estimate:,}"
        )
    keep = min(budget.in_estimate(budget.keep_recent_tokens), room)
    latest = turn_start(entries)
    choice = choose_cut(entries, keep, open_call_ids=open_call_ids, latest=latest)
    if choice.position is None:
        return CompactionRefused(choice.reason)
    calls = CallIndex(entries, open_call_ids)
    cut = _fitting_cut(entries, choice.position, latest, room, calls)
    if cut is None:
        return CompactionRefused(
            "what the cut must keep (the turn in progress at least) does not fit the target "
            f"of {budget.target_estimate:,} tokens beside a summary"
        )
    summarised = [e for e in entries[:cut] if e.role is not Role.SYSTEM]
    pinned = [e for e in entries[:cut] if e.role is Role.SYSTEM]
    kept_tokens = sum(e.token_count for e in entries[cut:])
    tokens_before = previous_summary_tokens + sum(e.token_count for e in entries)
    summarised_tokens = previous_summary_tokens + sum(e.token_count for e in summarised)
    # The summary takes at most its budget, and, of a short history, about half of it.
    expected_summary = min(summary_budget, max(MIN_SUMMARY_TOKENS, summarised_tokens // 2))
    after = expected_summary + kept_tokens + pinned_tokens
    if after >= tokens_before:
        return CompactionRefused(
            f"compacting would not shrink the context: about {after:,} tokens after "
            f"(a summary of ~{expected_summary:,}) against {tokens_before:,} before"
        )
    summariser_window = summariser_window_tokens or budget.window_tokens
    chunking = chunk_for_summary(
        summarised, summariser_window, summary_budget_tokens=summary_budget
    )
    return CompactionPlan(
        first_kept_entry_id=entries[cut].id,
        summarised=EntryRange(summarised[0].id, summarised[-1].id, len(summarised)),
        chunks=chunking.chunks,
        oversized=chunking.oversized,
        pinned_entry_ids=tuple(e.id for e in pinned),
        tokens_before=tokens_before,
        estimated_tokens_after=after,
        summary_budget_tokens=summary_budget,
        kept_tokens=kept_tokens,
        pinned_tokens=sum(e.token_count for e in pinned),
        summarised_tokens=sum(e.token_count for e in summarised),
        chunk_ratio=chunking.chunk_ratio,
        max_chunk_tokens=chunking.max_chunk_tokens,
        summariser_window_tokens=summariser_window,
        leaves_reserve_floor=system_tokens + after <= budget.target_estimate,
        reason=choice.reason,
    )


def _fitting_cut(
    entries: Sequence[Entry], cut: int, latest: int | None, room: int, calls: CallIndex
) -> int | None:
    """``cut``, or the nearest valid later one (never past ``latest``) whose kept
    conversation entries fit ``room``; None when none does."""
    last = len(entries) - 1 if latest is None else latest
    for position in range(cut, last + 1):
        if position != cut and not is_valid_cut(entries, position, calls):
            continue
        kept = sum(e.token_count for e in entries[position:] if e.role is not Role.SYSTEM)
        if kept <= room:
            return position
    return None
