"""The window guard blocks a model too small to work in and warns about a tight one."""

from __future__ import annotations

import pytest

from domain.context.window_guard import WindowLevel, check_context_window


def test_a_large_window_passes() -> None:
    verdict = check_context_window(200_000, "default")
    assert verdict.level is WindowLevel.OK
    assert not verdict.blocked


def test_a_window_under_the_hard_minimum_is_blocked_with_advice() -> None:
    """The client learns which window, from where, the threshold, and what to do."""
    verdict = check_context_window(8_192, "model")
    assert verdict.blocked
    assert verdict.to_dict()["level"] == "block"
    assert (verdict.window_tokens, verdict.source) == (8_192, "model")
    assert verdict.hard_min_tokens == 16_000
    assert "8,192" in verdict.message
    assert "16,000" in verdict.message
    assert "model" in verdict.message
    assert "larger context window" in verdict.message


@pytest.mark.parametrize(
    ("tokens", "level"),
    [
        (15_999, WindowLevel.BLOCK),
        (16_000, WindowLevel.WARN),
        (31_999, WindowLevel.WARN),
        (32_000, WindowLevel.OK),
    ],
)
def test_the_thresholds_are_strict_lower_bounds(tokens: int, level: WindowLevel) -> None:
    assert check_context_window(tokens, "session").level is level


def test_thresholds_are_parameters() -> None:
    verdict = check_context_window(
        50_000, "modelsConfig", hard_min_tokens=64_000, warn_below_tokens=100_000
    )
    assert verdict.blocked
    assert (
        check_context_window(
            80_000, "modelsConfig", hard_min_tokens=64_000, warn_below_tokens=100_000
        ).level
        is WindowLevel.WARN
    )


def test_thresholds_stored_out_of_order_are_read_in_order() -> None:
    """Sessions stored before settings refused them may hold them; every view of such a
    session failed (the guard raised)."""
    kept = check_context_window(35_000, "session", hard_min_tokens=40_000, warn_below_tokens=30_000)
    assert kept.blocked
    assert (kept.hard_min_tokens, kept.warn_below_tokens) == (40_000, 40_000)
    roomy = check_context_window(100_000, "default", hard_min_tokens=40_000, warn_below_tokens=0)
    assert roomy.level is WindowLevel.OK
    assert check_context_window(500, "session", hard_min_tokens=0).level is WindowLevel.WARN
