"""The context engine end to end: a real server, SQLite and PostgreSQL, over gRPC.

An agent runtime that only appends turns and asks for the prompt view gets a
view that fits the window, with every decision recorded, replayable and
explained.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections.abc import Callable, Iterator

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.conftest import start_server
from tests.e2e.test_grpc_api import Stub, append, refused, text, tool_call, tool_result, user
from tests.support.agentloop.provider import Counter
from tests.support.fake_provider import FakeProvider, delay, fail
from tests.support.texts import code_text, log_text

CJK = "上下文窗口的管理需要精确地计算词元数量否则压缩会来得太晚。"


def create(store: Stub, **settings: object) -> pb.Session:
    return store.CreateSession(
        pb.CreateSessionRequest(settings=pb.SessionSettings(**settings))  # type: ignore[arg-type]
    )


def view(store: Stub, session_id: str, **fields: object) -> pb.PromptView:
    return store.GetPromptView(pb.GetPromptViewRequest(session_id=session_id, **fields))  # type: ignore[arg-type]


def events(store: Stub, session_id: str) -> list[pb.SessionEvent]:
    return list(store.ReadEvents(pb.ReadEventsRequest(session_id=session_id)))


def of_kind(store: Stub, session_id: str, kind: str) -> list[pb.SessionEvent]:
    return [e for e in events(store, session_id) if e.WhichOneof("event") == kind]


def turn(store: Stub, session_id: str, n: int, output_chars: int) -> None:
    """One agent turn: a question (CJK), a tool call, its large output, an answer."""
    append(store, session_id, user(f"第{n}轮 {CJK * 4} Please read file_{n}.py"))
    append(store, session_id, tool_call(f"call_{n}", "read", {"path": f"src/file_{n}.py"}))
    output = f"# file_{n}.py\n" + "".join(f"line {i}: value = {i * n}\n" for i in range(99_999))
    append(store, session_id, tool_result(f"call_{n}", output[:output_chars]))
    append(store, session_id, text(pb.ROLE_ASSISTANT, f"file_{n}.py holds {n} values."))


def eventually(check: Callable[[], object], within: float = 30) -> bool:
    """Whether ``check`` holds within ``within`` seconds (background compactions)."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    (detail,) = status.details
    info = error_details_pb2.ErrorInfo()
    assert detail.Unpack(info)
    return info


# -- 1. the guard ---------------------------------------------------------------------


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


# -- 2. the tool-result guard ---------------------------------------------------------


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


# -- 3. compaction by threshold --------------------------------------------------------


def test_a_long_session_compacts_by_itself_and_every_view_fits(store: Stub) -> None:
    session = create(
        store,
        model="gpt-4o",
        context_window_tokens=40_000,
        compaction=pb.CompactionPolicy(keep_recent_tokens=6_000),
    )
    served: list[pb.PromptView] = []
    for n in range(12):
        turn(store, session.id, n, output_chars=30_000)
        current = view(store, session.id)
        assert current.estimated_tokens <= current.budget_tokens
        served.append(current)
    compactions = of_kind(store, session.id, "compaction_recorded")
    assert compactions, "the session never compacted"
    receipt = compactions[0].compaction_recorded
    assert receipt.reason == "threshold"
    assert receipt.tokens_after < receipt.tokens_before
    assert receipt.entries_covered > 0 and receipt.first_covered_entry_id
    assert receipt.tokens_before_source.startswith("tokenizer:")
    assert receipt.fallback_stage in ("full", "split", "clipped", "oversized-omitted", "hard-drop")
    assert "## Goal" in receipt.summary
    # Replay: every view served reads back the same at its version, hash and all.
    for earlier in served:
        again = view(store, session.id, version=earlier.version)
        assert (again.messages_json, again.request_hash) == (
            earlier.messages_json,
            earlier.request_hash,
        )


def test_a_user_message_accepted_at_its_write_is_served_whatever_came_before(
    store: Stub,
) -> None:
    """A message that fits beside the system prompt is accepted; the history before it
    then goes for a note short enough to leave it room, however little that is."""
    for turns in (0, 1, 3):
        session = create(store, model="gpt-4o", context_window_tokens=16_384)
        for n in range(turns):
            append(store, session.id, user(f"turn {n}: run the tests"))
            append(store, session.id, tool_call(f"call_{n}", "bash", {"command": "pytest"}))
            output = log_text(random.Random(n), 8_000, "3 passed")
            append(store, session.id, tool_result(f"call_{n}", output))
            append(store, session.id, text(pb.ROLE_ASSISTANT, "done"))
        body = code_text(random.Random(9), 42_000) + "\nPlease review this file."
        appended = store.AppendEntries(
            pb.AppendEntriesRequest(
                session_id=session.id,
                entries=[user(body)],
                view_after_append=pb.ViewAfterAppend(format=pb.PROMPT_FORMAT_OPENAI),
            )
        )
        assert not appended.view_after_append_error, (turns, appended.view_after_append_error)
        served = view(store, session.id)
        assert served.estimated_tokens <= served.budget_tokens
        assert json.loads(served.messages_json)[-1]["content"] == body


# -- 4. overflow reports ---------------------------------------------------------------

OPENAI_OVERFLOW = json.dumps(
    {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 131000 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
)


# Anthropic's words when it states no figures.
ANTHROPIC_OVERFLOW = json.dumps(
    {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long"}}
)


def test_an_overflow_without_figures_truncates_then_compacts_then_gives_up(store: Stub) -> None:
    session = create(store, model="gpt-4o", compaction=pb.CompactionPolicy(keep_recent_tokens=500))
    for n in range(4):
        turn(store, session.id, n, output_chars=12_000)

    def report(current: pb.PromptView) -> pb.PromptView:
        return store.ReportOverflow(
            pb.ReportOverflowRequest(
                session_id=session.id,
                error_text=ANTHROPIC_OVERFLOW,
                status_code=400,
                provider="anthropic",
                view_version=current.version,
                view_hash=current.request_hash,
            )
        )

    first = report(view(store, session.id))
    assert first.actions[0].kind == "truncated"
    assert first.pruned
    second = report(first)
    assert second.actions[0].kind == "compacted"
    third = report(second)
    assert third.actions
    with pytest.raises(grpc.RpcError) as raised:
        report(third)
    assert raised.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert error_info(raised.value).reason == "compaction_failure"
    assert len(of_kind(store, session.id, "overflow_reported")) == 3
    # A new turn starts a new count.
    append(store, session.id, user("next question"))
    report(view(store, session.id))


def test_an_overflow_teaches_the_window_and_the_count_and_views_keep_to_them(
    store: Stub,
) -> None:
    """The model's metadata says 128k, the provider serves 32k and counts 1.2x the store:
    one overflow report, and every view after it fits what the provider really takes."""
    session = create(store, model="gpt-4o")
    for n in range(12):
        turn(store, session.id, n, output_chars=12_000)
    refused = view(store, session.id)
    assert refused.context_window_tokens == 128_000
    assert refused.estimated_tokens > 32_768
    counted = int(refused.uncalibrated_tokens * 1.2)
    error = json.dumps(
        {
            "error": {
                "message": "This model's maximum context length is 32768 tokens. However, "
                f"your messages resulted in {counted} tokens. Please reduce the length of "
                "the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    )
    served = store.ReportOverflow(
        pb.ReportOverflowRequest(
            session_id=session.id,
            error_text=error,
            status_code=400,
            view_version=refused.version,
            view_hash=refused.request_hash,
        )
    )
    assert served.context_window_tokens == 32_768
    assert served.guard.source == "learned"
    assert served.calibration == pytest.approx(1.2, abs=0.01)
    assert served.budget_tokens == 32_768 - 4_096
    assert served.estimated_tokens <= served.budget_tokens
    (reported,) = of_kind(store, session.id, "overflow_reported")
    lesson = reported.overflow_reported
    assert lesson.learned_window_tokens == 32_768
    assert lesson.lesson.provider_tokens == counted
    assert lesson.lesson.estimated_tokens == refused.uncalibrated_tokens
    # Turns go on with no more reports: every view keeps to the learned window.
    for n in range(12, 18):
        turn(store, session.id, n, output_chars=12_000)
        current = view(store, session.id)
        assert current.estimated_tokens <= current.budget_tokens == 28_672


def overflow_error(window_tokens: int, prompt_tokens: int) -> str:
    """OpenAI's overflow error, stating the window and its count of the prompt."""
    message = (
        f"This model's maximum context length is {window_tokens} tokens. However, your "
        f"messages resulted in {prompt_tokens} tokens. Please reduce the length of the messages."
    )
    error = {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}
    return json.dumps({"error": error})


def report_overflow(
    store: Stub, refused_view: pb.PromptView, error_text: str, provider: str = "openai"
) -> pb.PromptView:
    """``refused_view`` reported refused by ``provider``, in its words ``error_text``."""
    return store.ReportOverflow(
        pb.ReportOverflowRequest(
            session_id=refused_view.session_id,
            provider=provider,
            status_code=400,
            error_text=error_text,
            view_version=refused_view.version,
            view_hash=refused_view.request_hash,
            format=pb.PROMPT_FORMAT_OPENAI,
        )
    )


def test_an_overflow_stating_a_window_below_the_guards_minimum_is_refused_whole(
    store: Stub,
) -> None:
    """Learning a window the guard refuses would refuse every later view: the report is
    refused before anything is recorded, saying what was read and what to do."""
    session = create(store, model="gpt-4o")
    append(store, session.id, user("hello there " * 50))
    before = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
    version = store.GetSession(pb.GetSessionRequest(session_id=session.id)).version

    with pytest.raises(grpc.RpcError) as raised:
        report_overflow(store, before, overflow_error(100, 5_000))
    assert raised.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    message = str(raised.value.details())
    assert "context window of 100 tokens" in message
    assert "maximum context length is 100 tokens" in message  # what was read
    assert "nothing is recorded" in message
    assert error_info(raised.value).reason == "CONTEXT_WINDOW_TOO_SMALL"

    assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).version == version
    assert not of_kind(store, session.id, "overflow_reported")
    after = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
    assert after.version == before.version
    assert after.request_hash == before.request_hash
    assert after.context_window_tokens == before.context_window_tokens == 128_000
    # The window the client sets is taken as before.
    updated = store.UpdateSettings(
        pb.UpdateSettingsRequest(
            session_id=session.id, settings=pb.SessionSettings(context_window_tokens=64_000)
        )
    )
    assert updated.settings.context_window_tokens == 64_000


def test_a_window_the_client_sets_supersedes_the_one_an_overflow_taught(store: Stub) -> None:
    """The remedy the guard names works: context_window_tokens set after a lesson is the
    window in force, in views, the report and the session, until a later lesson."""
    session = create(store, model="gpt-4o", window_guard=pb.WindowGuardPolicy(enabled=False))
    append(store, session.id, user("hello there " * 50))
    taught = report_overflow(
        store, view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI), overflow_error(8_192, 9_000)
    )
    assert (taught.context_window_tokens, taught.guard.source) == (8_192, "learned")
    got = store.GetSession(pb.GetSessionRequest(session_id=session.id))
    assert (got.settings.context_window_tokens, got.context_window_source) == (8_192, "learned")

    # With the guard on, the learned window refuses views, naming the remedy.
    guarded = pb.SessionSettings(window_guard=pb.WindowGuardPolicy(enabled=True))
    store.UpdateSettings(pb.UpdateSettingsRequest(session_id=session.id, settings=guarded))
    message = refused(lambda: view(store, session.id), grpc.StatusCode.FAILED_PRECONDITION)
    assert "8,192 tokens (from learned)" in message
    assert "set context_window_tokens" in message
    # A fork that names a window takes it over the lesson; one that does not keeps it.
    fork = store.ForkSession(
        pb.ForkSessionRequest(
            session_id=session.id, settings=pb.SessionSettings(context_window_tokens=20_000)
        )
    )
    assert view(store, fork.id).context_window_tokens == 20_000
    fork = store.ForkSession(pb.ForkSessionRequest(session_id=session.id))
    assert (fork.settings.context_window_tokens, fork.context_window_source) == (8_192, "learned")
    refused(lambda: view(store, fork.id), grpc.StatusCode.FAILED_PRECONDITION)

    def set_window(tokens: int) -> pb.Session:
        return store.UpdateSettings(
            pb.UpdateSettingsRequest(
                session_id=session.id, settings=pb.SessionSettings(context_window_tokens=tokens)
            )
        )

    def in_force() -> tuple[int, str]:
        """The window in force and its source, as views, the report and the session
        agree on them (the session showed the resolved window under a learned one)."""
        served = view(store, session.id)
        report = store.GetContextReport(pb.GetContextReportRequest(session_id=session.id))
        got = store.GetSession(pb.GetSessionRequest(session_id=session.id))
        page = pb.ListSessionsRequest(page_size=100, min_position=session.position)
        (listed,) = [s for s in store.ListSessions(page).sessions if s.id == session.id]
        for shown in (
            (report.window.window_tokens, report.window.source),
            (got.settings.context_window_tokens, got.context_window_source),
            (listed.settings.context_window_tokens, listed.context_window_source),
        ):
            assert shown == (served.context_window_tokens, served.guard.source)
        return served.context_window_tokens, served.guard.source

    updated = set_window(20_000)
    assert (updated.settings.context_window_tokens, updated.context_window_source) == (
        20_000,
        "session",
    )
    assert in_force() == (20_000, "session")

    # A later overflow teaches again; another setting leaves that lesson in force...
    report_overflow(
        store,
        view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI),
        overflow_error(18_000, 19_000),
    )
    assert in_force() == (18_000, "learned")
    titled = store.UpdateSettings(
        pb.UpdateSettingsRequest(session_id=session.id, settings=pb.SessionSettings(title="t"))
    )
    assert (titled.settings.context_window_tokens, titled.context_window_source) == (
        18_000,
        "learned",
    )
    assert in_force() == (18_000, "learned")
    # ...and naming the window again, even unchanged, supersedes it.
    set_window(20_000)
    assert in_force() == (20_000, "session")


def test_with_compaction_off_an_overflow_is_recorded_and_nothing_compacted(
    store: Stub,
) -> None:
    """Mode 'off' leaves compacting to the client: an overflow teaches the window it
    states, and only a request compacts."""
    session = create(store, model="gpt-4o", compaction=pb.CompactionPolicy(mode="off"))
    for n in range(4):
        turn(store, session.id, n, output_chars=12_000)
    refused_view = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
    error = overflow_error(20_000, refused_view.estimated_tokens + 5_000)
    answer = report_overflow(store, refused_view, error)
    assert answer.actions[0].kind == "not_compacted"
    assert "compaction.mode is 'off'" in answer.actions[0].detail
    assert answer.context_window_tokens == 20_000
    assert of_kind(store, session.id, "overflow_reported")
    assert not of_kind(store, session.id, "compaction_recorded")
    assert store.Compact(pb.CompactRequest(session_id=session.id, force=True)).compacted
    assert of_kind(store, session.id, "compaction_recorded")


def test_an_error_that_is_not_an_overflow_is_refused(store: Stub) -> None:
    session = create(store, model="gpt-4o")
    append(store, session.id, user("hi"))
    current = view(store, session.id)
    rate_limited = json.dumps(
        {
            "error": {
                "message": "Rate limit reached",
                "type": "tokens",
                "code": "rate_limit_exceeded",
            }
        }
    )
    message = refused(
        lambda: store.ReportOverflow(
            pb.ReportOverflowRequest(
                session_id=session.id,
                error_text=rate_limited,
                status_code=429,
                provider="openai",
                view_version=current.version,
            )
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "not a context overflow" in message
    assert not of_kind(store, session.id, "overflow_reported")


RESPONSES_OVERFLOW = {
    "type": "invalid_request_error",
    "code": "context_length_exceeded",
    "message": "Your input exceeds the context window of this model. Please adjust your "
    "input and try again.",
    "param": "input",
}
# Real overflow errors in words litellm does not map, each with the window it teaches
# (0: it states none).
OVERFLOW_KINDS = {
    "openai responses": ("openai", 400, {"error": RESPONSES_OVERFLOW}, 0),
    "openai responses stream": (
        "openai",
        400,
        {"type": "error", "sequence_number": 2, "error": RESPONSES_OVERFLOW},
        0,
    ),
    "openai responses stream, code on the event": (
        "openai",
        200,
        {"type": "error", "sequence_number": 2, **RESPONSES_OVERFLOW},
        0,
    ),
    "xai": (
        "xai",
        400,
        {
            "code": "Client specified an invalid argument",
            "error": "This model's maximum prompt length is 131072 but the request contains "
            "136973 tokens.",
        },
        131_072,
    ),
    "groq": (
        "groq",
        400,
        {
            "error": {
                "message": "Please reduce the length of the messages or completion.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        0,
    ),
    "ollama": ("ollama", 400, {"error": "the input length exceeds the context length"}, 0),
    "cohere": (
        "cohere",
        400,
        {
            "message": "too many tokens: total number of tokens in the prompt cannot exceed "
            "32768 - received 31907. Try using a shorter prompt or a smaller max_tokens value."
        },
        32_768,
    ),
}


@pytest.mark.parametrize(
    ("provider", "status", "body", "window"), OVERFLOW_KINDS.values(), ids=OVERFLOW_KINDS.keys()
)
def test_providers_overflow_errors_are_taken_as_overflows(
    store: Stub, provider: str, status: int, body: dict[str, object], window: int
) -> None:
    """They were refused as "not a context overflow", stranding the agent at its first."""
    session = create(store, model="gpt-4o")
    for n in range(3):
        turn(store, session.id, n, output_chars=12_000)
    refused_view = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
    served = store.ReportOverflow(
        pb.ReportOverflowRequest(
            session_id=session.id,
            error_text=json.dumps(body),
            status_code=status,
            provider=provider,
            view_version=refused_view.version,
            view_hash=refused_view.request_hash,
            format=pb.PROMPT_FORMAT_OPENAI,
        )
    )
    assert served.actions
    (reported,) = of_kind(store, session.id, "overflow_reported")
    assert reported.overflow_reported.kind == "context_window_exceeded"
    if window:
        assert reported.overflow_reported.learned_window_tokens == window
        assert served.context_window_tokens == min(window, 128_000)


# Bedrock's words: no figure at all.
BEDROCK_OVERFLOW = json.dumps({"message": "Input is too long for requested model."})


class ServesLessThanItsMetadata:
    """A provider stand-in serving ``window_tokens`` of a model whose metadata says more,
    refusing longer prompts in Bedrock's words, which state no figure. It counts what
    it is sent its own way (o200k_base and a few tokens a message)."""

    def __init__(self, window_tokens: int) -> None:
        self.window_tokens = window_tokens
        self.counter = Counter(1.0)
        self.counts: list[int] = []

    def refuses(self, shown: pb.PromptView) -> bool:
        assert not shown.appended
        body = {"messages": json.loads(shown.messages_json), "tools": json.loads(shown.tools_json)}
        self.counts.append(self.counter.request(body))
        return self.counts[-1] > self.window_tokens


def report_figureless_overflow(store: Stub, refused_view: pb.PromptView) -> pb.PromptView:
    return report_overflow(store, refused_view, BEDROCK_OVERFLOW, provider="bedrock")


def test_an_overflow_stating_no_figures_teaches_a_window_no_later_view_passes(
    store: Stub,
) -> None:
    """The metadata says 128k, the provider serves 24k and says only "too long". The
    store compacted below the refused prompt but kept believing 128k, so the view grew
    back over the provider's window every few turns, and a turn could spend every
    attempt. One report teaches a window no larger than the refused prompt."""
    session = create(store, model="gpt-4o")
    provider = ServesLessThanItsMetadata(24_000)
    refused: list[int] = []
    for n in range(24):
        turn(store, session.id, n, output_chars=6_000)
        shown = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
        while provider.refuses(shown):
            refused.append(provider.counts[-1])
            assert len(refused) == 1, f"turn {n}: the provider refused again ({refused})"
            shown = report_figureless_overflow(store, shown)
    assert refused, "the provider never refused: the test proved nothing"
    # The window learned is the refused prompt, as the store counts it (within 2% of
    # the provider's count), and every view since kept to it.
    (reported,) = of_kind(store, session.id, "overflow_reported")
    learned = reported.overflow_reported.learned_window_tokens
    assert 24_000 < learned < refused[0] * 1.02
    current = view(store, session.id)
    assert (current.context_window_tokens, current.guard.source) == (learned, "learned")


def test_an_inferred_window_below_the_guards_minimum_is_raised_to_it(store: Stub) -> None:
    """A provider's stated window below the minimum is refused whole (see above); a window
    inferred from one figure-less refusal only bounds it (a large max_tokens may have
    caused it), so the session goes on at the smallest window the guard accepts rather
    than have every later view refused."""
    session = create(store, model="gpt-4o")
    for n in range(2):
        turn(store, session.id, n, output_chars=6_000)
    refused_view = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
    assert refused_view.estimated_tokens < 16_000
    served = report_figureless_overflow(store, refused_view)
    assert (served.context_window_tokens, served.guard.source) == (16_000, "learned")
    (reported,) = of_kind(store, session.id, "overflow_reported")
    assert reported.overflow_reported.learned_window_tokens == 16_000
    # Views are served at that window, and the turns go on.
    turn(store, session.id, 2, output_chars=6_000)
    later = view(store, session.id)
    assert later.context_window_tokens == 16_000
    assert later.estimated_tokens <= later.budget_tokens


# Refusals of a request for its bytes: Anthropic's (its words, HTTP 413), and a
# gateway's body limit before any provider.
TOO_LARGE = {
    "anthropic": (
        "anthropic",
        json.dumps(
            {
                "type": "error",
                "error": {
                    "type": "request_too_large",
                    "message": "Request exceeds the maximum allowed number of bytes.",
                },
            }
        ),
    ),
    "gateway": ("openai", "<html><title>413 Request Entity Too Large</title></html>"),
}


@pytest.mark.parametrize(("provider", "error_text"), TOO_LARGE.values(), ids=TOO_LARGE.keys())
def test_a_request_too_large_in_bytes_shrinks_the_prompt_and_teaches_no_window(
    store: Stub, provider: str, error_text: str
) -> None:
    """It was refused as "not a context overflow", though shrinking the prompt is what
    helps. A limit in bytes bounds no window in tokens: the window stays the model's."""
    session = create(store, model="gpt-4o", compaction=pb.CompactionPolicy(keep_recent_tokens=500))
    for n in range(4):
        turn(store, session.id, n, output_chars=12_000)

    def report(refused_view: pb.PromptView) -> pb.PromptView:
        return store.ReportOverflow(
            pb.ReportOverflowRequest(
                session_id=session.id,
                provider=provider,
                status_code=413,
                error_text=error_text,
                view_version=refused_view.version,
                view_hash=refused_view.request_hash,
                format=pb.PROMPT_FORMAT_OPENAI,
            )
        )

    refused_view = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
    first = report(refused_view)
    assert first.actions[0].kind == "truncated"
    assert len(first.messages_json) < len(refused_view.messages_json)
    second = report(first)
    assert second.actions[0].kind == "compacted"
    assert second.estimated_tokens < first.estimated_tokens
    reports = of_kind(store, session.id, "overflow_reported")
    assert [r.overflow_reported.kind for r in reports] == ["request_too_large"] * 2
    assert [r.overflow_reported.learned_window_tokens for r in reports] == [0, 0]
    for shown in (second, view(store, session.id)):
        assert (shown.context_window_tokens, shown.guard.source) == (128_000, "model")


def rendered_bytes(shown: pb.PromptView) -> int:
    """A view's size as the store measures it: messages, system prompt and tools."""
    parts = (shown.messages_json, shown.system_json, shown.tools_json)
    return sum(len(part.encode()) for part in parts)


def report_too_large(store: Stub, refused_view: pb.PromptView, request_bytes: int) -> pb.PromptView:
    provider, error_text = TOO_LARGE["anthropic"]
    return store.ReportOverflow(
        pb.ReportOverflowRequest(
            session_id=refused_view.session_id,
            provider=provider,
            status_code=413,
            error_text=error_text,
            view_version=refused_view.version,
            view_hash=refused_view.request_hash,
            format=pb.PROMPT_FORMAT_OPENAI,
            request_bytes=request_bytes,
        )
    )


def test_the_request_size_the_client_sends_is_what_a_byte_limit_is_learned_from(
    store: Stub,
) -> None:
    """The store's rendering leaves out what the client adds to the view (tools of its
    own here, 30,000 bytes): the limit is learned from the request as sent, and later
    requests (views and what the client adds) stay under 80% of it."""
    session = create(store, model="gpt-4o", compaction=pb.CompactionPolicy(keep_recent_tokens=500))
    for n in range(4):
        turn(store, session.id, n, output_chars=12_000)
    client_part = 30_000
    refused_view = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
    refused_view.session_id = session.id
    rendered = rendered_bytes(refused_view)
    sent = rendered + client_part

    report_too_large(store, refused_view, sent)

    (reported,) = [r.overflow_reported for r in of_kind(store, session.id, "overflow_reported")]
    assert (reported.kind, reported.request_bytes_sent) == ("request_too_large", sent)
    context = store.GetContextReport(pb.GetContextReportRequest(session_id=session.id))
    assert context.learned_request_bytes == reported.learned_request_bytes
    # A fifth of the request as sent is kept below the refused view as rendered: what
    # the client adds stays, and its requests keep under 80% of the one refused.
    allowed = context.request_bytes_allowed
    margin = -(-sent // 5)  # a fifth, rounded up
    assert rendered - margin - 1 <= allowed <= rendered - margin
    for n in range(4, 8):
        turn(store, session.id, n, output_chars=12_000)
        later = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
        assert rendered_bytes(later) <= allowed
        assert rendered_bytes(later) + client_part <= 0.8 * sent
    assert later.actions and later.actions[0].kind == "fitted_to_request_bytes"


def test_a_request_size_that_measures_no_request_is_refused(store: Stub) -> None:
    session = create(store, model="gpt-4o")
    for n in range(2):
        turn(store, session.id, n, output_chars=12_000)
    refused_view = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
    refused_view.session_id = session.id
    rendered = rendered_bytes(refused_view)
    for wrong, says in (
        (-1, "is negative"),
        (2**40, "more than any provider takes"),
        (rendered // 10, "less than a quarter of the refused view"),
    ):
        message = refused(
            lambda: report_too_large(store, refused_view, wrong),  # noqa: B023
            grpc.StatusCode.INVALID_ARGUMENT,
        )
        assert says in message and "0 for the store to measure" in message
    assert not of_kind(store, session.id, "overflow_reported")


# -- 5. manual compaction ----------------------------------------------------------------


def test_a_dry_run_plans_and_a_manual_compaction_follows_instructions(store: Stub) -> None:
    session = create(
        store, model="gpt-4o", compaction=pb.CompactionPolicy(keep_recent_tokens=1_000)
    )
    for n in range(5):
        turn(store, session.id, n, output_chars=3_000)
    before = store.GetSession(pb.GetSessionRequest(session_id=session.id)).version
    planned = store.Compact(pb.CompactRequest(session_id=session.id, dry_run=True))
    assert not planned.compacted
    assert planned.plan.first_kept_entry_id and planned.plan.chunks
    assert planned.plan.estimated_tokens_after < planned.plan.tokens_before
    assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).version == before

    done = store.Compact(
        pb.CompactRequest(session_id=session.id, instructions="Keep every file name.")
    )
    assert done.compacted and done.compaction.reason == "manual"
    assert done.compaction.instructions == "Keep every file name."
    assert done.compaction.first_kept_entry_id == planned.plan.first_kept_entry_id
    assert "src/file_0.py" in done.compaction.summary
    assert done.compaction.prompt_hash.startswith("sha256:")
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    assert log.compaction.first_kept_entry_id == done.compaction.first_kept_entry_id
    # Nothing new since: a second compaction has nothing to do.
    again = store.Compact(pb.CompactRequest(session_id=session.id))
    assert not again.compacted and again.reason


# -- 6. a slow summariser, concurrent writers -------------------------------------------


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    """A local OpenAI-compatible server: it takes no key, and the server needs none."""
    with FakeProvider() as fake:
        yield fake


def session_summarised_by(
    store: Stub, provider: FakeProvider, threshold_ratio: float
) -> pb.Session:
    """A session of a 40,000-token window whose compactions, once over
    ``threshold_ratio`` of it, ask ``provider``'s model for the summary and keep the
    last 4,000 tokens."""
    return create(
        store,
        model="gpt-4o",
        context_window_tokens=40_000,
        compaction=pb.CompactionPolicy(
            threshold_ratio=threshold_ratio,
            keep_recent_tokens=4_000,
            summarizer_model="openai/fake-summarizer",
            summarizer_api_base=provider.openai_base,
            summarizer_window_tokens=128_000,
        ),
    )


def test_appends_and_views_during_a_slow_summariser_lose_nothing(
    store: Stub, provider: FakeProvider
) -> None:
    session = session_summarised_by(store, provider, threshold_ratio=0.3)
    provider.script(*[delay(1.5)] * 4)
    turn(store, session.id, 0, output_chars=15_000)
    turn(store, session.id, 1, output_chars=15_000)
    errors: list[Exception] = []

    def writer(k: int) -> None:
        try:
            for i in range(5):
                append(store, session.id, user(f"writer {k} note {i}"))
                append(store, session.id, text(pb.ROLE_ASSISTANT, f"ok {k}.{i}"))
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    def reader() -> None:
        try:
            for _ in range(3):
                current = view(store, session.id)
                assert current.estimated_tokens <= current.budget_tokens
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    turn(store, session.id, 2, output_chars=15_000)  # crosses the threshold
    # The compaction runs in the background: under the budget, views do not wait for it.
    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    threads.append(threading.Thread(target=reader))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    final = view(store, session.id)
    assert final.estimated_tokens <= final.budget_tokens
    stored = store.GetSession(pb.GetSessionRequest(session_id=session.id))
    assert stored.entry_count == 3 * 4 + 3 * 5 * 2
    assert eventually(lambda: len(of_kind(store, session.id, "compaction_recorded")) == 1)
    assert provider.requests, "the summariser was never called"
    receipt = of_kind(store, session.id, "compaction_recorded")[0].compaction_recorded
    assert receipt.summarizer_model == "openai/fake-summarizer"


def test_a_failing_summariser_is_recorded_and_the_next_in_the_chain_summarises(
    store: Stub, provider: FakeProvider
) -> None:
    session = session_summarised_by(store, provider, threshold_ratio=0.3)
    provider.script(*[fail("server_error")] * 10)
    for n in range(6):
        turn(store, session.id, n, output_chars=15_000)
    current = view(store, session.id)
    assert current.estimated_tokens <= current.budget_tokens
    assert eventually(lambda: of_kind(store, session.id, "compaction_recorded"))
    (failed,) = of_kind(store, session.id, "compaction_failed")
    assert failed.compaction_failed.trigger == "threshold"
    assert failed.compaction_failed.summarizer_model == "openai/fake-summarizer"
    receipt = of_kind(store, session.id, "compaction_recorded")[0].compaction_recorded
    # The default chain: the session's summariser, then offline, then the hard drop.
    assert receipt.summarizer_model == "offline" and receipt.fallback_stage == "full"
    assert [(a.summarizer, a.outcome) for a in receipt.attempts] == [
        ("openai/fake-summarizer", "failed"),
        ("offline", "used"),
    ]
    assert "unavailable" in receipt.attempts[0].reason
    # A chain of the model and the hard drop alone: the oldest entries are dropped.
    store.UpdateSettings(
        pb.UpdateSettingsRequest(
            session_id=session.id,
            settings=pb.SessionSettings(
                compaction=pb.CompactionPolicy(
                    summarizers=pb.SummarizerChain(steps=["openai/fake-summarizer", "hard-drop"])
                )
            ),
        )
    )
    provider.script(fail("auth"))
    turn(store, session.id, 9, output_chars=2_000)
    outcome = store.Compact(pb.CompactRequest(session_id=session.id, force=True))
    assert outcome.compacted and outcome.compaction.fallback_stage == "hard-drop"
    assert [(a.summarizer, a.outcome) for a in outcome.compaction.attempts] == [
        ("openai/fake-summarizer", "failed"),
        ("hard-drop", "used"),
    ]


def test_a_summary_cut_before_the_views_hard_drop_drops_nothing_more(
    store: Stub, provider: FakeProvider
) -> None:
    session = create(
        store,
        model="gpt-4o",
        context_window_tokens=40_000,
        compaction=pb.CompactionPolicy(
            threshold_ratio=0.5,
            summarizers=pb.SummarizerChain(steps=["openai/fake-summarizer", "hard-drop"]),
            summarizer_model="openai/fake-summarizer",
            summarizer_api_base=provider.openai_base,
            summarizer_window_tokens=128_000,
        ),
    )
    provider.script(delay(3.0))
    for n in range(6):
        turn(store, session.id, n, output_chars=15_000)
    # Over the threshold: the model summarises in the background, planned on this view.
    assert view(store, session.id).estimated_tokens > 20_000
    assert eventually(lambda: len(provider.requests) == 1, within=60)
    answered = time.monotonic() + 3.0
    for n in range(6, 10):
        turn(store, session.id, n, output_chars=15_000)
    # Over its budget while the model still writes: the view's hard drop cuts later
    # than the model's plan did.
    fitted = view(store, session.id)
    assert fitted.estimated_tokens <= fitted.budget_tokens
    time.sleep(max(0.0, answered - time.monotonic()) + 1.5)
    # The model's summary cannot land before the cut in force: the chain starts over on
    # the session as it is, finds it within its threshold, and drops nothing more.
    recorded = of_kind(store, session.id, "compaction_recorded")
    assert [r.compaction_recorded.fallback_stage for r in recorded] == ["hard-drop"]
    assert view(store, session.id).version == fitted.version


# -- 7. pruning ------------------------------------------------------------------------


def test_pruning_soft_trims_then_hard_clears_and_the_log_is_unchanged(store: Stub) -> None:
    # Trims keep most of each result here, so a fuller prompt needs clearing too.
    session = create(
        store,
        model="gpt-4o",
        context_window_tokens=50_000,
        compaction=pb.CompactionPolicy(mode="manual"),
        pruning=pb.PruningPolicy(
            mode="cache-ttl",
            ttl_seconds=0,
            min_prunable_tool_chars=10_000,
            soft_trim_head_chars=5_000,
            soft_trim_tail_chars=5_000,
        ),
    )
    for n in range(6):
        turn(store, session.id, n, output_chars=12_000)
    first = view(store, session.id)
    assert [a.kind for a in first.actions] == ["pruned"]
    assert {p.action for p in first.pruned} == {pb.PRUNE_ACTION_SOFT_TRIM}
    for n in range(6, 14):
        turn(store, session.id, n, output_chars=12_000)
    later = view(store, session.id)
    assert pb.PRUNE_ACTION_HARD_CLEAR in {p.action for p in later.pruned}
    assert "[Old tool result content cleared]" in later.messages_json
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    results = [e for e in log.entries if e.role == pb.ROLE_TOOL]
    assert all(len(e.content[0].tool_result.content) == 12_000 for e in results)


# -- 8. the system prompt, the report, the hash ----------------------------------------


def test_the_view_is_the_whole_request_and_the_report_adds_up(store: Stub) -> None:
    session = create(store, model="gpt-4o", max_system_file_chars=1_000)
    request = pb.SetSystemPromptRequest(
        session_id=session.id,
        system_prompt=pb.SystemPrompt(
            text="You are a careful coding agent.",
            files=[
                pb.InjectedFile(path="AGENTS.md", content="Use uv.\n"),
                pb.InjectedFile(path="NOTES.md", content="x" * 5_000),
                pb.InjectedFile(path="GONE.md", missing=True),
            ],
            skills=[pb.Skill(name="pdf", description="read PDFs")],
            tools=[
                pb.Tool(
                    name="read",
                    description="Read a file",
                    parameters_json=json.dumps(
                        {"type": "object", "properties": {"path": {"type": "string"}}}
                    ),
                )
            ],
        ),
    )
    stored = store.SetSystemPrompt(request)
    assert stored.changed
    statuses = [(f.path, f.status, f.raw_chars) for f in stored.system_prompt.files]
    assert statuses == [
        ("AGENTS.md", pb.FILE_STATUS_OK, 8),
        ("NOTES.md", pb.FILE_STATUS_TRUNCATED, 5_000),
        ("GONE.md", pb.FILE_STATUS_MISSING, 0),
    ]
    turn(store, session.id, 1, output_chars=2_000)

    for provider_format in (pb.PROMPT_FORMAT_OPENAI, pb.PROMPT_FORMAT_ANTHROPIC):
        served = view(store, session.id, format=provider_format)
        name = "anthropic" if provider_format == pb.PROMPT_FORMAT_ANTHROPIC else "openai"
        canonical = (
            f'{{"format":"{name}","system":{served.system_json or "null"},'
            f'"tools":{served.tools_json},"messages":{served.messages_json}}}'
        )
        assert hashlib.sha256(canonical.encode()).hexdigest() == served.request_hash
        assert json.loads(served.tools_json)[0]["name" if name == "anthropic" else "type"]
    openai = json.loads(view(store, session.id).messages_json)
    assert openai[0]["role"] == "system" and "Use uv." in openai[0]["content"]

    report = store.GetContextReport(pb.GetContextReportRequest(session_id=session.id))
    current = view(store, session.id)
    assert report.used_tokens == current.estimated_tokens
    assert (
        report.system_prompt_tokens
        + report.summary_tokens
        + report.pinned_tokens
        + report.messages_tokens
        == report.used_tokens
    )
    assert report.system_prompt_tokens == report.system_prompt.total > 0
    assert [f.status for f in report.files][2] == pb.FILE_STATUS_MISSING
    assert report.top_tools[0].name == "read"

    same = store.SetSystemPrompt(request)
    assert not same.changed and same.version == current.version


def compacted_fork(store: Stub) -> tuple[pb.Session, int]:
    """A fork of a session with a compaction in force, and how many entries it holds.
    This server has yet to read it: its first read loads it from the cut."""
    session = create(store, model="gpt-4o")
    ids = list(append(store, session.id, user("Turn one: read a.txt")).entry_ids)
    ids += append(
        store,
        session.id,
        tool_call("c1", "read", {"path": "a.txt"}),
        tool_result("c1", "A" * 10_000),
        text(pb.ROLE_ASSISTANT, "a.txt is all As."),
        user("Turn three: and b.txt?"),
    ).entry_ids
    store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session.id, summary="## Goal\nRead files.", first_kept_entry_id=ids[4]
        )
    )
    return store.ForkSession(pb.ForkSessionRequest(session_id=session.id)), len(ids)


def test_a_new_forks_report_follows_what_is_appended_after_its_first_read(
    store: Stub,
) -> None:
    """The copy loaded from the cut folded its whole history, when a report first asked,
    from the events read at the load: after an append in between, the report asked it
    for a version it lacked (OUT_OF_RANGE), and the next append failed (INTERNAL)."""
    fork, entries = compacted_fork(store)
    view(store, fork.id)
    for n in range(3):
        written = append(store, fork.id, text(pb.ROLE_ASSISTANT, f"answer {n}"))
        report = store.GetContextReport(pb.GetContextReportRequest(session_id=fork.id))
        assert (report.version, report.entries) == (written.version, entries + n + 1)
        assert report.compaction_count == 1


def test_a_report_is_of_one_version_while_appends_go_on(store: Stub) -> None:
    """The report read the history, then the session: an append in between gave it the
    view of one version and the session's totals of a later one."""
    fork, entries = compacted_fork(store)
    output_tokens = fork.total_usage.output_tokens
    stop = threading.Event()

    def appending() -> None:
        while not stop.is_set():
            append(store, fork.id, text(pb.ROLE_ASSISTANT, "more", usage=pb.Usage(output_tokens=1)))

    writer = threading.Thread(target=appending)
    writer.start()
    try:
        for _ in range(150):
            report = store.GetContextReport(pb.GetContextReportRequest(session_id=fork.id))
            # One entry, with one output token, each version after the fork.
            appended = report.version - fork.version
            assert (report.entries, report.total_usage.output_tokens) == (
                entries + appended,
                output_tokens + appended,
            )
    finally:
        stop.set()
        writer.join()
    assert report.version > fork.version, "nothing was appended: the test proved nothing"


def test_provider_usage_calibrates_the_estimate(store: Stub) -> None:
    session = create(store, model="gpt-4o")
    append(store, session.id, user("hello " * 200))
    served = view(store, session.id)
    answer = text(
        pb.ROLE_ASSISTANT,
        "hi",
        usage=pb.Usage(input_tokens=served.estimated_tokens * 2, output_tokens=3),
        prompt_ref=pb.PromptRef(
            version=served.version, format=pb.PROMPT_FORMAT_OPENAI, hash=served.request_hash
        ),
    )
    (appended,) = of_kind(store, session.id, "entries_appended")[-1:]
    append(store, session.id, answer)
    report = store.GetContextReport(pb.GetContextReportRequest(session_id=session.id))
    # The first report sets the ratio; a later one counting less moves it a quarter down.
    assert report.calibration_ratio == pytest.approx(2.0)
    assert report.last_provider_input_tokens == served.estimated_tokens * 2
    (turn_usage,) = report.turns
    assert turn_usage.estimated_input_tokens == served.estimated_tokens
    (lesson,) = of_kind(store, session.id, "entries_appended")[-1].entries_appended.lessons
    assert (lesson.estimated_tokens, lesson.provider_tokens) == (
        served.estimated_tokens,
        served.estimated_tokens * 2,
    )
    assert appended.entries_appended.lessons == []
    # The view's figure is calibrated: the next one counts what the provider will.
    append(store, session.id, user("and again " * 100))
    calibrated = view(store, session.id)
    assert calibrated.calibration == pytest.approx(2.0)
    assert calibrated.estimated_tokens == calibrated.uncalibrated_tokens * 2
    append(
        store,
        session.id,
        text(
            pb.ROLE_ASSISTANT,
            "ok",
            usage=pb.Usage(input_tokens=calibrated.uncalibrated_tokens, output_tokens=1),
            prompt_ref=pb.PromptRef(
                version=calibrated.version,
                format=pb.PROMPT_FORMAT_OPENAI,
                hash=calibrated.request_hash,
            ),
        ),
    )
    report = store.GetContextReport(pb.GetContextReportRequest(session_id=session.id))
    assert report.calibration_ratio == pytest.approx(1.75)


def test_a_sliding_window_session_drops_the_oldest_without_a_model(store: Stub) -> None:
    session = create(store, model="gpt-4o", context_window_tokens=40_000, engine="sliding-window")
    for n in range(10):
        turn(store, session.id, n, output_chars=15_000)
        current = view(store, session.id)
        assert current.estimated_tokens <= current.budget_tokens
        assert current.engine == "sliding-window"
    assert eventually(lambda: of_kind(store, session.id, "compaction_recorded"))
    receipts = [e.compaction_recorded for e in of_kind(store, session.id, "compaction_recorded")]
    assert receipts and all(r.fallback_stage == "hard-drop" for r in receipts)
    assert all(r.engine == "sliding-window" for r in receipts)


def test_an_unknown_engine_is_refused(store: Stub) -> None:
    session = create(store, model="gpt-4o")
    message = refused(
        lambda: store.UpdateSettings(
            pb.UpdateSettingsRequest(session_id=session.id, settings=pb.SessionSettings(engine="x"))
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "layered" in message


def test_server_wide_defaults_reach_new_sessions(database_url: str) -> None:
    running = start_server(
        database_url,
        session_defaults={"compaction": {"threshold_ratio": 0.6}, "pruning": {"mode": "recent-n"}},
    )
    try:
        with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc

            created = create(pb_grpc.SessionStoreStub(channel), model="gpt-4o")
            assert created.settings.compaction.threshold_ratio == pytest.approx(0.6)
            assert created.settings.pruning.mode == "recent-n"
    finally:
        running.stop(0)


def test_a_client_may_ask_for_a_view_within_a_smaller_budget(store: Stub) -> None:
    session = create(store, model="gpt-4o", compaction=pb.CompactionPolicy(keep_recent_tokens=500))
    for n in range(4):
        turn(store, session.id, n, output_chars=8_000)
    full = view(store, session.id)
    smaller = view(store, session.id, token_budget=full.estimated_tokens // 2)
    assert smaller.budget_tokens == full.estimated_tokens // 2
    assert smaller.estimated_tokens <= smaller.budget_tokens
    assert smaller.actions and smaller.actions[0].kind == "compacted"
    # The audit says why: the budget the view was asked within, not the threshold.
    receipts = of_kind(store, session.id, "compaction_recorded")
    assert {r.compaction_recorded.reason for r in receipts} == {"budget"}
    refused(lambda: view(store, session.id, token_budget=0), grpc.StatusCode.INVALID_ARGUMENT)


def test_a_turn_sends_only_what_it_adds_while_the_prefix_holds(store: Stub) -> None:
    session = create(store, model="gpt-4o")
    append(store, session.id, text(pb.ROLE_SYSTEM, "Be brief."), user("one"))
    for provider_format in (pb.PROMPT_FORMAT_OPENAI, pb.PROMPT_FORMAT_ANTHROPIC):
        held = view(store, session.id, format=provider_format)
        messages = json.loads(held.messages_json)
        for n in range(3):
            append(store, session.id, text(pb.ROLE_ASSISTANT, f"answer {n}"))
            append(store, session.id, user(f"question {n}"))
            delta = view(
                store,
                session.id,
                format=provider_format,
                held_version=held.version,
                held_hash=held.request_hash,
            )
            assert delta.appended and delta.base_version == held.version
            messages += json.loads(delta.messages_json)
            whole = view(store, session.id, format=provider_format)
            assert messages == json.loads(whole.messages_json)
            assert delta.request_hash == whole.request_hash
            held = whole
    # A compaction changes the beginning: the whole view comes back.
    (kept,) = append(store, session.id, user("last")).entry_ids
    store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session.id, summary="said things", first_kept_entry_id=kept
        )
    )
    after = view(store, session.id, held_version=held.version, held_hash=held.request_hash)
    assert not after.appended
    assert "said things" in after.messages_json
    # A hash that never was is not trusted either.
    stranger = view(store, session.id, held_version=held.version, held_hash="0" * 64)
    assert not stranger.appended


def test_a_turn_that_is_the_whole_log_fits_beside_the_summary_in_force(store: Stub) -> None:
    """After a compaction cut at a turn's start, that turn is all the log keeps: its
    results are trimmed to fit beside the summary, which stays in the prompt."""
    manual = pb.CompactionPolicy(mode="manual")
    session = create(store, model="gpt-4o", context_window_tokens=40_000, compaction=manual)
    for n in range(10):
        append(store, session.id, user(f"Map package {n}.", id=f"u-map-{n}"))
        mapped = " ".join(f"pkg_{n}/mod_{i}.py defines class C{i}." for i in range(300))
        append(store, session.id, text(pb.ROLE_ASSISTANT, mapped, id=f"a-map-{n}"))
    append(store, session.id, user("Read every module and list what each exports.", id="u1"))
    summary = " ".join(f"module_{i} exports handler_{i} and config_{i}." for i in range(600))
    store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session.id, summary=summary, first_kept_entry_id="u1", reason="manual"
        )
    )
    auto = pb.SessionSettings(compaction=pb.CompactionPolicy(mode="auto"))
    store.UpdateSettings(pb.UpdateSettingsRequest(session_id=session.id, settings=auto))
    for n in range(12):
        append(store, session.id, tool_call(f"call_{n}", "read", {"path": f"src/m_{n}.py"}))
        output = "".join(f"line {i}: value = {i * n}\n" for i in range(700))
        append(store, session.id, tool_result(f"call_{n}", output))
    fitted = view(store, session.id)
    assert fitted.estimated_tokens <= fitted.budget_tokens
    # Each fitting step counts the summary: one is enough, not one more a round.
    steps = [a.detail for a in fitted.actions if a.kind == "truncated"]
    assert len(steps) <= 1, steps
    assert fitted.pruned
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    assert log.compaction.first_kept_entry_id == "u1" and log.entries[0].id == "u1"


def test_a_dry_run_foresees_a_compaction_that_would_not_shrink_the_prompt(store: Stub) -> None:
    """A short history where the offline summary would outweigh what it replaces: the
    dry run answers what the compaction then does (nothing), for the same reasons,
    and neither shows a plan of a compaction that does not happen."""
    session = create(
        store,
        model="gpt-4o",
        compaction=pb.CompactionPolicy(keep_recent_tokens=50, mode="manual"),
    )
    for n in range(10):
        append(store, session.id, user(f"Question {n}: which file holds the parser?"))
        append(store, session.id, text(pb.ROLE_ASSISTANT, f"Answer {n}: src/parser_{n}.py."))
    before = store.GetSession(pb.GetSessionRequest(session_id=session.id)).version

    planned = store.Compact(pb.CompactRequest(session_id=session.id, force=True, dry_run=True))
    done = store.Compact(pb.CompactRequest(session_id=session.id, force=True))

    assert not done.compacted
    assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).version == before
    # The real cause, by each step tried: the offline summary would not be smaller.
    assert "offline" in done.reason and "no fewer than" in done.reason, done.reason
    assert "hard-drop" in done.reason, done.reason
    assert not done.HasField("plan"), done.plan
    assert not planned.compacted
    assert planned.reason == f"dry run: {done.reason}"
    assert not planned.HasField("plan"), planned.plan
