"""Windows a provider's refusals taught, lifted by a usage report, end to end: a real
server, SQLite and PostgreSQL, over gRPC.

A window inferred from an error that stated none is lifted once the provider
accepts a larger prompt; a window an error stated is not.
"""

from __future__ import annotations

import json

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.e2e.test_grpc_api import Stub, append, text
from tests.e2e.test_overflow_without_figures import report_figureless_overflow
from tests.support.context_engine import create, of_kind, report_overflow, turn, view


def answer(store: Stub, shown: pb.PromptView, prompt_tokens: int) -> None:
    """The model's answer to ``shown``, the provider counting ``prompt_tokens`` of it."""
    append(
        store,
        shown.session_id,
        text(
            pb.ROLE_ASSISTANT,
            "done",
            usage=pb.Usage(input_tokens=prompt_tokens, output_tokens=3),
            prompt_ref=pb.PromptRef(
                version=shown.version, format=pb.PROMPT_FORMAT_OPENAI, hash=shown.request_hash
            ),
        ),
    )


def in_force(store: Stub, session_id: str) -> tuple[int, str]:
    """The window in force and its source, as views and the session agree on them."""
    shown = view(store, session_id)
    got = store.GetSession(pb.GetSessionRequest(session_id=session_id))
    assert (got.settings.context_window_tokens, got.context_window_source) == (
        shown.context_window_tokens,
        shown.guard.source,
    )
    return shown.context_window_tokens, shown.guard.source


def teach_inferred_window(store: Stub, session_id: str) -> int:
    """A figure-less overflow of the view now: it teaches the refused prompt's size."""
    shown = view(store, session_id, format=pb.PROMPT_FORMAT_OPENAI)
    report_figureless_overflow(store, shown)
    learned = of_kind(store, session_id, "overflow_reported")[-1]
    window = learned.overflow_reported.learned_window_tokens
    assert in_force(store, session_id) == (window, "learned")
    return window


def test_a_usage_report_above_an_inferred_window_lifts_it(store: Stub) -> None:
    session = create(store, model="gpt-4o")
    for n in range(8):
        turn(store, session.id, n, output_chars=12_000)
    window = teach_inferred_window(store, session.id)
    shown = view(store, session.id)

    answer(store, shown, prompt_tokens=window + 1_000)

    assert in_force(store, session.id) == (128_000, "model")
    (lesson,) = of_kind(store, session.id, "entries_appended")[-1].entries_appended.lessons
    assert (lesson.lifted_window_tokens, lesson.provider_tokens) == (window, window + 1_000)
    assert view(store, session.id, version=shown.version).context_window_tokens == window


def test_a_usage_report_above_a_stated_window_leaves_it(store: Stub) -> None:
    """The provider's own figure: a count above it is no proof it serves more."""
    session = create(store, model="gpt-4o")
    for n in range(12):
        turn(store, session.id, n, output_chars=12_000)
    shown = view(store, session.id, format=pb.PROMPT_FORMAT_OPENAI)
    error = {
        "message": "This model's maximum context length is 32768 tokens. However, your "
        f"messages resulted in {shown.uncalibrated_tokens} tokens.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
    report_overflow(store, shown, json.dumps({"error": error}))
    assert in_force(store, session.id) == (32_768, "learned")

    answer(store, view(store, session.id), prompt_tokens=40_000)

    assert in_force(store, session.id) == (32_768, "learned")
    (lesson,) = of_kind(store, session.id, "entries_appended")[-1].entries_appended.lessons
    assert (lesson.lifted_window_tokens, lesson.provider_tokens) == (0, 40_000)
