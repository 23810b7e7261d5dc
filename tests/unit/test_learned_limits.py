"""What providers taught a session, superseded by a window the client names, lifted by a
usage report or forgotten at the client's word: the aggregate, the history it was synced
with, a history folded from scratch and one loaded cold from a cut all agree, at every
version."""

from __future__ import annotations

from dataclasses import replace

import pytest

from domain.content import Entry, PromptRef, Role, TextBlock, Usage
from domain.context.calibration import LearnedLimits
from domain.context.overflow import REQUEST_TOO_LARGE, OverflowReport
from domain.errors import ContextWindowTooSmall, InvalidRequest
from domain.session_events import EntriesAppended, LearnedLimitsForgotten, OverflowReported
from domain.settings import SessionSettings, WindowGuardPolicy
from projections.session_history import SessionHistory, load_from_cut
from tests.unit.support import Tracked, assistant, user

MODEL = "gpt-4o"


def stated_overflow(tracked: Tracked, window_tokens: int, output_tokens: int = 0) -> None:
    """OpenAI's overflow error, stating the window."""
    report = OverflowReport(
        "openai",
        400,
        f"maximum context length is {window_tokens} tokens",
        tracked.version,
        "",
        stated=(window_tokens, 0, output_tokens),
    )
    tracked.session.report_overflow(report)
    tracked.sync()


def figureless_overflow(tracked: Tracked, view_estimate: int) -> None:
    """Bedrock's overflow error, stating no figure: it teaches the refused prompt's size."""
    report = OverflowReport(
        "bedrock", 400, "Input is too long for requested model.", tracked.version, ""
    )
    tracked.session.report_overflow(report, view_estimate=view_estimate)
    tracked.sync()


def refused_for_bytes(tracked: Tracked, refused_bytes: int, view_estimate: int = 20_000) -> None:
    report = OverflowReport(
        "anthropic",
        413,
        '{"type":"error","error":{"type":"request_too_large"}}',
        tracked.version,
        "",
        kind=REQUEST_TOO_LARGE,
        refused_bytes=refused_bytes,
    )
    tracked.session.report_overflow(report, view_estimate=view_estimate)
    tracked.sync()


def answered(tracked: Tracked, prompt_tokens: int) -> EntriesAppended:
    """An assistant turn answering the view now, the provider counting ``prompt_tokens``."""
    entry = Entry(
        "",
        None,
        None,
        Role.ASSISTANT,
        (TextBlock("done"),),
        usage=Usage(input_tokens=prompt_tokens),
        token_count=5,
        prompt_ref=PromptRef(tracked.version, "openai", "h"),
    )
    tracked.append(entry)
    event = tracked.events[-1]
    assert isinstance(event, EntriesAppended)
    return event


def started(settings: SessionSettings | None = None) -> Tracked:
    tracked = Tracked(settings=settings or SessionSettings(model=MODEL))
    tracked.append(user("read the repository", id="q1", tokens=20_000))
    return tracked


def readers(tracked: Tracked, version: int | None = None) -> set[tuple[int, str, LearnedLimits]]:
    """(window in force, its source, what was learned) as every reader sees them."""
    again = SessionHistory(tracked.session.id)
    again.apply(tracked.events)
    views = [tracked.history.prompt_view(version), again.prompt_view(version)]
    seen = {(v.window_tokens, v.window_source, v.learned) for v in views}
    if version is None:
        session = tracked.session
        seen.add((session.window_tokens, session.window_source, session.learned))
    return seen


def test_a_stated_window_below_the_guards_minimum_is_refused_and_records_nothing() -> None:
    tracked = Tracked(settings=SessionSettings(model="gpt-4o"))
    with pytest.raises(ContextWindowTooSmall, match="nothing is recorded"):
        stated_overflow(tracked, 8_192)
    tracked.sync()
    assert tracked.version == 1 and tracked.session.window_tokens == 200_000
    # With the guard off the client works in any window, and the lesson is learned.
    off = SessionSettings(model="gpt-4o", window_guard=WindowGuardPolicy(enabled=False))
    tracked.change_settings(off)
    stated_overflow(tracked, 8_192)
    assert tracked.session.window_tokens == 8_192


def test_a_window_the_client_names_supersedes_a_learned_one_in_every_reader() -> None:
    """The aggregate, the history it was synced with and a history folded from scratch
    agree on the window in force as lessons and settings alternate."""
    settings = SessionSettings(model="gpt-4o", context_window_tokens=60_000)
    tracked = Tracked(settings=settings, window=(60_000, "session"))
    tracked.append(user("hello"))

    def windows() -> set[tuple[int, str]]:
        again = SessionHistory(tracked.session.id)
        again.apply(tracked.events)
        views = [tracked.history.prompt_view(), again.prompt_view()]
        return {(tracked.session.window_tokens, views[0].window_source)} | {
            (v.window_tokens, v.window_source) for v in views
        }

    stated_overflow(tracked, 20_000)
    assert windows() == {(20_000, "learned")}
    # Other settings leave the lesson in force; naming the window, even unchanged, does not.
    tracked.session.change_settings(replace(settings, title="t"), (60_000, "session"))
    tracked.sync()
    assert windows() == {(20_000, "learned")}
    tracked.session.change_settings(
        replace(settings, title="t"), (60_000, "session"), sets_window=True
    )
    tracked.sync()
    assert windows() == {(60_000, "session")}
    # Named again with nothing learned, it records nothing.
    version = tracked.version
    tracked.session.change_settings(
        replace(settings, title="t"), (60_000, "session"), sets_window=True
    )
    tracked.sync()
    assert tracked.version == version
    # A later lesson teaches again.
    stated_overflow(tracked, 30_000)
    assert windows() == {(30_000, "learned")}


def test_a_request_refused_for_its_bytes_teaches_a_byte_limit_in_every_reader() -> None:
    """The aggregate, the history it was synced with and a history folded from scratch
    agree on the limit, which teaches no window."""
    tracked = Tracked(settings=SessionSettings(model="claude-sonnet-4-5"))
    tracked.append(user("hello"))

    def report(refused_bytes: int) -> None:
        refused_for_bytes(tracked, refused_bytes, view_estimate=50_000)

    def learned() -> set[tuple[int, int]]:
        again = SessionHistory(tracked.session.id)
        again.apply(tracked.events)
        readers = [tracked.session.learned, tracked.history.prompt_view().learned]
        readers.append(again.prompt_view().learned)
        return {(limits.request_bytes, limits.window_tokens) for limits in readers}

    report(0)  # unmeasured: nothing learned
    assert learned() == {(0, 0)}
    report(300_000)
    assert learned() == {(300_000, 0)}
    reported = tracked.events[-1]
    assert isinstance(reported, OverflowReported) and reported.byte_limit is not None
    assert "300,000 bytes" in reported.byte_limit.source
    report(400_000)
    assert learned() == {(300_000, 0)}
    assert tracked.session.window_tokens == 200_000


def test_a_byte_limit_says_which_figure_it_was_learned_from() -> None:
    """The client's figure, as sent, or the store's rendering; a figure that is no size
    of the refused request is refused, and nothing is recorded."""
    tracked = Tracked(settings=SessionSettings(model="claude-sonnet-4-5"))
    tracked.append(user("hello"))
    error = '{"type":"error","error":{"type":"request_too_large"}}'

    def report(sent_bytes: int) -> OverflowReported:
        refusal = OverflowReport(
            "anthropic",
            413,
            error,
            tracked.version,
            "",
            kind=REQUEST_TOO_LARGE,
            refused_bytes=40_000,
            sent_bytes=sent_bytes,
        )
        reported = tracked.session.report_overflow(refusal, view_estimate=10_000)
        tracked.sync()
        return reported

    rendered = report(0)
    assert rendered.byte_limit is not None and rendered.request_bytes_sent == 0
    assert "40,000 bytes as the store rendered it" in rendered.byte_limit.source
    sent = report(110_000)
    assert sent.byte_limit is not None and sent.request_bytes_sent == 110_000
    assert "110,000 bytes as sent" in sent.byte_limit.source
    # A fifth of the request as sent below the refused view's 40,000 bytes.
    assert tracked.session.learned.request_bytes_allowed == 18_000
    version = tracked.version
    for wrong in (-1, 2**31, 9_000):
        with pytest.raises(InvalidRequest, match="request_bytes"):
            report(wrong)
    assert tracked.version == version


def test_a_usage_report_above_an_inferred_window_lifts_it_in_every_reader() -> None:
    tracked = started()
    figureless_overflow(tracked, view_estimate=30_000)
    ((window, source, _),) = readers(tracked)
    assert (window, source) == (30_000, "learned")
    inferred_at = tracked.version

    # Accepted at no more than the window: it proves nothing.
    kept = answered(tracked, prompt_tokens=29_000)
    assert kept.lessons is not None and kept.lessons[0].lifted_window_tokens == 0
    assert {r[:2] for r in readers(tracked)} == {(30_000, "learned")}
    # Accepted above it: the provider serves more than the refusal showed.
    lifted = answered(tracked, prompt_tokens=31_000)
    (lesson,) = lifted.lessons or ()
    assert (lesson.lifted_window_tokens, lesson.provider_tokens) == (30_000, 31_000)
    assert {r[:2] for r in readers(tracked)} == {(200_000, "default")}
    # A replay to a version before the lift shows the window then in force.
    assert {r[:2] for r in readers(tracked, inferred_at)} == {(30_000, "learned")}


def test_a_stated_window_is_not_lifted_by_a_usage_report() -> None:
    tracked = started()
    stated_overflow(tracked, 30_000)
    reported = answered(tracked, prompt_tokens=40_000)
    (lesson,) = reported.lessons or ()
    assert lesson.lifted_window_tokens == 0
    assert {r[:2] for r in readers(tracked)} == {(30_000, "learned")}


def test_lifting_an_inferred_window_leaves_the_stated_one_above_it() -> None:
    tracked = started()
    stated_overflow(tracked, 50_000)
    figureless_overflow(tracked, view_estimate=30_000)
    assert {r[:2] for r in readers(tracked)} == {(30_000, "learned")}
    answered(tracked, prompt_tokens=35_000)
    assert {r[:2] for r in readers(tracked)} == {(50_000, "learned")}
    answered(tracked, prompt_tokens=60_000)
    assert {r[:2] for r in readers(tracked)} == {(50_000, "learned")}


def test_forgetting_drops_every_models_limits_and_keeps_the_calibration() -> None:
    tracked = started()
    answered(tracked, prompt_tokens=24_000)  # calibration 1.2
    stated_overflow(tracked, 50_000, output_tokens=8_000)
    refused_for_bytes(tracked, 300_000)
    other = SessionSettings(model="claude-sonnet-4-5")
    tracked.change_settings(other)
    figureless_overflow(tracked, view_estimate=40_000)
    tracked.change_settings(SessionSettings(model=MODEL))
    before = tracked.version
    ((_, _, learned),) = readers(tracked)
    assert (learned.window_tokens, learned.output_tokens, learned.request_bytes) == (
        50_000,
        8_000,
        300_000,
    )

    forgot = tracked.session.forget_learned_limits()
    tracked.sync()

    assert isinstance(forgot, LearnedLimitsForgotten) and tracked.events[-1] is forgot
    # What was forgotten, for the audit: both models' limits as they were.
    assert {row[0]: LearnedLimits.from_list(list(row[1:])) for row in forgot.forgotten} == {
        MODEL: learned,
        "claude-sonnet-4-5": tracked.history.learned(before, "claude-sonnet-4-5"),
    }
    assert readers(tracked) == {(200_000, "default", LearnedLimits(calibration=1.2))}
    assert tracked.session.learned_for("claude-sonnet-4-5").window_tokens == 0
    assert tracked.history.limits_forgotten_version() == tracked.version
    # A replay to the version before shows the limits then in force.
    assert readers(tracked, before) == {(50_000, "learned", learned)}
    assert tracked.history.limits_forgotten_version(before) == 0
    # Forgetting again, nothing learned since, records nothing.
    version = tracked.version
    assert tracked.session.forget_learned_limits() is None
    tracked.sync()
    assert tracked.version == version
    # A later error teaches again.
    stated_overflow(tracked, 40_000)
    assert {r[:2] for r in readers(tracked)} == {(40_000, "learned")}


def test_a_session_that_learned_no_limit_records_nothing_when_told_to_forget() -> None:
    tracked = started()
    answered(tracked, prompt_tokens=24_000)  # a calibration is no limit
    version = tracked.version
    assert tracked.session.forget_learned_limits() is None
    assert not tracked.session.collect_events()
    assert tracked.version == version


def test_a_history_loaded_from_a_cut_after_a_forget_knows_the_limits_are_gone() -> None:
    """The compaction records the limits in force (none, the calibration aside), so a
    cold read from its cut need not fold the events before it."""
    tracked = started()
    figureless_overflow(tracked, view_estimate=30_000)
    tracked.session.forget_learned_limits()
    tracked.sync()
    tracked.append(assistant("it holds a store", id="a1", tokens=10))
    tracked.append(user("and the tests?", id="q2", tokens=10))
    tracked.compact("q2")
    events = list(tracked.events)
    session = None
    for event in events:
        session = event.mutate(session)  # type: ignore[arg-type]
    assert session is not None

    def fetch(after: int, upto: int | None) -> list[object]:
        return [e for e in events if after < e.originator_version <= (upto or len(events))]

    cold = load_from_cut(session, fetch)  # type: ignore[arg-type]
    assert cold is not None
    assert cold.prompt_view() == tracked.history.prompt_view()
    assert cold.prompt_view().window_tokens == 200_000
    assert cold.loaded_whole is None
