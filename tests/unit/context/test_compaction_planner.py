"""The compaction planner: when to compact, a cut the store accepts, chunks that fit."""

from __future__ import annotations

import json
import random

import pytest

from domain.content import Entry
from domain.context.budget import ContextBudget, context_budget
from domain.context.compaction_planner import (
    SUMMARIZATION_OVERHEAD_TOKENS,
    CompactionPlan,
    CompactionRefused,
    adaptive_chunk_ratio,
    chunk_for_summary,
    plan_compaction,
)
from domain.context.cuts import CallIndex, choose_cut
from domain.settings import CompactionPolicy
from tests.unit.context.transcripts import PI_LARGE, close_open_calls, read_pi_v1
from tests.unit.pi_transcript import turns
from tests.unit.support import Tracked, assistant, call, system, tool, user
from tests.unit.test_fixtures_import import needs_fixtures

POLICY = CompactionPolicy()


def budget(window: int, policy: CompactionPolicy = POLICY) -> ContextBudget:
    return context_budget(window, policy)


def _chat(turn_count: int, tokens: int = 1_000) -> list[Entry]:
    """turn_count plain user/assistant turns of ``tokens`` each: u0 a0 u1 a1 ..."""
    entries: list[Entry] = []
    for i in range(turn_count):
        entries.append(user(f"question {i}", id=f"u{i}", tokens=tokens))
        entries.append(assistant(f"answer {i}", id=f"a{i}", tokens=tokens))
    return entries


def _accepted_by_the_store(entries: list[Entry], first_kept: str) -> None:
    tracked = Tracked()
    for turn in turns(entries):
        tracked.append(*turn)
    tracked.compact(first_kept, tokens_before=2, tokens_after=1)


# -- where --------------------------------------------------------------------------


def test_the_cut_keeps_about_keep_recent_tokens_at_a_turn_start() -> None:
    entries = _chat(30)  # 60,000 tokens
    choice = choose_cut(entries, 20_000)
    assert choice.position is not None
    kept = entries[choice.position :]
    assert kept[0].id == "u20"
    assert sum(e.token_count for e in kept) == 20_000


def test_the_cut_never_separates_a_user_message_from_its_reply() -> None:
    entries = _chat(30)
    # 19,500 tokens reach back to the middle of turn 20: the cut moves to its question.
    choice = choose_cut(entries, 19_500)
    assert choice.position is not None
    assert entries[choice.position].id == "u20"


def test_the_cut_moves_off_a_tool_result_to_the_call() -> None:
    entries = [
        *_chat(10),
        user("fix it", id="u", tokens=100),
        assistant("", id="a-ls", calls=[call("c0", "ls")], tokens=100),
        tool("c0", "a.py b.py", id="t0", tokens=100),
        assistant("reading", id="a-call", calls=[call("c1"), call("c2")], tokens=100),
        tool("c1", "one", id="t1", tokens=3_000),
        tool("c2", "two", id="t2", tokens=3_000),
        assistant("done", id="a-done", tokens=100),
    ]
    choice = choose_cut(entries, 3_100)  # would land on t2
    assert choice.position is not None
    assert entries[choice.position].id == "a-call"
    _accepted_by_the_store(entries, "a-call")
    # One step further back the result t0 answers a-ls, and a-ls follows the question.
    choice = choose_cut(entries, 6_250)  # would land on t0
    assert choice.position is not None
    assert entries[choice.position].id == "u"


def test_the_cut_never_leaves_a_call_before_it_and_its_result_after() -> None:
    """Results can arrive late: a result after the cut pulls the cut back to its call."""
    entries = [
        *_chat(10),
        user("go", id="u", tokens=100),
        assistant("starting", id="a-start", tokens=100),
        assistant("", id="a-slow", calls=[call("slow")], tokens=100),
        assistant("meanwhile", id="a-note", tokens=3_000),
        tool("slow", "finally", id="t-slow", tokens=100),
    ]
    choice = choose_cut(entries, 3_000)  # would land on a-note
    assert choice.position is not None
    assert entries[choice.position].id == "a-slow"


def test_an_open_call_keeps_the_cut_at_or_before_it() -> None:
    entries = [
        *_chat(10),
        assistant("", id="a-open", calls=[call("pending")], tokens=100),
        user("still there?", id="u-late", tokens=5_000),
    ]
    assert entries[choose_cut(entries, 5_000).position or 0].id == "u-late"
    choice = choose_cut(entries, 5_000, open_call_ids={"pending"})
    assert choice.position is not None
    assert entries[choice.position].id == "a-open"


def test_the_cut_never_goes_past_the_start_of_the_turn_in_progress() -> None:
    """A turn of many tool calls: the newest 20,000 tokens all belong to it, yet the
    cut keeps the user message that began it."""
    entries = [*_chat(10)]
    entries.append(user("build it", id="u-now", tokens=100))
    for i in range(8):
        entries.append(assistant("", id=f"a{i}-call", calls=[call(f"c{i}")], tokens=100))
        entries.append(tool(f"c{i}", "log", id=f"t{i}", tokens=3_000))
    plan = plan_compaction(entries, budget(200_000))
    assert isinstance(plan, CompactionPlan)
    assert plan.first_kept_entry_id == "u-now"
    assert plan.reason == "keeping the turn in progress whole"


def test_keep_recent_is_cut_down_to_what_the_target_leaves() -> None:
    """keep_recent_tokens larger than the budget (the 32k case of an explicit 20,000):
    the plan keeps what fits beside the summary, and the summary is still written."""
    policy = CompactionPolicy(keep_recent_tokens=20_000)
    small = context_budget(16_384, policy)
    plan = plan_compaction(_chat(30, tokens=500), small)
    assert isinstance(plan, CompactionPlan)
    assert plan.kept_tokens + plan.summary_budget_tokens <= small.target_estimate
    assert plan.leaves_reserve_floor


def test_nothing_to_compact_when_everything_is_recent() -> None:
    refused = plan_compaction(_chat(5), budget(200_000))
    assert isinstance(refused, CompactionRefused)
    assert "keep_recent_tokens" in refused.reason


def test_nothing_to_compact_when_one_turn_cannot_be_split() -> None:
    """One user request answered by a call with a huge result: every valid cut is at 0."""
    entries = [
        user("read the log", id="u", tokens=100),
        assistant("", id="a", calls=[call("c")], tokens=100),
        tool("c", "x", id="t", tokens=50_000),
    ]
    choice = choose_cut(entries, 20_000)
    assert choice.position is None
    assert "nothing to compact" in choice.reason


def test_system_entries_are_pinned() -> None:
    entries = [system("you are terse", id="sys", tokens=500), *_chat(30)]
    plan = plan_compaction(entries, budget(200_000))
    assert isinstance(plan, CompactionPlan)
    assert plan.pinned_entry_ids == ("sys",)
    assert plan.summarised.first_id == "u0"
    assert all("sys" not in c.entry_ids for c in plan.chunks)
    assert plan.estimated_tokens_after == SUMMARIZATION_OVERHEAD_TOKENS + 20_000 + 500


def test_the_plan_describes_a_dry_run() -> None:
    entries = _chat(30)
    plan = plan_compaction(entries, budget(200_000), previous_summary_tokens=1_000)
    assert isinstance(plan, CompactionPlan)
    assert plan.first_kept_entry_id == "u20"
    assert (plan.summarised.first_id, plan.summarised.last_id, plan.summarised.count) == (
        "u0",
        "a19",
        40,
    )
    assert plan.tokens_before == 61_000
    assert plan.estimated_tokens_after == 4_096 + 20_000
    assert plan.leaves_reserve_floor
    assert [i for c in plan.chunks for i in c.entry_ids] == [e.id for e in entries[:40]]
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["summarised"]["count"] == 40


def test_a_compaction_that_would_not_shrink_is_refused() -> None:
    # Summarising the first turn (120 tokens) costs a summary of at least 200.
    entries = _chat(1, tokens=60) + _chat(10)[2:] + [user("last", id="z", tokens=2_000)]
    refused = plan_compaction(entries, budget(200_000))
    assert isinstance(refused, CompactionRefused)
    assert "not shrink" in refused.reason


def test_the_summary_of_a_short_history_is_expected_to_be_about_half_of_it() -> None:
    entries = _chat(11)  # 22,000 tokens; 2,000 summarised into about 1,000
    plan = plan_compaction(entries, budget(200_000))
    assert isinstance(plan, CompactionPlan)
    assert plan.estimated_tokens_after == 1_000 + plan.kept_tokens


# -- chunks ---------------------------------------------------------------------------


def test_the_chunk_ratio_shrinks_as_messages_grow() -> None:
    """Seed 000's example: 5 messages of 16,000 tokens in a 200,000 window give 0.32."""
    big = [user("x", id=f"b{i}", tokens=16_000) for i in range(5)]
    assert adaptive_chunk_ratio(big, 200_000) == pytest.approx(0.32)
    assert adaptive_chunk_ratio([user("x", tokens=90_000)], 200_000) == 0.15
    chunking = chunk_for_summary(big, 200_000)
    assert chunking.max_chunk_tokens == 64_000 - 4_096
    # 16,000 x 1.2 = 19,200 each: three fit in 59,904, then the rest.
    assert [len(c.entry_ids) for c in chunking.chunks] == [3, 2]
    assert chunking.chunks[0].counted_tokens == 57_600


def test_a_message_over_the_chunk_budget_gets_a_chunk_of_its_own() -> None:
    entries = [
        user("a", id="a", tokens=1_000),
        user("big", id="big", tokens=40_000),  # 48,000 counted > 47,104 budget, < 64,000
        user("b", id="b", tokens=1_000),
    ]
    chunking = chunk_for_summary(entries, 128_000)
    assert [c.entry_ids for c in chunking.chunks] == [("a",), ("big",), ("b",)]
    assert not chunking.oversized


def test_a_message_over_half_the_summariser_window_is_set_apart_with_a_note() -> None:
    entries = [user("a", id="a", tokens=1_000), tool("c", "huge", id="huge", tokens=60_000)]
    chunking = chunk_for_summary(entries, 100_000)  # 72,000 counted > 50,000
    assert [c.entry_ids for c in chunking.chunks] == [("a",)]
    (oversized,) = chunking.oversized
    assert oversized.entry_id == "huge"
    assert oversized.note == "[Large tool (~60K tokens) omitted from summary]"


def test_two_million_tokens_for_a_128k_summariser_all_fit() -> None:
    """Messages of every size, from a line to a whole file: every summariser call fits."""
    sizes = [50, 400, 3_000, 12_000, 45_000, 80_000, 200]
    entries = [user("m", id=f"m{i}", tokens=sizes[i % len(sizes)]) for i in range(14_500)]
    total = sum(e.token_count for e in entries)
    assert total > 2_000_000
    chunking = chunk_for_summary(entries, 128_000)
    for chunk in chunking.chunks:
        assert chunk.counted_tokens + 2 * SUMMARIZATION_OVERHEAD_TOKENS <= 128_000
    chunked = [i for c in chunking.chunks for i in c.entry_ids]
    set_apart = {o.entry_id for o in chunking.oversized}
    assert set_apart == {e.id for e in entries if e.token_count == 80_000}
    assert chunked == [e.id for e in entries if e.id not in set_apart]


def test_the_summariser_window_sizes_the_chunks_not_the_conversation_window() -> None:
    entries = [*_chat(200, tokens=1_500), user("now", id="last", tokens=20_000)]
    plan = plan_compaction(entries, budget(1_000_000), summariser_window_tokens=32_000)
    assert isinstance(plan, CompactionPlan)
    assert plan.summariser_window_tokens == 32_000
    assert all(c.counted_tokens <= plan.max_chunk_tokens for c in plan.chunks)
    assert plan.max_chunk_tokens < 32_000 * 0.4


# -- a real session ------------------------------------------------------------------------


@needs_fixtures
def test_a_real_coding_session_gets_a_cut_the_store_accepts() -> None:
    """pi's 900-message session, 125,000 tokens, compacted for a 128k model."""
    entries = close_open_calls(read_pi_v1(PI_LARGE))
    assert budget(128_000).over_threshold(sum(e.token_count for e in entries))
    plan = plan_compaction(entries, budget(128_000))
    assert isinstance(plan, CompactionPlan)
    # About a tenth of the window is kept, the cut moved back to a valid point.
    assert 12_800 <= plan.kept_tokens < 40_000
    assert plan.estimated_tokens_after < plan.tokens_before
    chunked = [i for c in plan.chunks for i in c.entry_ids]
    assert len(chunked) + len(plan.oversized) == plan.summarised.count
    tracked = Tracked(window=(128_000, "session"))
    for turn in turns(entries):
        tracked.append(*turn)
    tracked.compact(
        plan.first_kept_entry_id,
        tokens_before=plan.tokens_before,
        tokens_after=plan.estimated_tokens_after,
    )
    log = tracked.history.durable_log()
    assert log.entries[0].id == plan.first_kept_entry_id


def test_the_cut_index_agrees_with_the_call_by_call_rule() -> None:
    """Random sessions of calls answered late, early, together or never: the swept
    index of splitting cuts says what the call-by-call rule says, at every position."""
    rng = random.Random(7)
    for _ in range(50):
        entries: list[Entry] = []
        waiting: list[str] = []
        for i in range(60):
            if waiting and rng.random() < 0.4:
                answered = waiting.pop(rng.randrange(len(waiting)))
                entries.append(tool(answered, "out", id=f"t{i}"))
            elif rng.random() < 0.3:
                calls = [call(f"c{i}-{k}") for k in range(rng.randint(1, 3))]
                waiting += [c.id for c in calls]
                entries.append(assistant(id=f"a{i}", calls=calls))
            else:
                entries.append(user(f"u{i}", id=f"u{i}"))
        index = CallIndex(entries, open_call_ids=waiting)
        for position in range(len(entries)):
            assert index.splitting[position] == (index.split_call_before(position) is not None)


def test_nothing_to_compact_names_the_tool_result_that_holds_the_cut_back() -> None:
    """A small newest turn after a large tool result early in the log: the cut lands on
    the result, moves back to its call and the question before it, the log's first
    entry. The refusal names the result, not the newest turn (25 tokens here)."""
    entries = [
        user("Why does the build fail?", id="ask", tokens=10),
        assistant("", id="call", calls=[call("c1", "read")], tokens=12),
        tool("c1", "200 KB of build log", id="log", tokens=4_000),
        assistant("The link step fails.", id="a0", tokens=21),
        user("How do I fix it?", id="q1", tokens=10),
        assistant("Define foo_bar.", id="a1", tokens=15),
    ]
    choice = choose_cut(entries, 300, latest=4)
    assert choice.position is None
    assert choice.reason == (
        "nothing to compact: the newest entries to keep reach back to tool entry 'log' "
        "(4,000 tokens), a tool result, which must stay with the call that made it; the only "
        "valid cut at or before it is the log's first entry, which would keep everything"
    )
