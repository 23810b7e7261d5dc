"""The tool result guard keeps what matters of a large output, in tokens, and says where
the rest is."""

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
    live_cap_tokens,
    tail_looks_important,
)
from domain.settings import ToolResultGuardPolicy
from tests.unit.support import tool

WINDOW = 200_000  # a cap of 10,000 tokens: 40,000 chars of English at 4 a token
CJK = "上下文窗口的管理需要精确地计算词元数量否则压缩会来得太晚。"


def _lines(n: int, word: str = "line") -> str:
    return "".join(f"{word} {i:06d} of plain output\n" for i in range(n))


def test_a_result_under_the_cap_is_shown_unchanged() -> None:
    text = "x" * 40_000
    decision = decide_tool_result("e1", text, WINDOW)
    assert decision.action is GuardAction.KEEP
    assert decision.apply(text) == text


@pytest.mark.parametrize(
    ("window", "cap"),
    [(10_000, 3_000), (16_384, 4_000), (32_768, 4_000), (200_000, 10_000), (1_048_576, 52_428)],
)
def test_the_cap_is_in_tokens_and_grows_with_the_window(window: int, cap: int) -> None:
    """max(4,000, window / 20), never over 30% of the window."""
    assert live_cap_tokens(window) == cap


def test_an_explicit_cap_wins() -> None:
    assert live_cap_tokens(200_000, ToolResultGuardPolicy(live_cap_tokens=2_500)) == 2_500


def test_chinese_output_is_capped_by_what_it_costs_not_by_its_characters() -> None:
    """16,000 Chinese characters are ~12,000 tokens, not 4,000: trimmed to the cap."""
    text = CJK * 600  # 16,800 characters
    decision = decide_tool_result("zh", text, 32_768, tokens_per_char=0.75)
    assert decision.action is GuardAction.TRUNCATE
    shown_tokens = (decision.head_chars + decision.tail_chars) * 0.75
    assert shown_tokens <= 4_000
    english = decide_tool_result("en", "x" * 16_000, 32_768, tokens_per_char=0.25)
    assert english.action is GuardAction.KEEP


def test_a_plain_large_result_keeps_its_head_and_names_the_entry_neutrally() -> None:
    text = _lines(5_000)  # about 135,000 chars, nothing interesting at the end
    decision = decide_tool_result("entry-42", text, WINDOW, tool_call_id="call-1")
    assert decision.action is GuardAction.TRUNCATE
    assert decision.tail_chars == 0
    assert 40_000 * 0.8 <= decision.head_chars <= 40_000
    shown = decision.apply(text)
    assert shown.startswith(text[: decision.head_chars])
    assert "[output trimmed: showing the first" in shown
    assert "entry entry-42" in shown
    assert "GetEntry" not in shown and "compacted" not in shown
    assert "line 004999" not in shown


def test_the_notice_names_the_tool_the_runtime_reads_entries_back_with() -> None:
    text = _lines(5_000)
    policy = ToolResultGuardPolicy(read_back_tool="read_stored_output")
    shown = decide_tool_result("e9", text, WINDOW, policy=policy).apply(text)
    assert 'read it with the read_stored_output tool (entry_id "e9")' in shown


def test_a_failing_command_keeps_its_traceback() -> None:
    text = _lines(5_000) + "Traceback (most recent call last):\n  ValueError: bad input\n"
    decision = decide_tool_result("e", text, WINDOW)
    assert decision.action is GuardAction.TRUNCATE
    assert 0 < decision.tail_chars <= 4_000
    assert decision.head_chars >= 2_000
    shown = decision.apply(text)
    assert "ValueError: bad input" in shown
    assert shown.startswith("line 000000")


def test_an_error_at_the_end_of_an_output_larger_than_the_window_reaches_the_model() -> None:
    """300 KB of log in a 16k window: no placeholder; head and the failing tail, in the cap."""
    text = _lines(11_000) + "error: linking failed: undefined symbol `parse_config`\n"
    decision = decide_tool_result("log", text, 16_384)
    assert decision.action is GuardAction.TRUNCATE
    shown = decision.apply(text)
    assert "undefined symbol `parse_config`" in shown
    assert (decision.head_chars + decision.tail_chars) / 4 <= live_cap_tokens(16_384)


def test_the_tail_budget_is_30_percent_of_the_kept_budget_at_most_4000() -> None:
    text = _lines(5_000) + "=== 12 passed, 1 failed in 3.2s ===\n"
    decision = decide_tool_result("e", text, WINDOW)
    assert decision.tail_chars <= 4_000
    assert decision.tail_chars >= 4_000 * 0.8
    # A small window: cap 3,000 tokens (12,000 chars), tail at most 30% of it.
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
        ("ok\n" * 10 + "构建失败, 找不到模块", False, True),
        ("terrorist attacks of errorless text", False, False),
    ],
)
def test_tail_heuristic(text: str, is_error: bool, important: bool) -> None:
    assert tail_looks_important(text, is_error=is_error) is important


def test_a_closing_json_bracket_survives_truncation() -> None:
    text = json.dumps([{"id": i, "name": f"item-{i}"} for i in range(8_000)], indent=1)
    shown = decide_tool_result("e", text, WINDOW).apply(text)
    assert shown.split("\n\n[output trimmed")[0].rstrip().endswith("]")


def test_a_result_is_left_out_whole_only_when_the_policy_asks() -> None:
    text = "y" * 40_001  # window 20,000 tokens; half is 10,000 tokens
    policy = ToolResultGuardPolicy(placeholder_window_share=0.5)
    decision = decide_tool_result("big", text, 20_000, policy=policy)
    assert decision.action is GuardAction.REPLACE
    shown = decision.apply(text)
    assert shown.startswith("[output omitted:")
    assert "entry big" in shown and "yyyy" not in shown
    assert decide_tool_result("big", text, 20_000).action is GuardAction.TRUNCATE


def test_decisions_recorded_before_the_guard_counted_tokens_read_as_they_did() -> None:
    """Replays of old views must give the same text, so the old wording stays."""
    stored = {
        "entry_id": "old",
        "tool_call_id": "c",
        "action": "replace",
        "head_chars": 0,
        "tail_chars": 0,
        "original_chars": 100,
        "reason": "over half the window",
    }
    old = ToolResultDecision.from_dict(stored)
    assert old.style == 1
    shown = old.apply("z" * 100)
    assert shown.startswith(COMPACTED_PLACEHOLDER)
    assert 'GetEntry(entry_id="old")' in shown
    truncated = ToolResultDecision.from_dict(
        {**stored, "action": "truncate", "head_chars": 10, "tail_chars": 0}
    )
    assert TRUNCATION_NOTICE in truncated.apply("z" * 100)


def test_a_decision_round_trips_and_reproduces_the_same_view() -> None:
    """Stored in an event and read back, the decision shows the stored text identically."""
    text = _lines(5_000) + "FAILED tests/test_x.py::test_y\n"
    policy = ToolResultGuardPolicy(read_back_tool="fetch_output")
    decision = decide_tool_result(
        "e7", text, WINDOW, tool_call_id="c7", is_error=True, policy=policy
    )
    again = ToolResultDecision.from_dict(json.loads(json.dumps(decision.to_dict())))
    assert again == decision
    assert again.apply(text) == decision.apply(text)
    assert again.original_chars == len(text)
    assert "live cap" in again.reason


def test_guard_entry_uses_the_entry_s_own_tokens_per_character() -> None:
    entry = tool("c1", CJK * 600, id="t1", error=True, tokens=12_600)
    (decision,) = guard_entry(entry, 32_768)
    assert (decision.entry_id, decision.tool_call_id) == ("t1", "c1")
    assert decision.action is GuardAction.TRUNCATE
    assert decision.tail_chars > 0  # flagged as an error
    rate = 12_600 / len(CJK * 600)
    assert (decision.head_chars + decision.tail_chars) * rate <= 4_000
