"""The tool result guard keeps what matters of a large output and says where the rest is."""

from __future__ import annotations

import json

import pytest

from domain.context.tool_result_guard import (
    COMPACTED_PLACEHOLDER,
    TRUNCATION_NOTICE,
    GuardAction,
    ToolResultDecision,
    decide_tool_result,
    guard_entry,
    live_cap_chars,
    tail_looks_important,
)
from tests.unit.support import tool

WINDOW = 200_000  # 800,000 chars


def _lines(n: int, word: str = "line") -> str:
    return "".join(f"{word} {i:06d} of plain output\n" for i in range(n))


def test_a_result_under_the_cap_is_shown_unchanged() -> None:
    text = "x" * 16_000
    decision = decide_tool_result("e1", text, WINDOW)
    assert decision.action is GuardAction.KEEP
    assert decision.apply(text) == text


def test_the_cap_is_16000_chars_or_30_percent_of_the_window() -> None:
    assert live_cap_chars(200_000) == 16_000
    # 10,000 tokens = 40,000 chars; 30% is 12,000.
    assert live_cap_chars(10_000) == 12_000


def test_a_plain_large_result_keeps_its_head_and_names_the_entry() -> None:
    text = _lines(2_000)  # about 54,000 chars, nothing interesting at the end
    decision = decide_tool_result("entry-42", text, WINDOW, tool_call_id="call-1")
    assert decision.action is GuardAction.TRUNCATE
    assert decision.tail_chars == 0
    assert 16_000 * 0.8 <= decision.head_chars <= 16_000
    shown = decision.apply(text)
    assert shown.startswith(text[: decision.head_chars])
    assert TRUNCATION_NOTICE in shown
    assert 'GetEntry(entry_id="entry-42")' in shown
    assert "line 001999" not in shown
    assert len(shown) < 16_500


def test_a_failing_command_keeps_its_traceback() -> None:
    text = _lines(2_000) + "Traceback (most recent call last):\n  ValueError: bad input\n"
    decision = decide_tool_result("e", text, WINDOW)
    assert decision.action is GuardAction.TRUNCATE
    assert 0 < decision.tail_chars <= 4_000
    assert decision.head_chars >= 2_000
    shown = decision.apply(text)
    assert "ValueError: bad input" in shown
    assert shown.startswith("line 000000")


def test_the_tail_budget_is_30_percent_of_the_kept_budget_at_most_4000() -> None:
    text = _lines(2_000) + "=== 12 passed, 1 failed in 3.2s ===\n"
    decision = decide_tool_result("e", text, WINDOW)
    assert decision.tail_chars <= min(int(16_000 * 0.3), 4_000)
    assert decision.tail_chars >= 4_000 * 0.8
    # A small window: cap 12,000, tail at most 3,600.
    small = decide_tool_result("e", text, 10_000)
    assert small.tail_chars <= 3_600
    assert small.head_chars + small.tail_chars <= 12_000


@pytest.mark.parametrize(
    ("text", "is_error", "important"),
    [
        ("ok\n" * 10, False, False),
        ("ok\n" * 10, True, True),
        ("ok\n" * 10 + "Error: ENOENT: no such file", False, True),
        ("ok\n" * 10 + "Total: 42 rows", False, True),
        (json.dumps({"items": list(range(10))}), False, True),
        ("ok\n" * 10 + "Summary of changes", False, True),
        ("terrorist attacks of errorless text", False, False),
    ],
)
def test_tail_heuristic(text: str, is_error: bool, important: bool) -> None:
    assert tail_looks_important(text, is_error=is_error) is important


def test_a_closing_json_bracket_survives_truncation() -> None:
    text = json.dumps([{"id": i, "name": f"item-{i}"} for i in range(3_000)], indent=1)
    shown = decide_tool_result("e", text, WINDOW).apply(text)
    assert shown.split("\n\n" + TRUNCATION_NOTICE)[0].rstrip().endswith("]")


def test_a_result_over_half_the_window_is_replaced_by_a_placeholder() -> None:
    text = "y" * 40_001  # window 20,000 tokens = 80,000 chars; half is 40,000
    decision = decide_tool_result("big", text, 20_000)
    assert decision.action is GuardAction.REPLACE
    shown = decision.apply(text)
    assert shown.startswith(COMPACTED_PLACEHOLDER)
    assert 'GetEntry(entry_id="big")' in shown
    assert "yyyy" not in shown
    assert len(shown) < 300


def test_a_decision_round_trips_and_reproduces_the_same_view() -> None:
    """Stored in an event and read back, the decision shows the stored text identically."""
    text = _lines(1_500) + "FAILED tests/test_x.py::test_y\n"
    decision = decide_tool_result("e7", text, WINDOW, tool_call_id="c7", is_error=True)
    again = ToolResultDecision.from_dict(json.loads(json.dumps(decision.to_dict())))
    assert again == decision
    assert again.apply(text) == decision.apply(text)
    assert again.original_chars == len(text)
    assert "live cap" in again.reason


def test_guard_entry_decides_each_tool_result() -> None:
    entry = tool("c1", _lines(2_000), id="t1", error=True)
    (decision,) = guard_entry(entry, WINDOW)
    assert (decision.entry_id, decision.tool_call_id) == ("t1", "c1")
    assert decision.tail_chars > 0  # flagged as an error
