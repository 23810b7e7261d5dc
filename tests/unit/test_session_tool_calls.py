"""Tool calls and their results in the Session aggregate: which results it takes, and
what may come while calls are open."""

from __future__ import annotations

import pytest

from domain.content import Entry, Role, ToolResult
from domain.errors import DuplicateEntry, ToolCallsOpen, UnknownToolCall
from tests.unit.support import Tracked, assistant, call, custom, system, tool, user


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
