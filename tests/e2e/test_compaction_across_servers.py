"""Of servers sharing a PostgreSQL store, one at a time asks a model for a session's
summary: the compaction the next turn starts on another server while the first
summarises is left to the first (the view there goes on as when one runs locally),
and a Compact call there is refused ABORTED, to retry once the first landed, so
replicas behind a round-robin balancer pay for one summary, not one each.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from urllib.parse import parse_qs, urlparse

import grpc
import psycopg
import pytest
from sessionstore_client import errors as client_errors

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.adapters.summary_claims import claim_key
from tests.e2e.test_compact_retries import compact, eventually_called, in_thread, two_servers
from tests.support.context_engine import error_info, of_kind, session_summarised_by, turn, view
from tests.support.fake_provider import FakeProvider, delay, fail
from tests.support.grpc_calls import Stub
from tests.support.waiting import eventually

SUMMARIZER = "openai/fake-summarizer"
# Long enough for the other server's turns and view to come while the model writes.
SUMMARY_SECONDS = 5.0


def summarised_session(store: Stub, provider: FakeProvider) -> pb.Session:
    """A 40,000-token window: over 28,000 a compaction starts, over 35,000 (the budget)
    a view must be brought within it; a turn adds some 4,000."""
    return session_summarised_by(store, provider, threshold_ratio=0.7)


def summarising(store: Stub, provider: FakeProvider) -> pb.Session:
    """A summarised session whose turns on ``store`` crossed its threshold: the
    compaction that started asks the model, which takes SUMMARY_SECONDS to answer."""
    session = summarised_session(store, provider)
    provider.script(delay(SUMMARY_SECONDS))
    for n in range(7):
        turn(store, session.id, n, output_chars=15_000)  # the last crosses the threshold
    assert eventually_called(provider)
    return session


def claimed(database_url: str, session_id: str) -> bool:
    """Whether a server holds the session's claim: it cannot be taken from here."""
    schema = parse_qs(urlparse(database_url).query)["schema"][0]
    key = claim_key(schema, session_id)
    with psycopg.connect(database_url.split("?")[0], autocommit=True) as conn:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        taken = bool(row and row[0])
        if taken:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    return not taken


def model_summaries(store: Stub, session_id: str) -> list[pb.SessionEvent]:
    recorded = of_kind(store, session_id, "compaction_recorded")
    return [e for e in recorded if e.compaction_recorded.summarizer_model == SUMMARIZER]


def test_a_turn_on_another_server_while_one_summarises_pays_for_no_second_summary(
    postgres_schema_url: str, provider: FakeProvider
) -> None:
    with two_servers(postgres_schema_url) as (first, other):
        session = summarising(first, provider)
        started = time.monotonic()
        assert claimed(postgres_schema_url, session.id)

        # The next turns land on the other server, and take the prompt over its budget.
        for n in range(7, 9):
            turn(other, session.id, n, output_chars=15_000)
        served = view(other, session.id)

        assert time.monotonic() - started < SUMMARY_SECONDS, "the view waited for the model"
        assert served.estimated_tokens <= served.budget_tokens
        kinds = [(a.kind, a.detail) for a in served.actions]
        assert any(k == "compaction_running" and "another server" in d for k, d in kinds), kinds
        assert len(provider.requests) == 1, "the other server asked for a summary too"

        # The first server's summary lands (after the cut the other's view made, which
        # kept more), and both servers serve it.
        assert eventually(lambda: model_summaries(first, session.id), within=30)
        assert not claimed(postgres_schema_url, session.id)
        (landed,) = model_summaries(first, session.id)
        summary = landed.compaction_recorded.summary
        views = [view(store, session.id) for store in (first, other)]
        assert {v.version for v in views} == {landed.version}
        for shown in views:
            assert summary in json.loads(shown.messages_json)[0]["content"]
            assert shown.estimated_tokens <= shown.budget_tokens
        assert len(provider.requests) == 1, "a summary was paid for twice"


def test_the_claim_is_free_again_after_the_model_fails(
    postgres_schema_url: str, provider: FakeProvider
) -> None:
    with two_servers(postgres_schema_url) as (first, other):
        session = summarised_session(first, provider)
        provider.script(fail("auth"))
        for n in range(7):
            turn(first, session.id, n, output_chars=15_000)
        # The model failed: the chain's next step (offline) summarised instead.
        assert eventually(lambda: of_kind(first, session.id, "compaction_recorded"))
        (failed,) = of_kind(first, session.id, "compaction_failed")
        assert failed.compaction_failed.summarizer_model == SUMMARIZER
        assert eventually(lambda: not claimed(postgres_schema_url, session.id))

        # The next compaction, on the other server, asks the model (which answers now).
        for n in range(7, 16):
            turn(other, session.id, n, output_chars=15_000)
            if len(provider.requests) == 2:
                break
        assert eventually(lambda: model_summaries(other, session.id), within=30)
        assert len(provider.requests) == 2


def refused_as_running_elsewhere(call: Callable[[], object]) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as refused:
        call()
    assert refused.value.code() == grpc.StatusCode.ABORTED
    assert error_info(refused.value).reason == "compaction_running_elsewhere"
    assert "another server is compacting this session right now" in str(refused.value.details())
    return refused.value


def test_a_compact_retried_on_another_server_while_the_first_try_summarises_pays_once(
    postgres_schema_url: str, provider: FakeProvider
) -> None:
    """The client's retry of a Compact reaches another server (a round-robin balancer)
    while the model still writes the first try's summary: refused ABORTED, asking no
    model; the same retry once the first landed is answered from it."""
    with two_servers(postgres_schema_url) as (first, other):
        session = summarised_session(first, provider)
        for n in range(5):  # under the threshold: no compaction of the store's own
            turn(first, session.id, n, output_chars=15_000)
        provider.script(delay(SUMMARY_SECONDS))
        first_try = in_thread(lambda: compact(first, session.id, "c-1", force=True))
        assert eventually_called(provider)
        assert claimed(postgres_schema_url, session.id)

        refused = refused_as_running_elsewhere(
            lambda: compact(other, session.id, "c-1", force=True)
        )
        assert error_info(refused).metadata["idempotency_key"] == "c-1"
        # The Python client raises it as its own class (not retried by itself).
        raised = client_errors.from_rpc_error(refused)
        assert isinstance(raised, client_errors.CompactionRunningElsewhere)
        assert raised.metadata == {"idempotency_key": "c-1"}
        assert len(provider.requests) == 1, "the retry paid for a second summary"
        assert not of_kind(other, session.id, "compaction_recorded")

        landed = first_try()
        retry = compact(other, session.id, "c-1", force=True)
        assert landed.compacted and not landed.replayed
        assert retry.replayed and retry.version == landed.version
        assert retry.compaction == landed.compaction
        assert len(model_summaries(other, session.id)) == 1
        assert len(provider.requests) == 1, "a summary was paid for twice"


def test_a_compact_on_another_server_while_the_store_summarises_is_refused_till_it_lands(
    postgres_schema_url: str, provider: FakeProvider
) -> None:
    """A Compact call that comes to another server while a compaction the store started
    asks the model: refused ABORTED, asking no model; retried once that landed, it
    compacts (a call of its own, with its own instructions)."""
    with two_servers(postgres_schema_url) as (first, other):
        session = summarising(first, provider)

        refused_as_running_elsewhere(
            lambda: compact(other, session.id, "c-1", force=True, instructions="keep names")
        )
        assert len(provider.requests) == 1, "the Compact paid for a second summary"

        assert eventually(lambda: model_summaries(first, session.id), within=30)
        assert eventually(lambda: not claimed(postgres_schema_url, session.id))
        turn(first, session.id, 7, output_chars=15_000)  # something new to summarise
        answer = compact(other, session.id, "c-1", force=True, instructions="keep names")
        assert answer.compacted and not answer.replayed
        assert answer.compaction.instructions == "keep names"
        assert len(provider.requests) == 2
