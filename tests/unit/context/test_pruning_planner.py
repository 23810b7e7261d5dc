"""Pruning trims and clears old tool results, only when worth it, never the protected ones."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from domain.content import Entry
from domain.context.pruning_planner import (
    ToolFilter,
    plan_cache_ttl_prune,
    plan_recent_n_prune,
    tool_names,
)
from domain.pruning import PruneAction, PruneDecision
from domain.settings import PruningPolicy
from tests.unit.pi_transcript import turns
from tests.unit.support import Tracked, assistant, call, tool, user

WINDOW = 100_000  # 400,000 chars: soft trim from 120,000, hard clear from 200,000
POLICY = PruningPolicy(mode="cache-ttl")
TOUCH = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LATER = TOUCH + timedelta(minutes=5)


def _session(sizes: list[int], tool_name: str = "read") -> list[Entry]:
    """A bootstrap read before the user speaks, one call per size, then three short turns."""
    entries = [
        assistant("", id="boot", calls=[call("c-boot", "read")]),
        tool("c-boot", "B" * 30_000, id="t-boot"),
        user("please refactor", id="u0"),
    ]
    for i, size in enumerate(sizes):
        entries.append(assistant("", id=f"a{i}", calls=[call(f"c{i}", tool_name)]))
        entries.append(tool(f"c{i}", f"{i}:" + "x" * (size - len(f"{i}:")), id=f"t{i}"))
    for i in range(3):
        entries.append(assistant(f"step {i}", id=f"last{i}", calls=[call(f"cl{i}", "read")]))
        entries.append(tool(f"cl{i}", "R" * 20_000, id=f"tl{i}"))
    return entries


def test_nothing_happens_while_the_cache_is_warm_or_pruning_is_off() -> None:
    entries = _session([50_000] * 4)
    warm = plan_cache_ttl_prune(
        entries, WINDOW, POLICY, now=LATER - timedelta(seconds=1), last_cache_touch=TOUCH
    )
    assert warm.decisions == ()
    assert "warm" in warm.reason
    off = plan_cache_ttl_prune(entries, WINDOW, PruningPolicy(), now=LATER, last_cache_touch=TOUCH)
    assert off.decisions == ()
    unknown = plan_cache_ttl_prune(entries, WINDOW, POLICY, now=LATER, last_cache_touch=None)
    assert unknown.decisions == ()
    assert plan_cache_ttl_prune(
        entries, WINDOW, POLICY, now=LATER, last_cache_touch=TOUCH
    ).decisions


def test_nothing_happens_under_the_soft_trim_ratio() -> None:
    entries = _session([5_000] * 4)  # about 110,000 chars in an 800,000-char window
    plan = plan_cache_ttl_prune(entries, 200_000, POLICY, now=LATER, last_cache_touch=TOUCH)
    assert plan.ratio_before < 0.3
    assert plan.decisions == ()
    assert "soft_trim_ratio" in plan.reason


def test_large_old_results_are_soft_trimmed_and_the_protected_ones_kept() -> None:
    entries = _session([50_000, 3_000, 50_000])
    plan = plan_cache_ttl_prune(entries, WINDOW, POLICY, now=LATER, last_cache_touch=TOUCH)
    assert 0.3 <= plan.ratio_before < 0.5
    assert [(d.entry_id, d.action) for d in plan.decisions] == [
        ("t0", PruneAction.SOFT_TRIM),
        ("t2", PruneAction.SOFT_TRIM),
    ]
    assert all((d.head_chars, d.tail_chars) == (1_500, 1_500) for d in plan.decisions)
    # The bootstrap read before the first user message and the newest three assistants'
    # results (20,000 chars each) are protected; t1 is under soft_trim_max_chars.
    trimmed = {d.entry_id for d in plan.decisions}
    assert trimmed.isdisjoint({"t-boot", "t1", "tl0", "tl1", "tl2"})
    shown = [
        len(d.apply(entries[_index(entries, d.entry_id)].tool_results[0].content))
        for d in plan.decisions
    ]
    assert plan.chars_before - plan.chars_after == sum(50_000 - n for n in shown)


def _index(entries: list[Entry], entry_id: str) -> int:
    return next(i for i, e in enumerate(entries) if e.id == entry_id)


def test_the_oldest_results_are_cleared_until_under_the_hard_clear_ratio() -> None:
    """Sixty results just under the trim size fill the window past half: soft trim cannot
    help, so the oldest are cleared, and no more than needed."""
    entries = _session([3_900] * 60)
    plan = plan_cache_ttl_prune(entries, WINDOW, POLICY, now=LATER, last_cache_touch=TOUCH)
    assert plan.ratio_before >= 0.5
    cleared = [d.entry_id for d in plan.decisions if d.action is PruneAction.HARD_CLEAR]
    assert cleared == [f"t{i}" for i in range(len(cleared))]
    assert plan.ratio_after < 0.5
    # One clear fewer would not have been enough.
    assert plan.chars_after + 3_900 - len("[Old tool result content cleared]") >= 200_000


def test_no_hard_clear_when_too_little_is_prunable() -> None:
    """A long user paste fills the window; clearing a few small results would not help."""
    entries = _session([3_000] * 10)
    entries.insert(3, user("P" * 300_000, id="paste"))
    plan = plan_cache_ttl_prune(entries, WINDOW, POLICY, now=LATER, last_cache_touch=TOUCH)
    assert plan.ratio_after >= 0.5
    assert plan.decisions == ()


def test_tool_globs_deny_wins() -> None:
    entries = _session([50_000, 50_000], tool_name="read")
    entries += [
        assistant("", id="x-call", calls=[call("cx", "exec_shell")]),
        tool("cx", "y" * 50_000, id="tx"),
    ]
    # move the exec result out of the protected tail: three more assistant turns
    entries += [assistant(f"more {i}", id=f"m{i}") for i in range(3)]
    assert tool_names(entries)["tx"] == "exec_shell"

    def pruned(tool_filter: ToolFilter) -> set[str]:
        plan = plan_cache_ttl_prune(
            entries, WINDOW, POLICY, now=LATER, last_cache_touch=TOUCH, tool_filter=tool_filter
        )
        return {d.entry_id for d in plan.decisions}

    assert {"t0", "t1", "tx"} <= pruned(ToolFilter())
    assert pruned(ToolFilter(deny=("read",))) & {"t0", "t1"} == set()
    assert "tx" in pruned(ToolFilter(deny=("read",)))
    assert pruned(ToolFilter(allow=("EXEC_*",))) & {"t0", "t1", "tx"} == {"tx"}
    assert pruned(ToolFilter(allow=("exec*",), deny=("*shell",))) & {"tx"} == set()


def test_the_plan_is_deterministic_and_the_store_accepts_it() -> None:
    entries = _session([50_000, 3_900, 50_000] + [3_900] * 50)
    first = plan_cache_ttl_prune(entries, WINDOW, POLICY, now=LATER, last_cache_touch=TOUCH)
    again = plan_cache_ttl_prune(entries, WINDOW, POLICY, now=LATER, last_cache_touch=TOUCH)
    assert first == again
    assert json.loads(json.dumps(first.to_dict()))["chars_after"] == first.chars_after
    tracked = Tracked()
    for turn in turns(entries):
        tracked.append(*turn)
    tracked.prune(*first.decisions, reason=first.reason)
    assert set(tracked.history.prompt_view().pruned) == {d.entry_id for d in first.decisions}


def test_decisions_in_force_count_and_cleared_results_are_left_alone() -> None:
    entries = _session([50_000, 50_000, 50_000])
    current = {"t0": PruneDecision("t0", PruneAction.HARD_CLEAR, 0, 0)}
    plan = plan_cache_ttl_prune(
        entries, WINDOW, POLICY, now=LATER, last_cache_touch=TOUCH, current=current
    )
    assert "t0" not in {d.entry_id for d in plan.decisions}
    fresh = plan_cache_ttl_prune(entries, WINDOW, POLICY, now=LATER, last_cache_touch=TOUCH)
    assert plan.chars_before < fresh.chars_before


# -- QwenPaw's recent-n caps ------------------------------------------------------------------


def test_recent_results_keep_50000_bytes_older_ones_3000() -> None:
    entries = _session([60_000] * 4)
    plan = plan_recent_n_prune(entries, WINDOW)
    by_id = {d.entry_id: d for d in plan.decisions}
    # Newest first: tl2, tl1 (20,000 chars, under 50,000) stay; every older result is capped.
    assert "tl2" not in by_id and "tl1" not in by_id
    assert set(by_id) == {"t-boot", "t0", "t1", "t2", "t3", "tl0"}
    for entry_id, decision in by_id.items():
        text = entries[_index(entries, entry_id)].tool_results[0].content
        assert decision.head_chars + decision.tail_chars <= 3_000
        assert len(decision.apply(text).encode()) < 3_000 + 200
    recent = plan_recent_n_prune(entries[:-6], WINDOW)  # t3 and t2 are now the newest
    caps = {d.entry_id: d.head_chars + d.tail_chars for d in recent.decisions}
    assert caps["t3"] == caps["t2"] == 50_000
    assert caps["t1"] == 3_000
    assert plan.chars_after < plan.chars_before


def test_recent_n_budgets_are_bytes_not_chars() -> None:
    """Japanese output is 3 bytes a character: 3,000 bytes keep 1,000 characters."""
    entries = [
        user("ログを見せて", id="u"),
        assistant("", id="a", calls=[call("c", "read")]),
        tool("c", "日本語のログ" * 2_000, id="t"),
        assistant("", id="a2", calls=[call("c2", "read")]),
        tool("c2", "ok", id="t2"),
        assistant("", id="a3", calls=[call("c3", "read")]),
        tool("c3", "ok", id="t3"),
    ]
    (decision,) = plan_recent_n_prune(entries, WINDOW).decisions
    assert decision.head_chars + decision.tail_chars == 1_000
