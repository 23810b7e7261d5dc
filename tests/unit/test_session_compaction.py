"""Compactions and prunes recorded by the Session aggregate: where the cut may fall,
what may be pruned, and the one token figure the aggregate and its history share."""

from __future__ import annotations

import pytest

from domain.compaction import Compaction
from domain.content import Entry, PromptRef, Role, TextBlock, Usage
from domain.errors import (
    EntryNotFound,
    InvalidCutPoint,
    InvalidPrune,
    InvalidRequest,
    PreconditionFailed,
)
from domain.pruning import PruneAction, PruneDecision
from tests.unit.support import Tracked, assistant, call, clear, custom, tool, trim, user


def _tool_turns() -> Tracked:
    """u1, a1 (calls c1), t1 (answers c1), a2, u2, a3."""
    tracked = Tracked()
    tracked.append(
        user("read it", id="u1"),
        assistant(id="a1", calls=[call("c1")]),
        tool("c1", "content", id="t1"),
        assistant("done", id="a2"),
    )
    tracked.append(user("next", id="u2"), assistant("ok", id="a3"))
    return tracked


# -- compaction ------------------------------------------------------------------------


def test_compaction_moves_the_cut() -> None:
    """A valid compaction sets the first kept position and resets the since-compaction count."""
    tracked = _tool_turns()
    tracked.compact("u2", tokens_before=100, tokens_after=40)
    assert tracked.session.first_kept_position == 4
    assert tracked.session.compaction_count == 1
    assert tracked.session.entries_since_compaction == 0
    assert [e.id for e in tracked.history.durable_log().entries] == ["u2", "a3"]


def test_compaction_cannot_cut_at_a_tool_result() -> None:
    """The first kept entry may not be a tool result."""
    tracked = _tool_turns()
    with pytest.raises(InvalidCutPoint, match="is a tool result"):
        tracked.compact("t1")


def test_compaction_may_cut_at_the_calling_entry() -> None:
    """Cutting at the assistant entry that made the call keeps call and result together."""
    tracked = _tool_turns()
    tracked.compact("a1")
    assert tracked.session.first_kept_position == 1


def test_compaction_cannot_cut_between_a_call_and_its_later_result() -> None:
    """An entry between a call and its (already arrived) result is not a valid cut."""
    tracked = Tracked()
    tracked.append(user("go", id="u1"), assistant(id="a1", calls=[call("c1")]))
    tracked.append(custom("runtime note", id="n1"))
    tracked.append(tool("c1", "out", id="t1"), assistant("done", id="a2"))
    with pytest.raises(InvalidCutPoint, match="separate a tool call"):
        tracked.compact("n1")
    tracked.compact("a2")  # after the result: fine
    assert tracked.session.first_kept_position == 4


def test_compaction_cannot_cut_after_an_open_call() -> None:
    """While a call is open, the cut may not fall after it (its result has yet to arrive)."""
    tracked = Tracked()
    tracked.append(user("go", id="u1"), assistant(id="a1", calls=[call("c1")]))
    tracked.append(custom("waiting", id="n1"))
    with pytest.raises(InvalidCutPoint, match="has not arrived yet"):
        tracked.compact("n1")
    tracked.compact("a1")  # at the open call itself: fine
    assert tracked.session.first_kept_position == 1


def test_compaction_cannot_directly_follow_a_compaction_at_the_same_cut() -> None:
    """A second compaction needs an append in between, or a later cut: the engine may
    drop more when a summary and what it kept still do not fit."""
    tracked = _tool_turns()
    tracked.compact("u2")
    with pytest.raises(InvalidCutPoint, match="directly follows"):
        tracked.compact("u2")
    tracked.compact("a3")
    assert tracked.session.compaction_count == 2
    tracked.append(user("more", id="u3"))
    tracked.compact("a3")
    assert tracked.session.compaction_count == 3


def test_compaction_cannot_move_the_cut_backwards() -> None:
    """A later compaction's first kept entry is at or after the current one."""
    tracked = _tool_turns()
    tracked.compact("u2")
    tracked.append(user("more", id="u3"))
    with pytest.raises(InvalidCutPoint, match="only move the cut forward"):
        tracked.compact("a2")
    tracked.compact("u2")  # same cut, new summary: fine
    assert tracked.session.first_kept_position == 4


def test_compaction_must_shrink_the_context() -> None:
    """tokens_after must be below tokens_before when tokens_before is given."""
    tracked = _tool_turns()
    for after in (100, 101):
        with pytest.raises(InvalidRequest, match="not below tokens_before"):
            tracked.compact("u2", tokens_before=100, tokens_after=after)
    with pytest.raises(InvalidRequest, match="negative"):
        tracked.compact("u2", tokens_before=-1)
    assert tracked.session.compaction_count == 0
    tracked.compact("u2", tokens_before=0, tokens_after=10)  # no "before": not checked
    assert tracked.session.compaction_count == 1


def test_compaction_refusals_use_the_right_error_classes() -> None:
    """Malformed requests are InvalidRequest; cuts the session cannot take are InvalidCutPoint;
    a cut at an entry the session never had is EntryNotFound."""
    empty = Tracked()
    with pytest.raises(InvalidCutPoint, match="no entries"):
        empty.compact("x")
    tracked = _tool_turns()
    with pytest.raises(EntryNotFound, match="not in this session"):
        tracked.compact("missing")
    for compaction in (Compaction("  ", "u2"), Compaction("summary", "")):
        with pytest.raises(InvalidRequest) as malformed:
            tracked.session.record_compaction(compaction, tracked.history)
        assert not isinstance(malformed.value, PreconditionFailed)
    assert tracked.session.compaction_count == 0


# -- prune -----------------------------------------------------------------------------


def test_prune_records_decisions_for_tool_results() -> None:
    """A prune of tool results is recorded as one event."""
    tracked = _tool_turns()
    tracked.prune(trim("t1"), reason="cache-ttl")
    assert tracked.version == 4
    assert tracked.history.prompt_view().pruned == {"t1": trim("t1")}


@pytest.mark.parametrize("entry_id", ["u1", "a1", "a2"])
def test_prune_refuses_non_tool_entries(entry_id: str) -> None:
    """Only tool output is pruned."""
    tracked = _tool_turns()
    with pytest.raises(InvalidPrune, match="not a tool result"):
        tracked.prune(clear(entry_id))


def test_prune_refuses_unknown_entry() -> None:
    tracked = _tool_turns()
    with pytest.raises(EntryNotFound, match="not in this session"):
        tracked.prune(clear("nope"))


def test_prune_refuses_compacted_away_entry() -> None:
    """A tool result before the first kept entry is not in the prompt and cannot be pruned."""
    tracked = _tool_turns()
    tracked.compact("u2")
    with pytest.raises(InvalidPrune, match="compacted away"):
        tracked.prune(clear("t1"))


def test_prune_refuses_malformed_requests() -> None:
    """No decisions, the same entry twice, or negative lengths are InvalidRequest."""
    tracked = _tool_turns()
    with pytest.raises(InvalidRequest, match="at least one"):
        tracked.prune()
    with pytest.raises(InvalidRequest, match="pruned twice"):
        tracked.prune(trim("t1"), clear("t1"))
    with pytest.raises(InvalidRequest, match="negative"):
        tracked.prune(PruneDecision("t1", PruneAction.SOFT_TRIM, head_chars=-1))
    with pytest.raises(InvalidRequest, match="entry_id"):
        tracked.prune(clear(""))
    assert tracked.version == 3


# -- one token figure ------------------------------------------------------------------


def test_a_prune_lowers_the_running_estimate_to_what_the_view_shows() -> None:
    """The aggregate's figure (what the threshold and calibration use) stays the read
    side's exact one through guard decisions, prunes and compactions."""
    tracked = Tracked()
    tracked.append(user("read both", id="u", tokens=10))
    tracked.append(assistant(id="a", calls=[call("c1"), call("c2")], tokens=10))
    tracked.append(tool("c1", "x" * 40_000, id="t1", tokens=10_000))
    tracked.append(tool("c2", "y" * 40_000, id="t2", tokens=10_000))

    def agree() -> None:
        view = tracked.history.prompt_view()
        assert tracked.session.estimated_prompt_tokens == view.estimated_tokens

    agree()
    tracked.prune(trim("t1", 1_000, 1_000))
    agree()
    assert tracked.session.estimated_prompt_tokens < 12_000
    tracked.prune(clear("t1"), trim("t2"))
    agree()
    tracked.append(assistant("both read", id="a2", tokens=10))
    tracked.compact("a2")
    agree()


def test_usage_after_a_prune_calibrates_against_what_was_shown() -> None:
    """The provider counted the pruned view: the lesson is 1.0, not the estimate's error."""
    tracked = Tracked()
    tracked.append(user("go", id="u", tokens=1_000))
    tracked.append(assistant(id="a", calls=[call("c1")], tokens=10))
    tracked.append(tool("c1", "z" * 40_000, id="t1", tokens=10_000))
    tracked.prune(trim("t1", 2_000, 2_000))
    shown = tracked.history.prompt_view().estimated_tokens
    answered = Entry(
        "a2",
        None,
        None,
        Role.ASSISTANT,
        (TextBlock("done"),),
        usage=Usage(input_tokens=shown),
        token_count=5,
        prompt_ref=PromptRef(tracked.version, "openai", "h"),
    )
    tracked.append(answered)
    assert tracked.session.calibration == 1.0
    (lesson,) = tracked.events[-1].lessons  # type: ignore[attr-defined]
    assert lesson.estimated_tokens == shown == lesson.provider_tokens
