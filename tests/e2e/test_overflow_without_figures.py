"""Overflow reports that state no figures, end to end: a real server, SQLite and
PostgreSQL, over gRPC.

Each report of one shrinks the view, truncating, then compacting, until nothing
is left to do, said so. One report teaches a window no larger than the prompt
refused, raised to the guard's minimum when below it, so no later view is
refused again.
"""

from __future__ import annotations

import json

import grpc
import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.support.agentloop.provider import Counter
from tests.support.context_engine import create, error_info, of_kind, report_overflow, turn, view
from tests.support.grpc_calls import Stub, append, user

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
