"""The Session aggregate: what it accepts, what it refuses, and how big it stays."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from types import MappingProxyType

import pytest

from domain.compaction import Compaction
from domain.content import (
    Entry,
    ImageRef,
    PromptRef,
    Role,
    TextBlock,
    ToolCall,
    ToolResult,
    Usage,
)
from domain.context.overflow import REQUEST_TOO_LARGE, OverflowReport
from domain.errors import (
    ContextWindowTooSmall,
    DuplicateEntry,
    EntryNotFound,
    IdempotencyKeyReused,
    InvalidCutPoint,
    InvalidEntry,
    InvalidPrune,
    InvalidRequest,
    InvalidSettings,
    PreconditionFailed,
    ToolCallsOpen,
    UnknownToolCall,
    VersionConflict,
)
from domain.ids import HistoryIds
from domain.pruning import PruneAction, PruneDecision
from domain.session import Session
from domain.session_events import OverflowReported
from domain.session_state import IDEMPOTENCY_WINDOW
from domain.settings import CompactionPolicy, PruningPolicy, SessionSettings, WindowGuardPolicy
from projections.session_history import SessionHistory
from tests.unit.support import (
    WINDOW,
    Tracked,
    assistant,
    call,
    clear,
    custom,
    system,
    tool,
    trim,
    user,
)

# -- start and settings ---------------------------------------------------------------


def test_start_records_settings_and_window() -> None:
    """A new session is at version 1 with its settings and resolved window."""
    settings = SessionSettings(model="gpt-4o", title="t")
    session = Session.start("abc:1@x", settings, (128_000, "model"))
    assert session.version == 1
    assert session.settings == settings
    assert (session.context_window_tokens, session.context_window_source) == (128_000, "model")
    assert session.entry_count == 0
    assert session.last_entry_id is None


@pytest.mark.parametrize("session_id", ["", "has space", "a/", "x" * 129, "ü", "a b/c"])
def test_start_refuses_bad_session_id(session_id: str) -> None:
    """Session ids are 1-128 characters from a small safe alphabet."""
    with pytest.raises(InvalidRequest, match=r"session id|tenant"):
        Session.start(session_id, SessionSettings(), (200_000, "default"))


def test_a_session_is_stored_in_its_own_tenants_stream() -> None:
    """The default tenant's sessions by their bare ids, another's as tenant/id."""
    settings, window = SessionSettings(), (200_000, "default")
    assert Session.start("abc", settings, window).id == "abc"
    assert Session.start("acme/abc", settings, window, tenant="acme").id == "acme/abc"
    for stream, tenant in (("abc", "acme"), ("acme/abc", "default"), ("other/abc", "acme")):
        with pytest.raises(InvalidRequest, match="is not tenant"):
            Session.start(stream, settings, window, tenant=tenant)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (SessionSettings(context_window_tokens=-1), "context_window_tokens"),
        (SessionSettings(max_entry_bytes=0), "max_entry_bytes"),
        (SessionSettings(title="t" * 501), "title"),
        (
            SessionSettings(labels=MappingProxyType({str(i): "v" for i in range(65)})),
            "labels",
        ),
        (SessionSettings(pruning=PruningPolicy(mode="aggressive")), "pruning.mode"),
        (SessionSettings(pruning=PruningPolicy(soft_trim_ratio=0)), "soft_trim_ratio"),
        (SessionSettings(pruning=PruningPolicy(hard_clear_ratio=1.5)), "hard_clear_ratio"),
        (SessionSettings(pruning=PruningPolicy(ttl_seconds=-1)), "pruning.ttl_seconds"),
        (SessionSettings(compaction=CompactionPolicy(threshold_ratio=0)), "threshold_ratio"),
        (
            SessionSettings(compaction=CompactionPolicy(identifier_policy="drop")),
            "identifier_policy",
        ),
        (
            SessionSettings(compaction=CompactionPolicy(keep_recent_tokens=-5)),
            "compaction.keep_recent_tokens",
        ),
    ],
)
def test_invalid_settings_are_refused_at_start_and_on_change(
    settings: SessionSettings, message: str
) -> None:
    """Settings are validated both when a session starts and when they change."""
    with pytest.raises(InvalidSettings, match=message):
        Session.start("s", settings, (200_000, "default"))
    tracked = Tracked()
    with pytest.raises(InvalidSettings, match=message):
        tracked.change_settings(settings)
    assert tracked.session.settings == SessionSettings()


def test_change_settings_updates_window() -> None:
    """A settings change replaces the settings and the resolved window."""
    tracked = Tracked()
    tracked.change_settings(SessionSettings(context_window_tokens=50_000), (50_000, "session"))
    assert tracked.session.settings.context_window_tokens == 50_000
    assert tracked.session.context_window_source == "session"
    assert tracked.version == 2


def _overflow(tracked: Tracked, window_tokens: int) -> None:
    report = OverflowReport(
        "openai",
        400,
        f"maximum context length is {window_tokens} tokens",
        tracked.version,
        "",
        stated=(window_tokens, 0, 0),
    )
    tracked.session.report_overflow(report)
    tracked.sync()


def test_a_stated_window_below_the_guards_minimum_is_refused_and_records_nothing() -> None:
    tracked = Tracked(settings=SessionSettings(model="gpt-4o"))
    with pytest.raises(ContextWindowTooSmall, match="nothing is recorded"):
        _overflow(tracked, 8_192)
    tracked.sync()
    assert tracked.version == 1 and tracked.session.window_tokens == 200_000
    # With the guard off the client works in any window, and the lesson is learned.
    off = SessionSettings(model="gpt-4o", window_guard=WindowGuardPolicy(enabled=False))
    tracked.change_settings(off)
    _overflow(tracked, 8_192)
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

    _overflow(tracked, 20_000)
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
    _overflow(tracked, 30_000)
    assert windows() == {(30_000, "learned")}


def test_a_request_refused_for_its_bytes_teaches_a_byte_limit_in_every_reader() -> None:
    """The aggregate, the history it was synced with and a history folded from scratch
    agree on the limit, which teaches no window."""
    tracked = Tracked(settings=SessionSettings(model="claude-sonnet-4-5"))
    tracked.append(user("hello"))

    def report(refused_bytes: int) -> None:
        error = '{"type":"error","error":{"type":"request_too_large"}}'
        refusal = OverflowReport(
            "anthropic",
            413,
            error,
            tracked.version,
            "",
            kind=REQUEST_TOO_LARGE,
            refused_bytes=refused_bytes,
        )
        tracked.session.report_overflow(refusal, view_estimate=50_000)
        tracked.sync()

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


# -- append ---------------------------------------------------------------------------


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


# -- tool calls and results -----------------------------------------------------------


def test_tool_result_for_a_call_never_made() -> None:
    """A result must answer an open call."""
    tracked = Tracked()
    tracked.append(user("go"), assistant(calls=[call("c1")]))
    with pytest.raises(UnknownToolCall, match="'c2'"):
        tracked.append(tool("c2", "out"))


def test_tool_result_answering_twice_is_refused() -> None:
    """A call is answered once: a second result, later or in the same batch, is refused."""
    tracked = Tracked()
    tracked.append(user("go"), assistant(calls=[call("c1")]))
    with pytest.raises(UnknownToolCall, match="'c1'"):
        tracked.append(tool("c1", "out"), tool("c1", "again"))
    tracked.append(tool("c1", "out"))
    assert tracked.session.open_tool_calls == {}
    with pytest.raises(UnknownToolCall, match="already answered"):
        tracked.append(tool("c1", "again"))


def test_two_results_for_one_call_in_one_entry() -> None:
    """One tool entry cannot answer the same call twice."""
    tracked = Tracked()
    tracked.append(user("go"), assistant(calls=[call("c1")]))
    entry = Entry("", None, None, Role.TOOL, (ToolResult("c1", "a"), ToolResult("c1", "b")))
    with pytest.raises(UnknownToolCall):
        tracked.append(entry)


def test_open_tool_calls_follow_results() -> None:
    """Calls are open until answered, and remember the position of the calling entry."""
    tracked = Tracked()
    tracked.append(user("go"), assistant(calls=[call("c1"), call("c2")]))
    assert tracked.session.open_tool_calls == {"c1": 1, "c2": 1}
    tracked.append(tool("c2", "two"))
    assert tracked.session.open_tool_calls == {"c1": 1}


def test_tool_call_ids_are_never_reused() -> None:
    """A call id cannot be used twice: not in one entry, not after it was answered."""
    tracked = Tracked()
    tracked.append(user("go"), assistant(calls=[call("c1")]))
    with pytest.raises(DuplicateEntry, match="'c9'"):
        tracked.append(tool("c1", "ok"), user("more"), assistant(calls=[call("c9"), call("c9")]))
    assert tracked.session.open_tool_calls == {"c1": 1}
    tracked.append(tool("c1", "ok"), user("again"))
    with pytest.raises(DuplicateEntry, match="'c1' is already used"):
        tracked.append(assistant(calls=[call("c1")]))


@pytest.mark.parametrize("role", ["user", "assistant", "system"])
def test_only_results_may_follow_open_tool_calls(role: str) -> None:
    """Between a call and its result only results (and runtime notes) may come."""
    tracked = Tracked()
    tracked.append(user("go"), assistant(calls=[call("c1"), call("c2")]))
    following = {"user": user("steer"), "assistant": assistant("hm"), "system": system("s")}
    with pytest.raises(ToolCallsOpen, match="'c1', 'c2' are still open"):
        tracked.append(following[role])
    with pytest.raises(ToolCallsOpen, match="'c2' are still open"):
        tracked.append(tool("c1", "ok"), following[role])
    tracked.append(custom("note"), tool("c1", "ok"), tool("c2", "ok"), following[role])
    assert tracked.session.open_tool_calls == {}


# -- entry validation -----------------------------------------------------------------


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


# -- idempotency and expected version -------------------------------------------------


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


# -- compaction -----------------------------------------------------------------------


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


# -- prune ----------------------------------------------------------------------------


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


# -- state size -----------------------------------------------------------------------


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


# -- validation found by a new user ----------------------------------------------------


def test_negative_usage_counts_are_refused() -> None:
    tracked = Tracked()
    tracked.append(user("hi"))
    bad = assistant("hello", usage=Usage(input_tokens=10, output_tokens=-1))
    with pytest.raises(InvalidEntry, match=r"usage\.output_tokens is -1"):
        tracked.append(bad)
    assert tracked.session.entry_count == 1


def test_a_negative_expected_version_is_a_malformed_request_not_a_conflict() -> None:
    tracked = Tracked()
    with pytest.raises(InvalidRequest, match="negative") as refused:
        tracked.session.check_expected_version(-1)
    assert not isinstance(refused.value, VersionConflict)


def test_a_settings_change_that_changes_nothing_records_nothing() -> None:
    tracked = Tracked(settings=SessionSettings(title="t"))
    version = tracked.version
    tracked.change_settings(SessionSettings(title="t"))
    assert tracked.version == version
    tracked.change_settings(SessionSettings(title="t"), window=(100_000, "session"))
    assert tracked.version == version + 1


def test_max_entry_bytes_cannot_exceed_what_the_server_can_take() -> None:
    with pytest.raises(InvalidSettings, match="over this server's limit"):
        Session.start(
            "s", SessionSettings(max_entry_bytes=32 << 20), WINDOW, max_entry_bytes_limit=16 << 20
        )
    tracked = Tracked()
    with pytest.raises(InvalidSettings, match="over this server's limit"):
        tracked.session.change_settings(
            SessionSettings(max_entry_bytes=17 << 20), WINDOW, max_entry_bytes_limit=16 << 20
        )


# -- one token figure ---------------------------------------------------------------------


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
