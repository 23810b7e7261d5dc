"""Requests refused for their size in bytes, end to end: a real server, SQLite and
PostgreSQL, over gRPC.

A report of one shrinks the prompt and teaches no window in tokens. The limit is
learned from the request as the client sent it, and later requests keep under
it; a request size that measures no request is refused.
"""

from __future__ import annotations

import json

import grpc
import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.support.context_engine import create, of_kind, report_overflow, turn, view
from tests.support.grpc_calls import Stub, refused

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
        return report_overflow(store, refused_view, error_text, provider, status_code=413)

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
    return report_overflow(
        store, refused_view, error_text, provider, status_code=413, request_bytes=request_bytes
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
