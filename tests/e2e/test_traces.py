"""Traces through a real server: a span per call, with the database's statements, the
context engine's decisions and every summariser call beneath it, exported to the SDK's
in-memory exporter (the server's own tracer provider, as OTEL_* would make it)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.config import Config
from services.grpc.server import RunningServer, start
from services.observability.tracing import tracer_provider_from_environment
from tests.support.context_engine import turn
from tests.support.fake_provider import FakeProvider
from tests.support.grpc_calls import refused, user

STORE = "sessionstore.v1.SessionStore"
# A caller's trace (W3C trace context), which the server's spans must join.
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    exporter.provider = provider  # type: ignore[attr-defined]
    yield exporter
    # The database instrumentation patches psycopg for the whole process: undo it.
    PsycopgInstrumentor().uninstrument()
    provider.shutdown()


@pytest.fixture
def traced(postgres_schema_url: str, exporter: InMemorySpanExporter) -> Iterator[RunningServer]:
    config = Config(address="127.0.0.1:0", database_url=postgres_schema_url)
    running = start(config, tracer_provider=exporter.provider)  # type: ignore[attr-defined]
    exporter.clear()
    yield running
    running.stop(0)


def _named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def _finished(exporter: InMemorySpanExporter, *names: str) -> list[ReadableSpan]:
    """The spans, once those of ``names`` have ended: a refused call's status reaches the
    client before its span ends on the server."""
    end = time.monotonic() + 10
    while time.monotonic() < end:
        spans = list(exporter.get_finished_spans())
        if all(_named(spans, name) for name in names):
            return spans
        time.sleep(0.05)
    raise AssertionError(f"no span {names} in {[s.name for s in spans]}")


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def _descendants(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    found = []
    for child in _children(spans, parent):
        found += [child, *_descendants(spans, child)]
    return found


def test_a_call_is_a_server_span_joining_the_callers_trace_with_the_database_beneath(
    traced: RunningServer, exporter: InMemorySpanExporter
) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{traced.port}") as channel:
        store = pb_grpc.SessionStoreStub(channel)
        session = store.CreateSession(pb.CreateSessionRequest())
        store.GetDurableLog(
            pb.GetViewRequest(session_id=session.id),
            metadata=[("traceparent", TRACEPARENT), ("x-request-id", "req-42")],
        )
        refused(
            lambda: store.GetSession(pb.GetSessionRequest(session_id="missing")),
            grpc.StatusCode.NOT_FOUND,
        )
    spans = _finished(exporter, f"{STORE}/GetDurableLog", f"{STORE}/GetSession")
    (read,) = _named(spans, f"{STORE}/GetDurableLog")
    assert read.kind is SpanKind.SERVER
    assert format(read.context.trace_id, "032x") == CALLER_TRACE
    assert read.parent is not None and read.parent.is_remote
    attributes = dict(read.attributes or {})
    assert attributes["rpc.system"] == "grpc"
    assert attributes["rpc.service"] == STORE
    assert attributes["rpc.method"] == "GetDurableLog"
    assert attributes["rpc.grpc.status_code"] == 0
    assert attributes["gen_ai.conversation.id"] == session.id
    assert attributes["sessionstore.request_id"] == "req-42"
    # The session's events read from PostgreSQL, inside the call.
    statements = [s for s in _descendants(spans, read) if s.kind is SpanKind.CLIENT]
    assert statements, [s.name for s in spans]
    assert all(dict(s.attributes or {})["db.system"] == "postgresql" for s in statements)
    (missing,) = _named(spans, f"{STORE}/GetSession")
    assert dict(missing.attributes or {})["rpc.grpc.status_code"] == 5  # NOT_FOUND
    # The caller's mistake is not the server's error.
    assert missing.status.status_code is not StatusCode.ERROR


def test_on_sqlite_the_stores_statements_are_spans_inside_their_transactions(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    config = Config(address="127.0.0.1:0", database_url=f"sqlite:///{tmp_path}/s.db")
    server = start(config, tracer_provider=exporter.provider)  # type: ignore[attr-defined]
    exporter.clear()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = pb_grpc.SessionStoreStub(channel)
            session = store.CreateSession(pb.CreateSessionRequest())
            store.AppendEntries(
                pb.AppendEntriesRequest(session_id=session.id, entries=[user("hello")])
            )
    finally:
        server.stop(0)
    spans = _finished(exporter, f"{STORE}/AppendEntries")
    (append,) = _named(spans, f"{STORE}/AppendEntries")
    beneath = _descendants(spans, append)
    # The save: one transaction that commits, its INSERTs inside it.
    saves = [
        s
        for s in beneath
        if s.name == "sqlite transaction" and dict(s.attributes or {})["db.commit"]
    ]
    assert saves, [s.name for s in beneath]
    inserts = [s for s in _children(spans, saves[0]) if s.name == "INSERT"]
    assert inserts, [s.name for s in _children(spans, saves[0])]
    for insert in inserts:
        attributes = dict(insert.attributes or {})
        assert insert.kind is SpanKind.CLIENT
        assert attributes["db.system"] == "sqlite"
        assert attributes["db.name"] == f"{tmp_path}/s.db"
        assert str(attributes["db.statement"]).startswith("INSERT")
    # Each statement once: nothing traces it again beneath its span.
    statements = {s.context.span_id for s in spans if s.kind is SpanKind.CLIENT}
    assert not [s.name for s in spans if s.parent and s.parent.span_id in statements]


def test_a_compaction_traces_the_engines_decision_and_each_summariser_call(
    traced: RunningServer, exporter: InMemorySpanExporter
) -> None:
    with (
        FakeProvider() as provider,
        grpc.insecure_channel(f"127.0.0.1:{traced.port}") as channel,
    ):
        store = pb_grpc.SessionStoreStub(channel)
        session = store.CreateSession(
            pb.CreateSessionRequest(
                settings=pb.SessionSettings(
                    model="gpt-4o",
                    compaction=pb.CompactionPolicy(
                        keep_recent_tokens=1_000,
                        summarizer_model="openai/fake-summarizer",
                        summarizer_api_base=provider.openai_base,
                        summarizer_window_tokens=128_000,
                    ),
                )
            )
        )
        for n in range(3):
            turn(store, session.id, n, output_chars=3_000)
        done = store.Compact(pb.CompactRequest(session_id=session.id, force=True))
        assert done.compacted and done.compaction.summarizer_model == "openai/fake-summarizer"
        store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id))
    spans = _finished(exporter, f"{STORE}/Compact", f"{STORE}/GetPromptView")
    (call,) = _named(spans, f"{STORE}/Compact")
    (decision,) = [s for s in _children(spans, call) if s.name == "context_engine.compact"]
    decided = dict(decision.attributes or {})
    assert decided["gen_ai.conversation.id"] == session.id
    assert decided["sessionstore.compaction.trigger"] == "manual"
    assert decided["sessionstore.compaction.compacted"] is True
    assert decided["sessionstore.compaction.tokens_before"] == done.compaction.tokens_before
    assert decided["sessionstore.compaction.tokens_after"] == done.compaction.tokens_after
    assert decided["gen_ai.request.model"] == "openai/fake-summarizer"
    summaries = [s for s in _descendants(spans, decision) if s.name.startswith("chat ")]
    assert len(summaries) == done.compaction.chunks >= 1
    for summary in summaries:
        said = dict(summary.attributes or {})
        assert summary.kind is SpanKind.CLIENT
        assert said["gen_ai.operation.name"] == "chat"
        assert said["gen_ai.request.model"] == "openai/fake-summarizer"
        assert said["gen_ai.conversation.id"] == session.id
        assert int(said["gen_ai.usage.input_tokens"]) > 0  # type: ignore[arg-type]
        assert int(said["gen_ai.usage.output_tokens"]) > 0  # type: ignore[arg-type]
    (view,) = _named(spans, f"{STORE}/GetPromptView")
    (assembled,) = [s for s in _children(spans, view) if s.name == "context_engine.assemble"]
    assert dict(assembled.attributes or {})["sessionstore.window_guard.level"] == "ok"


def test_a_compaction_an_append_starts_joins_that_appends_trace(
    traced: RunningServer, exporter: InMemorySpanExporter
) -> None:
    with (
        FakeProvider() as provider,
        grpc.insecure_channel(f"127.0.0.1:{traced.port}") as channel,
    ):
        store = pb_grpc.SessionStoreStub(channel)
        session = store.CreateSession(
            pb.CreateSessionRequest(
                settings=pb.SessionSettings(
                    model="gpt-4o",
                    context_window_tokens=40_000,
                    compaction=pb.CompactionPolicy(
                        threshold_ratio=0.3,
                        keep_recent_tokens=4_000,
                        summarizer_model="openai/fake-summarizer",
                        summarizer_api_base=provider.openai_base,
                        summarizer_window_tokens=128_000,
                    ),
                )
            )
        )
        for n in range(3):  # the third crosses the threshold
            turn(store, session.id, n, output_chars=15_000)

        def compacted() -> bool:
            found = store.GetSession(pb.GetSessionRequest(session_id=session.id))
            return found.compaction_count > 0

        end = time.monotonic() + 30
        while not compacted():
            assert time.monotonic() < end, "no compaction in the background"
            time.sleep(0.1)
    spans = _finished(exporter, "chat openai/fake-summarizer")
    appends = {s.context.span_id: s for s in _named(spans, f"{STORE}/AppendEntries")}
    summaries = [s for s in spans if s.name == "chat openai/fake-summarizer"]
    for summary in summaries:
        # Beneath the append that started it, in that append's trace.
        assert summary.parent is not None and summary.parent.span_id in appends
        started_by = appends[summary.parent.span_id]
        assert summary.context.trace_id == started_by.context.trace_id
        assert dict(summary.attributes or {})["gen_ai.conversation.id"] == session.id


def test_tracing_is_off_unless_the_otel_variables_ask_for_an_exporter(tmp_path: Path) -> None:
    assert tracer_provider_from_environment({}) is None
    assert tracer_provider_from_environment({"OTEL_TRACES_EXPORTER": "none"}) is None
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    provider = tracer_provider_from_environment(endpoint)
    assert provider is not None
    assert provider.resource.attributes["service.name"] == "sessionstore"
    provider.shutdown()
    assert tracer_provider_from_environment({**endpoint, "OTEL_SDK_DISABLED": "true"}) is None
    named = tracer_provider_from_environment(
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "sessions-eu"}
    )
    assert named is not None and named.resource.attributes["service.name"] == "sessions-eu"
    named.shutdown()
    with pytest.raises(ValueError, match="OTEL_TRACES_EXPORTER"):
        tracer_provider_from_environment({"OTEL_TRACES_EXPORTER": "jaeger"})
    with pytest.raises(ValueError, match="http/protobuf only"):
        tracer_provider_from_environment({**endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    # A server without any: no spans are made at all.
    server = start(Config(address="127.0.0.1:0", database_url=f"sqlite:///{tmp_path}/s.db"))
    try:
        assert server.app.observability is not None and not server.app.observability.tracing
    finally:
        server.stop(0)
