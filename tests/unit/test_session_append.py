"""Appending to the Session aggregate: ids and parents, the entries it refuses, retries
and expected versions, and how big its state stays."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from domain.content import Entry, ImageRef, Role, TextBlock, ToolCall, ToolResult, Usage
from domain.errors import (
    DuplicateEntry,
    IdempotencyKeyReused,
    InvalidEntry,
    InvalidRequest,
    VersionConflict,
)
from domain.ids import HistoryIds
from domain.session import Session
from domain.session_state import IDEMPOTENCY_WINDOW
from domain.settings import SessionSettings
from tests.unit.support import Tracked, assistant, call, tool, user

# -- append ----------------------------------------------------------------------------


def test_append_fills_ids_parents_and_timestamps() -> None:
    """Empty ids get fresh unique ids, each entry chains to the previous one, across appends."""
    tracked = Tracked()
    before = datetime.now(UTC)
    first = tracked.append(user("hi"), assistant("hello"))
    second = tracked.append(user("again"))
    after = datetime.now(UTC)
    stored = [*first, *second]
    ids = [e.id for e in stored]
    assert all(ids) and len(set(ids)) == 3
    assert [e.parent_id for e in stored] == [None, ids[0], ids[1]]
    assert all(e.timestamp is not None and before <= e.timestamp <= after for e in stored)
    assert tracked.session.last_entry_id == ids[2]
    assert [e.id for e in tracked.history.durable_log().entries] == ids


def test_append_keeps_given_ids_parents_and_timestamps() -> None:
    """What the client sets is kept: its id, a known parent id, its timestamp."""
    tracked = Tracked()
    tracked.append(user("a", id="u1"), assistant("b", id="a1"))
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    (stored,) = tracked.append(replace(user("branch", id="u2"), parent_id="u1", timestamp=when))
    assert (stored.id, stored.parent_id, stored.timestamp) == ("u2", "u1", when)


def test_append_refuses_unknown_parent() -> None:
    """A parent id must name an entry of this session."""
    tracked = Tracked()
    tracked.append(user("a", id="u1"))
    with pytest.raises(InvalidRequest, match="parent_id 'nope'"):
        tracked.append(replace(user("b"), parent_id="nope"))


def test_append_refuses_empty_batch() -> None:
    """An append needs at least one entry."""
    tracked = Tracked()
    with pytest.raises(InvalidRequest, match="at least one entry"):
        tracked.session.append([], HistoryIds(tracked.history))


def test_append_accumulates_tokens_and_usage() -> None:
    """The aggregate keeps running totals of stored token counts and provider usage."""
    tracked = Tracked()
    tracked.append(
        user("a", tokens=5),
        assistant("b", tokens=7, usage=Usage(10, 2, 3, 0)),
    )
    tracked.append(assistant("c", tokens=1, usage=Usage(20, 4, 0, 1)))
    assert tracked.session.total_tokens == 13
    assert tracked.session.usage == Usage(30, 6, 3, 1)
    assert tracked.session.entry_count == 3


def test_duplicate_id_within_one_append() -> None:
    """Two entries of one batch may not share an id; nothing is recorded."""
    tracked = Tracked()
    with pytest.raises(DuplicateEntry, match="'dup'"):
        tracked.append(user("a", id="dup"), assistant("b", id="dup"))
    assert tracked.version == 1
    assert tracked.session.entry_count == 0


def test_duplicate_id_against_history() -> None:
    """An id already stored in an earlier append is refused, even long after."""
    tracked = Tracked()
    tracked.append(user("a", id="first"))
    tracked.append(assistant("b"), user("c"))
    with pytest.raises(DuplicateEntry, match="'first'"):
        tracked.append(assistant("d", id="first"))
    assert tracked.version == 3


# -- entry validation ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (Entry("", None, None, Role.USER, ()), "no content blocks"),
        (Entry("", None, None, Role.USER, (TextBlock("  \n\t"),)), "every content block is blank"),
        (Entry("", None, None, Role.USER, (ToolCall("c", "f"),)), "not tool_call"),
        (Entry("", None, None, Role.TOOL, (TextBlock("x"),)), "may hold tool_result"),
        (Entry("", None, None, Role.SYSTEM, (ImageRef("http://x/i.png"),)), "not image"),
        (Entry("", None, None, Role.ASSISTANT, (ToolCall("c", "f", "{nope"),)), "not valid JSON"),
        (Entry("", None, None, Role.ASSISTANT, (ToolCall("c", "f", "[1]"),)), "JSON object"),
        (Entry("", None, None, Role.ASSISTANT, (ToolCall("", "f"),)), "needs an id"),
        (Entry("", None, None, Role.ASSISTANT, (ToolCall("c", ""),)), "needs a name"),
        (Entry("", None, None, Role.TOOL, (ToolResult("", "x"),)), "tool_call_id"),
        (Entry("", None, None, Role.USER, (ImageRef(""),)), "needs a uri"),
        (
            Entry("", None, None, Role.USER, (TextBlock("x"),), usage=Usage(1, 1)),
            "assistant entries only",
        ),
    ],
)
def test_invalid_entries_are_refused(entry: Entry, message: str) -> None:
    """Malformed entries are refused with InvalidEntry naming the problem; nothing is stored."""
    tracked = Tracked()
    with pytest.raises(InvalidEntry, match=message):
        tracked.append(entry)
    assert tracked.version == 1


def test_oversized_entry_names_the_limit() -> None:
    """The size limit comes from the session's settings, counts UTF-8 bytes, and is named."""
    tracked = Tracked(settings=SessionSettings(max_entry_bytes=1_200))
    tracked.append(user("x" * 1_200))  # exactly at the limit is fine
    with pytest.raises(InvalidEntry) as refused:
        tracked.append(user("日本" * 201))  # 402 characters, 1,206 bytes
    message = str(refused.value)
    assert "1,206 bytes" in message
    assert "1,200" in message
    assert "max_entry_bytes" in message


def test_raised_limit_applies_after_settings_change() -> None:
    """An entry refused under a small limit is accepted once the limit is raised."""
    tracked = Tracked(settings=SessionSettings(max_entry_bytes=100))
    big = user("y" * 500)
    with pytest.raises(InvalidEntry, match="max_entry_bytes"):
        tracked.append(big)
    tracked.change_settings(SessionSettings(max_entry_bytes=1_000))
    assert len(tracked.append(big)) == 1


def test_negative_usage_counts_are_refused() -> None:
    tracked = Tracked()
    tracked.append(user("hi"))
    bad = assistant("hello", usage=Usage(input_tokens=10, output_tokens=-1))
    with pytest.raises(InvalidEntry, match=r"usage\.output_tokens is -1"):
        tracked.append(bad)
    assert tracked.session.entry_count == 1


# -- idempotency and expected version --------------------------------------------------


def test_earlier_append_returns_version_of_the_keyed_append() -> None:
    """A retry with the same key and fingerprint is answered with the first append's version."""
    tracked = Tracked()
    tracked.append(user("a"), key="k1", fingerprint="f1")
    tracked.append(assistant("b"), key="k2", fingerprint="f2")
    assert tracked.session.earlier_append("k1", "f1") == 2
    assert tracked.session.earlier_append("k2", "f2") == 3
    assert tracked.session.earlier_append("k3", "f3") is None
    assert tracked.session.earlier_append("", "f1") is None


def test_reused_key_with_different_request_is_refused() -> None:
    """The same key with a different fingerprint is a client bug, not a retry."""
    tracked = Tracked()
    tracked.append(user("a"), key="k1", fingerprint="f1")
    with pytest.raises(IdempotencyKeyReused, match="'k1'"):
        tracked.session.earlier_append("k1", "other")


def test_idempotency_window_is_bounded() -> None:
    """Only the last IDEMPOTENCY_WINDOW keys are remembered, oldest forgotten first."""
    tracked = Tracked()
    total = IDEMPOTENCY_WINDOW + 10
    for i in range(total):
        tracked.append(user(f"m{i}"), key=f"k{i}", fingerprint=f"f{i}")
    assert len(tracked.session.recent_appends) == IDEMPOTENCY_WINDOW
    for i in range(10):
        assert tracked.session.earlier_append(f"k{i}", "anything") is None
    oldest_kept = 10
    assert tracked.session.earlier_append(f"k{oldest_kept}", f"f{oldest_kept}") == oldest_kept + 2
    assert tracked.session.earlier_append(f"k{total - 1}", f"f{total - 1}") == total + 1


def test_expected_version() -> None:
    """An expected version other than the current one is a VersionConflict; None skips the check."""
    tracked = Tracked()
    tracked.append(user("a"))
    tracked.session.check_expected_version(None)
    tracked.session.check_expected_version(2)
    with pytest.raises(VersionConflict) as conflict:
        tracked.session.check_expected_version(1)
    assert (conflict.value.expected, conflict.value.actual) == (1, 2)
    with pytest.raises(VersionConflict):
        tracked.session.check_expected_version(3)


def test_a_negative_expected_version_is_a_malformed_request_not_a_conflict() -> None:
    tracked = Tracked()
    with pytest.raises(InvalidRequest, match="negative") as refused:
        tracked.session.check_expected_version(-1)
    assert not isinstance(refused.value, VersionConflict)


# -- state size ------------------------------------------------------------------------


def _state(session: Session) -> dict[str, object]:
    return {k: v for k, v in vars(session).items() if k != "_pending_events"}


@pytest.mark.parametrize(("keyed", "early"), [(False, 10), (True, 1_500)])
def test_state_does_not_grow_with_entry_count(keyed: bool, early: int) -> None:
    """The aggregate's state after 2,000 appends is no bigger than after ``early`` appends.

    Each append is a tool turn (a call and its answer). With keys, the
    idempotency window is full at both measurements (and its versions have four
    digits at both), so only counters' digits may differ.
    """
    tracked = Tracked()
    sizes: dict[int, int] = {}
    attributes: dict[int, set[str]] = {}
    for i in range(1, 2_001):
        tracked.append(
            assistant(calls=[call(f"call-{i:05d}")], tokens=3, usage=Usage(1, 1)),
            tool(f"call-{i:05d}", "out", tokens=2),
            key=f"key-{i:05d}" if keyed else "",
            fingerprint=f"{i:064d}" if keyed else "",
        )
        if i in (early, 2_000):
            state = _state(tracked.session)
            sizes[i] = len(repr(state))
            attributes[i] = set(state)
    assert tracked.session.entry_count == 4_000
    assert attributes[early] == attributes[2_000]
    assert len(tracked.session.recent_appends) == (IDEMPOTENCY_WINDOW if keyed else 0)
    # Any per-entry state would add thousands of characters here.
    assert sizes[2_000] - sizes[early] < 40
