"""Learned windows: stated ones and inferred ones, what lifts them and what forgets them."""

from __future__ import annotations

from domain.context.calibration import (
    ByteLesson,
    LearnedLimits,
    TokenLesson,
    WindowLesson,
    learn_tokens,
)

STATED = WindowLesson("m", 50_000, 8_000, "openai overflow", stated=True)
INFERRED = WindowLesson("m", 30_000, 0, "inferred: the error stated no window")


def test_an_accepted_prompt_larger_than_an_inferred_window_disproves_it() -> None:
    limits = LearnedLimits().after_window(INFERRED)
    assert limits.window_inferred
    assert limits.disproved_by(30_000) == 0  # no larger than the window: nothing shown
    assert limits.disproved_by(30_001) == 30_000
    lesson = learn_tokens(1.0, "m", 20_000, 30_001, "usage", lifted_window_tokens=30_000)
    assert lesson is not None and lesson.lifted_window_tokens == 30_000
    lifted = limits.after_tokens(lesson, accepted=True)
    assert lifted.window(128_000) == 128_000
    assert lifted.calibration == lesson.calibration


def test_a_stated_window_is_never_disproved_by_an_accepted_prompt() -> None:
    """The provider's own figure: a count above it is more likely a client's mistake."""
    limits = LearnedLimits().after_window(STATED)
    assert not limits.window_inferred
    assert limits.disproved_by(1_000_000) == 0
    # The same figure inferred after it was stated is the provider's word still.
    assert (
        LearnedLimits()
        .after_window(STATED)
        .after_window(WindowLesson("m", 50_000, 0, "inferred"))
        .disproved_by(60_000)
        == 0
    )
    assert (
        LearnedLimits()
        .after_window(WindowLesson("m", 50_000, 0, "inferred"))
        .after_window(STATED)
        .disproved_by(60_000)
        == 0
    )


def test_lifting_an_inferred_window_leaves_a_larger_stated_one_in_force() -> None:
    limits = LearnedLimits().after_window(STATED).after_window(INFERRED)
    assert (limits.window(128_000), limits.stated_window_tokens) == (30_000, 50_000)
    assert limits.disproved_by(40_000) == 30_000
    lesson = TokenLesson("m", 20_000, 40_000, 2.0, "usage", lifted_window_tokens=30_000)
    lifted = limits.after_tokens(lesson, accepted=True)
    assert lifted.window(128_000) == 50_000
    assert not lifted.window_inferred
    assert lifted.disproved_by(60_000) == 0
    # A larger window inferred later says less than the one stated.
    assert limits.after_window(WindowLesson("m", 70_000, 0, "inferred")).window(128_000) == 30_000


def test_only_a_lift_recorded_in_the_lesson_lifts_a_window() -> None:
    """Readers fold what the lesson recorded: a count recorded as lifting nothing
    lifts nothing, whatever its size; an overflow's count never lifts."""
    limits = LearnedLimits().after_window(INFERRED)
    kept = TokenLesson("m", 20_000, 90_000, 4.0, "usage", lifted_window_tokens=0)
    assert limits.after_tokens(kept, accepted=True).window(128_000) == 30_000
    refused = learn_tokens(1.0, "m", 20_000, 90_000, "overflow")
    assert refused is not None and refused.lifted_window_tokens == 0
    assert limits.after_tokens(refused, accepted=False).window(128_000) == 30_000


def test_lessons_and_rows_stored_before_the_kinds_were_told_apart_read_as_they_did() -> None:
    """A lesson stored before lifts were recorded lifts any learned window below a count
    the provider accepted, as the rule was; windows stored before stated ones were told
    from inferred ones stay liftable, as they were."""
    stated = LearnedLimits().after_window(STATED)
    stored = TokenLesson.from_dict(
        {
            "model": "m",
            "estimated_tokens": 40_000,
            "provider_tokens": 60_000,
            "calibration": 1.5,
            "source": "usage",
        }
    )
    assert stored.lifted_window_tokens is None
    assert stated.after_tokens(stored, accepted=True).window(128_000) == 128_000
    assert stated.after_tokens(stored, accepted=False).window(128_000) == 50_000
    old_window = WindowLesson.from_dict(
        {"model": "m", "window_tokens": 50_000, "output_tokens": 0, "source": "openai"}
    )
    assert not old_window.stated
    row = LearnedLimits.from_list([1.2, 50_000, 0, 0])
    assert (row.window_tokens, row.stated_window_tokens, row.window_inferred) == (50_000, 0, True)
    assert row.disproved_by(60_000) == 50_000
    # What is stored now reads back whole.
    assert LearnedLimits.from_list(stated.to_list()) == stated
    assert TokenLesson.from_dict(stored.to_dict()) == stored
    assert WindowLesson.from_dict(STATED.to_dict()) == STATED


def test_a_window_the_client_names_drops_the_stated_and_the_inferred_one() -> None:
    limits = LearnedLimits(calibration=1.2).after_window(STATED).after_window(INFERRED)
    named = limits.without_window()
    assert (named.window_tokens, named.stated_window_tokens) == (0, 0)
    assert (named.calibration, named.output_tokens) == (1.2, 8_000)


def test_forgetting_keeps_only_the_calibration() -> None:
    """The windows, the answer's room and the byte limit go: they bound what the
    provider takes, and may be stale. The calibration is the provider's count per
    store token, not a limit, and every usage report corrects it."""
    limits = (
        LearnedLimits(calibration=1.2)
        .after_window(STATED)
        .after_window(INFERRED)
        .after_bytes(ByteLesson("m", 300_000, "refused"))
    )
    assert limits.holds_a_limit
    forgotten = limits.forgotten()
    assert forgotten == LearnedLimits(calibration=1.2)
    assert not forgotten.holds_a_limit
    assert forgotten.window(128_000) == 128_000
    assert forgotten.request_bytes_allowed == 0
    assert not LearnedLimits(calibration=1.2).holds_a_limit
