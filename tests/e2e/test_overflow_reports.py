"""Overflow reports end to end: a real server, SQLite and PostgreSQL, over gRPC.

A provider's refusal of a view for its length, reported, teaches the window and
the count it states, and every view after it keeps to them. A stated window below
the guard's minimum is refused whole; one the client sets supersedes a lesson;
with compaction off a report compacts nothing; an error that is not an overflow
is refused; every provider's words for an overflow are taken as one.
"""

from __future__ import annotations

import json

import grpc
import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.support.context_engine import create, error_info, of_kind, report_overflow, turn, view
from tests.support.grpc_calls import Stub, append, refused, user


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
