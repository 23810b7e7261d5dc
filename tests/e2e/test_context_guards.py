"""The context engine's guards end to end: a real server, SQLite and PostgreSQL, over gRPC.

A window too small to work in is refused, saying why, and what was appended is
kept; a tool's output too large for the window is cut short in the view, kept
whole in the log, and trimmed further beside a large system prompt rather than
refused.
"""

from __future__ import annotations

import json
import random

import grpc
import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.support.context_engine import create, error_info, view
from tests.support.grpc_calls import Stub, append, tool_call, tool_result, user
from tests.support.texts import code_text, log_text

# -- the window guard -----------------------------------------------------------------


def test_the_guard_refuses_a_window_too_small_to_work_in(store: Stub) -> None:
    session = create(store, model="gpt-4o", context_window_tokens=8_000)
    # Appends are stored all the same: losing a turn helps nobody.
    append(store, session.id, user("hello"))
    with pytest.raises(grpc.RpcError) as raised:
        view(store, session.id)
    assert raised.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "8,000 tokens" in str(raised.value.details())
    info = error_info(raised.value)
    assert info.reason == "CONTEXT_WINDOW_TOO_SMALL"
    assert info.metadata["minimum_tokens"] == "16000"
    assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).entry_count == 1

    small = create(store, model="gpt-4o", context_window_tokens=24_000)
    append(store, small.id, user("hello"))
    warned = view(store, small.id)
    assert warned.guard.level == "warn" and warned.guard.source == "session"


# -- the tool-result guard ------------------------------------------------------------


def test_a_large_tool_output_is_truncated_in_the_view_and_kept_whole(store: Stub) -> None:
    session = create(store, model="gpt-4o")
    append(store, session.id, user("run the tests"))
    append(store, session.id, tool_call("c1", "bash", {"command": "pytest"}))
    output = "".join(f"test_{i} PASSED\n" for i in range(12_000)) + "FAILED test_x: 1 error\n"
    (result_id,) = append(store, session.id, tool_result("c1", output)).entry_ids
    served = view(store, session.id)
    (decision,) = served.guarded
    assert decision.entry_id == result_id and decision.action == "truncate"
    shown = json.loads(served.messages_json)[-1]["content"]
    assert len(shown) < len(output) // 5
    assert "FAILED test_x: 1 error" in shown  # an important tail is kept
    assert f"kept as entry {result_id}" in shown and "GetEntry" not in shown
    whole = store.GetEntry(pb.GetEntryRequest(session_id=session.id, entry_id=result_id))
    assert whole.content[0].tool_result.content == output
    # A later, tighter setting does not change how that version showed it.
    store.UpdateSettings(
        pb.UpdateSettingsRequest(
            session_id=session.id,
            settings=pb.SessionSettings(
                tool_result_guard=pb.ToolResultGuardPolicy(live_cap_chars=2_000)
            ),
        )
    )
    assert view(store, session.id, version=served.version).request_hash == served.request_hash


def test_a_tool_result_beside_a_large_system_prompt_is_trimmed_to_fit_not_refused(
    store: Stub,
) -> None:
    """The guard's cap comes from the window alone; beside a system prompt that leaves
    less room than the cap, the result is trimmed further in the view. Refusing it
    would leave its call open with nothing the agent could send instead."""
    session = create(store, model="gpt-4o", context_window_tokens=16_384)
    system = pb.SystemPrompt(text=code_text(random.Random(3), 40_000))
    store.SetSystemPrompt(pb.SetSystemPromptRequest(session_id=session.id, system_prompt=system))
    append(store, session.id, user("run the tests please"))
    append(store, session.id, tool_call("call_1", "bash", {"command": "pytest"}))
    output = log_text(random.Random(1), 30_000, "FAILED tests/test_x.py::test_y")
    append(store, session.id, tool_result("call_1", output, is_error=True))
    served = view(store, session.id)
    assert served.estimated_tokens <= served.budget_tokens
    assert "FAILED tests/test_x.py::test_y" in served.messages_json
    assert not store.GetSession(pb.GetSessionRequest(session_id=session.id)).open_tool_call_ids
