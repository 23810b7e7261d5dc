"""Summarising a compaction plan in stages, with the offline summariser (no network)."""

from __future__ import annotations

import itertools
import re

import pytest

from domain.content import Entry
from domain.context.budget import context_budget
from domain.context.compaction_planner import CompactionPlan, plan_compaction
from domain.context.summary import SECTIONS
from domain.settings import CompactionPolicy
from services.adapters.summarizers import OfflineSummarizer
from services.engine.staged_summary import (
    CompactionStepFailed,
    StagedSummary,
    combined_hash,
    summarize_plan,
)
from tests.unit.context.transcripts import PI_LARGE, close_open_calls, read_pi_v1
from tests.unit.support import assistant, call, tool, user


def _history(turns: int, chars: int = 4_000) -> list[Entry]:
    entries: list[Entry] = []
    for i in range(turns):
        entries += [
            user(f"step {i}: check src/module_{i}.py", id=f"u{i}", tokens=10),
            assistant(id=f"a{i}", calls=[call(f"c{i}", "read", f'{{"path": "m{i}.py"}}')]),
            tool(f"c{i}", "ok\n" * (chars // 3), id=f"t{i}", tokens=chars // 4),
        ]
    return entries


def _plan(entries: list[Entry], window: int, summariser_window: int) -> CompactionPlan:
    plan = plan_compaction(
        entries,
        context_budget(window, CompactionPolicy(keep_recent_tokens=2_000)),
        summariser_window_tokens=summariser_window,
    )
    assert isinstance(plan, CompactionPlan), plan
    return plan


def _summarise(plan: CompactionPlan, entries: list[Entry], **options: object) -> StagedSummary:
    arguments: dict[str, object] = {
        "previous_summary": "",
        "instructions": "",
        "identifier_policy": "preserve",
    }
    arguments.update(options)
    summarizer = arguments.pop("summarizer", OfflineSummarizer())
    return summarize_plan(
        plan,
        {e.id: e for e in entries},
        summarizer,  # type: ignore[arg-type]
        **arguments,  # type: ignore[arg-type]
    )


def test_a_real_transcript_is_summarised_offline_in_rolling_stages() -> None:
    entries = close_open_calls(read_pi_v1(PI_LARGE))
    plan = _plan(entries, 128_000, 32_000)
    assert len(plan.chunks) > 1
    staged = _summarise(plan, entries, summarizer=OfflineSummarizer(window_tokens=32_000))

    assert staged.chunks_summarised == len(plan.chunks)
    assert staged.calls == len(staged.prompt_hashes) >= len(plan.chunks)
    assert staged.prompt_hash == combined_hash(staged.prompt_hashes)
    assert staged.model == "offline"
    assert (staged.input_tokens, staged.output_tokens) == (0, 0)
    for section in SECTIONS:
        assert f"## {section}" in staged.text
    for note in staged.notes:
        assert note in staged.text
    # Deterministic: the same plan gives the same summary and receipts.
    again = _summarise(plan, entries, summarizer=OfflineSummarizer(window_tokens=32_000))
    assert (again.text, again.prompt_hashes) == (staged.text, staged.prompt_hashes)


def test_the_summary_rolls_forward_from_the_previous_one() -> None:
    entries = _history(12)
    plan = _plan(entries, 200_000, 128_000)
    previous = "## Constraints\n- never migrate the billing service to the new queue"
    staged = _summarise(plan, entries, previous_summary=previous)
    assert "migrate the billing service" in staged.text
    assert staged.stage == "full" and staged.fallbacks == ("full",)


def test_oversized_entries_are_left_out_with_the_planners_note() -> None:
    entries = _history(12)
    entries[4] = tool("c1", "x" * 80_000, id="t1", tokens=20_000)
    plan = _plan(entries, 200_000, 32_000)
    (oversized,) = plan.oversized
    staged = _summarise(plan, entries)
    assert staged.stage == "oversized-omitted"
    assert staged.notes == (oversized.note,)
    assert "[Large tool (~20K tokens) omitted from summary]" in staged.text


def test_a_plan_naming_entries_not_given_fails() -> None:
    entries = _history(12)
    plan = _plan(entries, 200_000, 128_000)
    with pytest.raises(CompactionStepFailed, match="entries not given"):
        summarize_plan(
            plan,
            {},
            OfflineSummarizer(),
            previous_summary="",
            instructions="",
            identifier_policy="preserve",
        )


def test_the_overall_timeout_ends_a_stuck_compaction() -> None:
    """Each call takes (by this clock) 100 s; the third starts past the 300 s limit."""
    entries = _history(60, 16_000)
    plan = _plan(entries, 1_000_000, 64_000)
    assert len(plan.chunks) > 3
    ticks = itertools.count(step=100)
    with pytest.raises(CompactionStepFailed) as failed:
        _summarise(plan, entries, clock=lambda: float(next(ticks)))
    assert failed.value.stage == "full"
    assert re.fullmatch(r"timed out after 300 s", failed.value.reason)


def test_a_summary_too_large_for_the_window_fails_rather_than_dropping_everything() -> None:
    entries = _history(12)
    plan = _plan(entries, 200_000, 16_000)
    with pytest.raises(CompactionStepFailed, match="leaves no room"):
        _summarise(
            plan,
            entries,
            previous_summary="x" * 60_000,
            summarizer=OfflineSummarizer(window_tokens=16_000),
        )
