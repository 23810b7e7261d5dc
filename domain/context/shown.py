"""How a tool result is shown in the prompt, and the tokens that saves.

A prune decision (SPEC 3.4) and the tool-result guard's (SPEC 3.2) both
decide from the stored text; the shorter shows. Without either the result is
shown whole. Token savings are pro rata by
characters, since each entry is counted once, whole, at ingest.
"""

from __future__ import annotations

from collections.abc import Sequence

from domain.content import Entry, ToolResult, block_texts
from domain.context.tool_result_guard import ToolResultDecision
from domain.pruning import PruneDecision


def shown_result(
    result: ToolResult, pruned: PruneDecision | None, guarded: Sequence[ToolResultDecision]
) -> str:
    """A tool result as the model sees it: the shorter of its prune and its guard, else whole.

    Both decide from the stored text; whichever leaves less shows, so a prune
    never brings back what the guard kept out.
    """
    shown = [pruned.apply(result.content)] if pruned is not None else []
    shown += [g.apply(result.content) for g in guarded if g.tool_call_id == result.tool_call_id]
    return min(shown, key=len) if shown else result.content


def tokens_taken_out(
    entry: Entry, pruned: PruneDecision | None, guarded: Sequence[ToolResultDecision]
) -> int:
    """The tokens a tool result entry loses when pruned or guarded, pro rata by chars.

    Images and provider items beside the results stay shown: only the results' share
    of the entry's characters (and so of its tokens) is taken out of."""
    results = entry.tool_results
    before = sum(len(r.content) for r in results)
    if not before:
        return 0
    after = sum(len(shown_result(r, pruned, guarded)) for r in results)
    if len(results) == len(entry.content):
        return max(0, entry.token_count - entry.token_count * after // before)
    chars = sum(len(text) for text in block_texts(entry.content))
    tokens = entry.token_count * before // chars
    return max(0, tokens - tokens * after // before)


def guard_savings(entries: Sequence[Entry], guarded: Sequence[ToolResultDecision]) -> int:
    """The tokens the tool-result guard keeps out of the prompt for these entries."""
    if not guarded:
        return 0
    by_entry = {e.id: e for e in entries}
    return sum(
        tokens_taken_out(by_entry[d.entry_id], None, (d,))
        for d in guarded
        if d.entry_id in by_entry
    )
