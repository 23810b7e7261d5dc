"""Windows providers' overflow errors taught a session, lifted by a usage report: the
aggregate, the history it was synced with and a history folded from scratch all
agree, at every version."""

from __future__ import annotations

from domain.content import Entry, PromptRef, Role, TextBlock, Usage
from domain.context.calibration import LearnedLimits
from domain.context.overflow import OverflowReport
from domain.session_events import EntriesAppended
from domain.settings import SessionSettings
from projections.session_history import SessionHistory
from tests.unit.support import Tracked, user

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
