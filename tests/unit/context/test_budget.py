"""The one token figure and the budgets a window gives, derived or explicit."""

from __future__ import annotations

import math

import pytest

from domain.context.budget import context_budget
from domain.context.calibration import (
    REQUEST_BYTES_SHARE,
    ByteLesson,
    LearnedLimits,
    TokenLesson,
    WindowLesson,
    learn_bytes,
    learn_tokens,
)
from domain.context.request_bytes import (
    MAX_REQUEST_BYTES,
    check_request_bytes,
    check_sent_against_rendering,
    limit_in_store_measure,
    over_request_bytes,
    tokens_within_bytes,
)
from domain.settings import CompactionPolicy

POLICY = CompactionPolicy()


@pytest.mark.parametrize(
    ("window", "reserve", "keep", "summary", "budget", "threshold", "target"),
    [
        (16_384, 2_048, 1_638, 3_276, 14_336, 13_107, 12_288),
        (32_768, 4_096, 3_276, 4_096, 28_672, 26_214, 24_576),
        (128_000, 16_000, 12_800, 4_096, 112_000, 102_400, 102_400),
        (1_048_576, 16_384, 104_857, 4_096, 1_032_192, 838_860, 838_860),
    ],
)
def test_the_defaults_are_derived_from_the_window(
    window: int, reserve: int, keep: int, summary: int, budget: int, threshold: int, target: int
) -> None:
    derived = context_budget(window, POLICY)
    assert (derived.reserve_tokens, derived.keep_recent_tokens, derived.summary_max_tokens) == (
        reserve,
        keep,
        summary,
    )
    assert (derived.budget_tokens, derived.threshold_tokens, derived.target_tokens) == (
        budget,
        threshold,
        target,
    )
    # What a compaction keeps and writes always fits under its target.
    assert derived.keep_recent_tokens + derived.summary_max_tokens < derived.target_tokens


def test_a_million_token_window_is_not_compacted_at_a_few_tens_of_thousands() -> None:
    huge = context_budget(1_000_000, POLICY)
    assert not huge.over_threshold(700_000)
    assert huge.over_threshold(800_001)


def test_explicit_settings_win() -> None:
    policy = CompactionPolicy(
        reserve_tokens=1_000, keep_recent_tokens=5_000, summary_max_tokens=800, threshold_ratio=0.5
    )
    chosen = context_budget(32_000, policy)
    assert chosen.reserve_tokens == 1_000
    assert chosen.budget_tokens == 31_000
    assert chosen.threshold_tokens == 16_000
    assert chosen.keep_recent_tokens == 5_000
    assert chosen.summary_max_tokens == 800


def test_a_reserve_as_large_as_the_window_still_leaves_room() -> None:
    chosen = context_budget(16_000, CompactionPolicy(reserve_tokens=50_000))
    assert chosen.budget_tokens == 1_600


def test_the_answer_the_client_asks_room_for_is_reserved() -> None:
    learned = context_budget(32_768, POLICY, learned_reserve_tokens=8_000)
    assert learned.reserve_tokens == 8_000
    assert learned.budget_tokens == 24_768


def test_a_client_may_ask_for_less() -> None:
    assert context_budget(128_000, POLICY, asked_tokens=5_000).budget_tokens == 5_000
    assert context_budget(128_000, POLICY, asked_tokens=500_000).budget_tokens == 112_000


def test_every_comparison_uses_the_calibrated_estimate() -> None:
    """A provider counting 1.3x the store's estimate: the estimate's budget shrinks by it."""
    calibrated = context_budget(32_768, POLICY, calibration=1.3)
    assert calibrated.budget_tokens == 28_672
    assert calibrated.budget_estimate == 22_055
    assert calibrated.fits(22_055)
    assert not calibrated.fits(22_056)
    assert calibrated.provider_tokens(22_056) > calibrated.budget_tokens
    assert calibrated.over_threshold(20_165) and not calibrated.over_threshold(20_164)


def test_the_first_lesson_sets_the_calibration_and_later_ones_move_it() -> None:
    first = learn_tokens(None, "claude", 10_000, 13_000, "usage")
    assert first is not None and first.calibration == 1.3
    second = learn_tokens(first.calibration, "claude", 10_000, 12_000, "usage")
    assert second is not None and second.calibration == 1.275
    assert learn_tokens(None, "m", 100, 130, "too small to teach") is None
    wild = learn_tokens(None, "m", 1_000, 1_000_000, "a mistake")
    assert wild is not None and wild.calibration == 4.0
    tiny = learn_tokens(1.0, "m", 1_000, 1, "a mistake the other way")
    assert tiny is not None and tiny.calibration == 0.8125


def test_a_lesson_counting_more_is_adopted_at_once() -> None:
    """A burst of tool results the provider counts higher than the text before it:
    the next view still holds them, so a figure halfway up would undercount it."""
    text = learn_tokens(None, "claude", 10_000, 11_500, "usage: plain text")
    assert text is not None and text.calibration == 1.15
    burst = learn_tokens(text.calibration, "claude", 20_000, 36_000, "usage: tool results")
    assert burst is not None and burst.calibration == 1.8
    overflow = learn_tokens(burst.calibration, "claude", 30_000, 60_000, "overflow report")
    assert overflow is not None and overflow.calibration == 2.0
    beyond = learn_tokens(2.0, "claude", 1_000, 9_000, "a mistake")
    assert beyond is not None and beyond.calibration == 4.0


def test_a_lesson_counting_less_brings_the_calibration_down_slowly() -> None:
    """After an image-heavy turn, plain text overcounts: safe, so the figure comes down
    a quarter of the way a lesson, over several consistent ones, not on the first."""
    figure = 2.0
    figures = []
    for _ in range(8):
        lesson = learn_tokens(figure, "claude", 10_000, 11_500, "usage: plain text")
        assert lesson is not None
        figure = lesson.calibration
        figures.append(figure)
    assert figures[0] == 1.7875
    assert figures == sorted(figures, reverse=True)
    assert all(f > 1.15 for f in figures)
    assert figures[-1] < 1.3
    # A count just above the figure on the way down takes it back up at once.
    back = learn_tokens(figure, "claude", 10_000, 13_000, "usage: tool results again")
    assert back is not None and back.calibration == 1.3


def test_readers_fold_the_figure_a_lesson_recorded() -> None:
    """Lessons stored under an earlier rule read as they did: a reader takes the
    figure recorded, and never learns it again."""
    earlier = LearnedLimits(calibration=1.3)
    # 1.25 is halfway from 1.3 to 1.2, as lessons were once learned.
    stored = TokenLesson("claude", 10_000, 12_000, 1.25, "usage")
    assert earlier.after_tokens(stored, accepted=True).calibration == 1.25
    assert earlier.after_tokens(stored, accepted=False).calibration == 1.25


def test_a_window_learned_from_an_error_holds_until_a_count_disproves_it() -> None:
    limits = LearnedLimits().after_window(WindowLesson("m", 32_768, 4_096, "overflow"))
    assert limits.window(128_000) == 32_768
    assert limits.window(16_000) == 16_000
    assert limits.output_tokens == 4_096
    refused = limits.after_tokens(TokenLesson("m", 40_000, 40_000, 1.0, "overflow"), accepted=False)
    assert refused.window(128_000) == 32_768
    counted = limits.after_tokens(TokenLesson("m", 40_000, 40_000, 1.0, "usage"), accepted=True)
    assert counted.window(128_000) == 128_000


def test_a_limit_in_bytes_is_the_smallest_request_refused_for_its_bytes() -> None:
    """A byte limit bounds the request's size, not its tokens: the window stays, and
    views keep under a share of the smallest request refused so."""
    assert learn_bytes("m", 0, "unmeasured") is None
    first = learn_bytes("m", 1_000_000, "anthropic refused a request of 1,000,000 bytes")
    assert first is not None
    limits = LearnedLimits().after_window(WindowLesson("m", 32_768, 0, "overflow"))
    limits = limits.after_bytes(first)
    assert limits.request_bytes == 1_000_000
    assert limits.request_bytes_allowed == 800_000
    assert limits.window(128_000) == 32_768
    # A larger refusal says less than the one learned; a smaller one lowers the limit.
    assert limits.after_bytes(ByteLesson("m", 2_000_000, "again")).request_bytes == 1_000_000
    assert limits.after_bytes(ByteLesson("m", 900_000, "again")).request_bytes == 900_000
    # Every other lesson keeps it; the client naming the window too.
    counted = limits.after_tokens(TokenLesson("m", 40_000, 40_000, 1.0, "usage"), accepted=True)
    assert counted.request_bytes == limits.without_window().request_bytes == 1_000_000
    # Stored rows carry it; rows stored before byte limits read as none learned.
    assert LearnedLimits.from_list(limits.to_list()) == limits
    assert LearnedLimits.from_list([1.2, 0, 0]).request_bytes_allowed == 0


def test_a_view_over_the_limit_in_bytes_is_fitted_below_it() -> None:
    assert not over_request_bytes(900_000, 0)  # no limit learned
    assert not over_request_bytes(800_000, 800_000)
    assert over_request_bytes(800_001, 800_000)
    # A view of 100,000 tokens in 1,000,000 bytes, under 800,000 bytes: 80% of its
    # tokens, then the fit's margin below the limit.
    assert tokens_within_bytes(100_000, 1_000_000, 800_000) == 56_000


def test_a_figure_sent_keeps_a_fifth_of_the_request_as_sent_below_the_refused_view() -> None:
    """The margin covers the turn that crossed the limit, in proportion to the limit the
    request as sent measures: taken off the store's rendering, what the client adds
    beyond it cancels out."""
    # No figure sent, or one no larger than the rendering: 80% of the rendering.
    assert limit_in_store_measure(50_000, 0, REQUEST_BYTES_SHARE) == 50_000
    assert limit_in_store_measure(50_000, 40_000, REQUEST_BYTES_SHARE) == 50_000
    # A request of 110,000 bytes as sent, of which the view the store renders took
    # 40,000: views keep under 40,000 - 22,000, so requests stay under 88,000.
    learned = limit_in_store_measure(40_000, 110_000, REQUEST_BYTES_SHARE)
    limits = LearnedLimits().after_bytes(ByteLesson("m", learned, "as sent"))
    assert limits.request_bytes_allowed == 18_000
    assert limits.request_bytes_allowed + (110_000 - 40_000) <= 0.8 * 110_000
    # Within a byte below, whatever the figures.
    for rendered, sent in ((12_345, 67_891), (99_999, 100_001), (3, 7)):
        allowed = rendered - math.ceil(sent * 0.2)
        got = LearnedLimits(request_bytes=limit_in_store_measure(rendered, sent, 0.8))
        assert allowed - 1 <= got.request_bytes_allowed <= max(allowed, 1)
    # A client whose own part takes the whole margin: the store compacts all it can.
    tight = LearnedLimits(request_bytes=limit_in_store_measure(1_000, 100_000, 0.8))
    assert tight.request_bytes_allowed == 1


def test_a_figure_sent_that_is_no_size_of_the_request_is_refused() -> None:
    assert check_request_bytes(0) is None
    assert check_request_bytes(32_000_000) is None
    negative = check_request_bytes(-1)
    assert negative is not None and "request_bytes -1 is negative" in negative
    huge = check_request_bytes(MAX_REQUEST_BYTES + 1)
    assert huge is not None and "more than any provider takes" in huge
    # The request carried the view: a figure far under its rendering measures nothing.
    assert check_sent_against_rendering(0, 100_000) is None
    assert check_sent_against_rendering(40_000, 100_000) is None
    small = check_sent_against_rendering(100, 100_000)
    assert small is not None and "less than a quarter" in small and "100,000" in small
