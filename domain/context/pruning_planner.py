"""The pruning planner: which old tool results to trim or clear in the prompt view.

Two strategies, both returning :class:`~domain.pruning.PruneDecision` values
that the store records and re-applies; the durable log never changes and every
full output stays readable by entry id.

* :func:`plan_cache_ttl_prune` - SPEC 3.4 (seed 000, 13.6, OpenClaw's
  ``context-pruning/pruner.ts``). Rewriting the prompt prefix costs the
  provider's prompt cache, so it is done only once the cache has expired
  (``now - last_cache_touch >= ttl``). The newest assistant turns and
  everything before the first user message are protected; only tool results
  are pruned. When the prompt fills ``soft_trim_ratio`` of the window (in
  chars, window x 4) large results are trimmed to head + tail; if it still
  fills ``hard_clear_ratio`` and enough tool output is prunable, the oldest
  results are cleared until it does not.
* :func:`plan_recent_n_prune` - QwenPaw's variant (SPEC 3.2, seed 002): the
  newest ``recent_n`` tool results keep up to 50,000 bytes, older ones 3,000.

Per-tool allow/deny globs (:class:`ToolFilter`) limit both; a result's tool is
named by the call it answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any

from domain.content import Entry, Role, ToolResult, block_texts
from domain.pruning import PruneAction, PruneDecision
from domain.settings import PruningPolicy

CHARS_PER_TOKEN = 4
RECENT_N = 2
RECENT_MAX_BYTES = 50_000
OLD_MAX_BYTES = 3_000
# Of a trimmed result's byte budget in the recent-n mode, the share kept from its end.
RECENT_N_TAIL_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class ToolFilter:
    """Which tools' results may be pruned: globs, case-insensitive; deny wins.

    With no allow globs every tool not denied may be pruned.
    """

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    def allows(self, tool_name: str) -> bool:
        name = tool_name.lower()
        if any(fnmatchcase(name, glob.lower()) for glob in self.deny):
            return False
        return not self.allow or any(fnmatchcase(name, glob.lower()) for glob in self.allow)


@dataclass(frozen=True, slots=True)
class PrunePlan:
    decisions: tuple[PruneDecision, ...]
    reason: str
    # Characters the prompt holds before and after these decisions (existing ones applied).
    chars_before: int
    chars_after: int
    window_chars: int

    @property
    def ratio_before(self) -> float:
        return self.chars_before / self.window_chars if self.window_chars else 0.0

    @property
    def ratio_after(self) -> float:
        return self.chars_after / self.window_chars if self.window_chars else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "decisions": [d.to_dict() for d in self.decisions],
            "reason": self.reason,
            "chars_before": self.chars_before,
            "chars_after": self.chars_after,
            "window_chars": self.window_chars,
        }


def tool_names(entries: Sequence[Entry]) -> dict[str, str]:
    """Tool result entry id -> the tool's name, from the call the result answers
    (or the entry's ``toolName`` metadata when the call is not in ``entries``)."""
    calls = {c.id: c.name for e in entries for c in e.tool_calls}
    names: dict[str, str] = {}
    for entry in entries:
        if entry.role is Role.TOOL:
            answered = [
                calls[r.tool_call_id] for r in entry.tool_results if r.tool_call_id in calls
            ]
            names[entry.id] = answered[0] if answered else entry.metadata.get("toolName", "")
    return names


def _shown_chars(entry: Entry, decision: PruneDecision | None) -> int:
    """The characters of ``entry`` the model reads, with ``decision`` applied to its results."""
    if decision is None:
        return sum(map(len, block_texts(entry.content)))
    other = sum(
        map(len, block_texts(tuple(b for b in entry.content if not isinstance(b, ToolResult))))
    )
    return other + sum(len(decision.apply(r.content)) for r in entry.tool_results)


def _protected_bounds(
    entries: Sequence[Entry], keep_last_assistants: int
) -> tuple[int, int] | None:
    """[start, end) where results may be pruned: from the first user message up to the
    ``keep_last_assistants``-th last assistant message; None when that leaves nothing."""
    start = next((i for i, e in enumerate(entries) if e.role is Role.USER), None)
    if start is None:
        return None
    end = len(entries)
    if keep_last_assistants > 0:
        assistants = [i for i, e in enumerate(entries) if e.role is Role.ASSISTANT]
        if len(assistants) < keep_last_assistants:
            return None
        end = assistants[-keep_last_assistants]
    return (start, end) if start < end else None


def plan_cache_ttl_prune(
    entries: Sequence[Entry],
    window_tokens: int,
    policy: PruningPolicy,
    *,
    now: datetime,
    last_cache_touch: datetime | None,
    tool_filter: ToolFilter = ToolFilter(),
    current: Mapping[str, PruneDecision] | None = None,
    extra_chars: int = 0,
) -> PrunePlan:
    """The prunes SPEC 3.4 asks for, given the durable log's ``entries``.

    ``current`` holds the decisions already in force (they are applied first and
    only replaced by stronger ones); ``extra_chars`` is what else the prompt
    carries (system prompt, compaction summary).
    """
    current = current or {}
    window_chars = window_tokens * CHARS_PER_TOKEN
    shown = {e.id: _shown_chars(e, current.get(e.id)) for e in entries}
    before = extra_chars + sum(shown.values())

    def nothing(reason: str) -> PrunePlan:
        return PrunePlan((), reason, before, before, window_chars)

    if policy.mode != "cache-ttl":
        return nothing(f"pruning mode is {policy.mode!r}")
    if last_cache_touch is None:
        return nothing("no prompt cache touch recorded yet")
    idle = (now - last_cache_touch).total_seconds()
    if idle < policy.ttl_seconds:
        return nothing(f"prompt cache still warm ({idle:.0f}s < ttl {policy.ttl_seconds}s)")
    if before < window_chars * policy.soft_trim_ratio:
        return nothing(
            f"prompt fills {before / window_chars:.0%} of the window, under "
            f"soft_trim_ratio {policy.soft_trim_ratio:.0%}"
        )
    bounds = _protected_bounds(entries, policy.keep_last_assistants)
    if bounds is None:
        return nothing("every tool result is protected (newest assistants or before first user)")
    names = tool_names(entries)
    prunable = [
        e
        for e in entries[bounds[0] : bounds[1]]
        if e.role is Role.TOOL
        and tool_filter.allows(names.get(e.id, ""))
        and not _cleared(current.get(e.id))
    ]
    total = before
    decisions: dict[str, PruneDecision] = {}
    for entry in prunable:
        raw = sum(len(r.content) for r in entry.tool_results)
        if raw <= policy.soft_trim_max_chars:
            continue
        trim = PruneDecision(
            entry.id,
            PruneAction.SOFT_TRIM,
            policy.soft_trim_head_chars,
            policy.soft_trim_tail_chars,
        )
        trimmed = _shown_chars(entry, trim)
        if trimmed < shown[entry.id]:
            decisions[entry.id] = trim
            total += trimmed - shown[entry.id]
            shown[entry.id] = trimmed
    prunable_chars = sum(shown[e.id] for e in prunable)
    if (
        total >= window_chars * policy.hard_clear_ratio
        and prunable_chars >= policy.min_prunable_tool_chars
    ):
        for entry in prunable:  # oldest first
            if total < window_chars * policy.hard_clear_ratio:
                break
            clear = PruneDecision(entry.id, PruneAction.HARD_CLEAR, 0, 0)
            total += _shown_chars(entry, clear) - shown[entry.id]
            shown[entry.id] = _shown_chars(entry, clear)
            decisions[entry.id] = clear
    actions = [d.action for d in decisions.values()]
    reason = (
        f"cache-ttl: cache idle {idle:.0f}s; prompt at {before / window_chars:.0%} of the "
        f"window; soft-trimmed {actions.count(PruneAction.SOFT_TRIM)}, hard-cleared "
        f"{actions.count(PruneAction.HARD_CLEAR)}; now at {total / window_chars:.0%}"
    )
    return PrunePlan(tuple(decisions.values()), reason, before, total, window_chars)


def _cleared(decision: PruneDecision | None) -> bool:
    return decision is not None and decision.action is PruneAction.HARD_CLEAR


def plan_recent_n_prune(
    entries: Sequence[Entry],
    window_tokens: int,
    *,
    recent_n: int = RECENT_N,
    recent_max_bytes: int = RECENT_MAX_BYTES,
    old_max_bytes: int = OLD_MAX_BYTES,
    tool_filter: ToolFilter = ToolFilter(),
    current: Mapping[str, PruneDecision] | None = None,
) -> PrunePlan:
    """QwenPaw's byte caps: the newest ``recent_n`` tool results keep up to
    ``recent_max_bytes``, older ones ``old_max_bytes``, as head + tail soft trims.

    Budgets are in UTF-8 bytes (CJK text is 3 bytes a character), converted to the
    characters a :class:`PruneDecision` keeps, 3/4 from the head and 1/4 from the tail.
    """
    current = current or {}
    window_chars = window_tokens * CHARS_PER_TOKEN
    shown = {e.id: _shown_chars(e, current.get(e.id)) for e in entries}
    before = sum(shown.values())
    names = tool_names(entries)
    results = [e for e in entries if e.role is Role.TOOL and tool_filter.allows(names[e.id])]
    total = before
    decisions: list[PruneDecision] = []
    for age, entry in enumerate(reversed(results)):
        limit = recent_max_bytes if age < recent_n else old_max_bytes
        text = "\n".join(r.content for r in entry.tool_results)
        if len(text.encode()) <= limit or _cleared(current.get(entry.id)):
            continue
        tail_bytes = int(limit * RECENT_N_TAIL_SHARE)
        trim = PruneDecision(
            entry.id,
            PruneAction.SOFT_TRIM,
            _chars_within(text, limit - tail_bytes),
            _chars_within(text[::-1], tail_bytes),
        )
        after = _shown_chars(entry, trim)
        if after < shown[entry.id]:
            decisions.append(trim)
            total += after - shown[entry.id]
            shown[entry.id] = after
    decisions.reverse()  # oldest first, like the log
    reason = (
        f"recent-n: newest {recent_n} tool results capped at {recent_max_bytes:,} bytes, "
        f"older at {old_max_bytes:,}; trimmed {len(decisions)}"
    )
    return PrunePlan(tuple(decisions), reason, before, total, window_chars)


def _chars_within(text: str, max_bytes: int) -> int:
    """How many leading characters of ``text`` fit in ``max_bytes`` of UTF-8."""
    used = 0
    for count, char in enumerate(text):
        used += len(char.encode())
        if used > max_bytes:
            return count
    return len(text)
