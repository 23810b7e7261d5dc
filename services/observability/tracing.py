"""OpenTelemetry traces: the tracer provider the standard OTEL_* variables describe,
the database instrumented, and spans for the context engine's decisions and
every summariser call (with the GenAI semantic conventions).

Tracing is off unless the environment asks for an exporter: OTEL_TRACES_EXPORTER
(``otlp`` or ``console``), or an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). OTEL_SDK_DISABLED=true turns it off
whatever else is set. The exporter, sampler, batch sizes and resource
(OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) read their own OTEL_* variables.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from domain.context.summary import SummaryPrompt
from domain.session import Session
from services.adapters.summarizers.base import (
    Summarizer,
    SummarizerOverflow,
    SummarizerUnavailable,
    SummaryRequest,
    SummaryResult,
)
from services.engine.base import Assembly, CompactionOutcome, CompactionRequest, ContextEngine
from services.observability.conversation import conversation, current_conversation
from services.observability.labels import BoundedLabels

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from services.observability.metrics import Metrics

TRACER_NAME = "sessionstore"
DEFAULT_SERVICE_NAME = "sessionstore"


def tracer_provider_from_environment(
    environ: Mapping[str, str] = os.environ,
) -> TracerProvider | None:
    """The provider the OTEL_* variables ask for, or None when they ask for none."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = [
        name.strip().lower()
        for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",")
        if name.strip()
    ]
    if not exporters and (
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    ):
        exporters = ["otlp"]
    exporters = [name for name in exporters if name != "none"]
    if not exporters:
        return None
    # The SDK only now: a server that traces nothing need not hold it (with psutil,
    # which its resources import, some 3 MB).
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # OTEL_RESOURCE_ATTRIBUTES is read by Resource.create; the service's name is ours
    # unless OTEL_SERVICE_NAME gives one.
    name = environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    for name in exporters:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name, environ)))
    return provider


def _exporter(name: str, environ: Mapping[str, str]) -> Any:
    if name == "otlp":
        protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
            "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
        )
        if protocol != "http/protobuf":
            raise ValueError(
                f"OTLP protocol {protocol!r}: this server exports over http/protobuf only "
                "(the collector's port 4318); unset OTEL_EXPORTER_OTLP_PROTOCOL"
            )
        # Reads OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout, compression).
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    raise ValueError(
        f"OTEL_TRACES_EXPORTER {name!r} is not one this server has: use otlp, console or none"
    )


def instrument_databases(provider: TracerProvider, read_model_engines: Sequence[Any] = ()) -> None:
    """Spans for every statement: psycopg (the event store on PostgreSQL) for connections
    opened from now on, SQLAlchemy for the read models' engines."""
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer
    from opentelemetry.metrics import NoOpMeter

    psycopg_instrumentor = PsycopgInstrumentor()
    if not psycopg_instrumentor.is_instrumented_by_opentelemetry:
        psycopg_instrumentor.instrument(tracer_provider=provider)
    # The engines alone, not SQLAlchemyInstrumentor: that one also patches the asyncio
    # extension, which needs greenlet, and declares a range of versions short of ours.
    tracer = provider.get_tracer("opentelemetry.instrumentation.sqlalchemy")
    usage = NoOpMeter("sessionstore").create_up_down_counter("db.client.connections.usage")
    for engine in read_model_engines:
        EngineTracer(tracer, engine, usage)


class ObservedSummarizer:
    """A summariser whose every call is a GenAI client span, and counted and timed."""

    def __init__(
        self,
        inner: Summarizer,
        tracer: trace.Tracer,
        metrics: Metrics | None,
        models: BoundedLabels,
    ) -> None:
        self._inner = inner
        self._tracer = tracer
        self._metrics = metrics
        self._model = models(inner.name)
        self.name = inner.name
        self.window_tokens = inner.window_tokens

    def count_tokens(self, prompt: SummaryPrompt) -> int:
        return self._inner.count_tokens(prompt)

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": self.name,
            "gen_ai.request.max_tokens": request.max_output_tokens,
            "sessionstore.summarizer.entries": len(request.entries),
        }
        if current_conversation():
            attributes["gen_ai.conversation.id"] = current_conversation()
        started = time.perf_counter()
        with self._tracer.start_as_current_span(
            f"chat {self.name}",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=True,
            set_status_on_exception=True,
        ) as span:
            try:
                result = self._inner.summarize(request)
            except Exception as error:
                span.set_attribute("error.type", type(error).__name__)
                self._count(started, "error", _error_kind(error))
                raise
            span.set_attribute("gen_ai.response.model", result.model)
            if result.input_tokens is not None:
                span.set_attribute("gen_ai.usage.input_tokens", result.input_tokens)
            if result.output_tokens is not None:
                span.set_attribute("gen_ai.usage.output_tokens", result.output_tokens)
            self._count(started, "ok")
            return result

    def _count(self, started: float, outcome: str, kind: str = "") -> None:
        if self._metrics is None:
            return
        seconds = time.perf_counter() - started
        self._metrics.summarizer_seconds.labels(self._model, outcome).observe(seconds)
        if kind:
            self._metrics.summarizer_errors.labels(self._model, kind).inc()


def _error_kind(error: Exception) -> str:
    if isinstance(error, SummarizerOverflow):
        return "overflow"
    if isinstance(error, SummarizerUnavailable):
        return "unavailable"
    return "error"


class TracedEngine:
    """A context engine whose decisions (a view assembled, a compaction) are spans."""

    def __init__(self, inner: ContextEngine, tracer: trace.Tracer) -> None:
        self._inner = inner
        self._tracer = tracer
        self.info = inner.info

    def ingest(self, session: Session) -> None:
        self._inner.ingest(session)

    def after_turn(self, session: Session) -> None:
        with conversation(session.id):
            self._inner.after_turn(session)

    def assemble(
        self, session_id: str, token_budget: int | None, deadline: float | None
    ) -> Assembly:
        with (
            conversation(session_id),
            self._tracer.start_as_current_span(
                "context_engine.assemble", attributes=self._attributes(session_id)
            ) as span,
        ):
            assembly = self._inner.assemble(session_id, token_budget, deadline)
            span.set_attributes(
                {
                    "sessionstore.window_guard.level": assembly.verdict.level.value,
                    "sessionstore.budget_tokens": assembly.budget.budget_tokens,
                    "sessionstore.estimated_tokens": assembly.view.estimated_tokens,
                    "sessionstore.engine.actions": [a.kind for a in assembly.actions],
                }
            )
            return assembly

    def compact(self, session_id: str, request: CompactionRequest) -> CompactionOutcome:
        attributes = {
            **self._attributes(session_id),
            "sessionstore.compaction.trigger": request.trigger,
            "sessionstore.compaction.force": request.force,
            "sessionstore.compaction.dry_run": request.dry_run,
        }
        with (
            conversation(session_id),
            self._tracer.start_as_current_span(
                "context_engine.compact", attributes=attributes
            ) as span,
        ):
            outcome = self._inner.compact(session_id, request)
            span.set_attributes(_outcome_attributes(outcome))
            if outcome.failure is not None:
                span.set_status(Status(StatusCode.ERROR, outcome.failure.reason[:200]))
            return outcome

    def _attributes(self, session_id: str) -> dict[str, Any]:
        return {"gen_ai.conversation.id": session_id, "sessionstore.engine": self.info.name}


def _outcome_attributes(outcome: CompactionOutcome) -> dict[str, Any]:
    found: dict[str, Any] = {
        "sessionstore.compaction.compacted": outcome.compacted,
        "sessionstore.compaction.reason": outcome.reason[:200],
    }
    if outcome.recorded is not None:
        compaction = outcome.recorded.compaction
        found |= {
            "sessionstore.compaction.tokens_before": compaction.tokens_before,
            "sessionstore.compaction.tokens_after": compaction.tokens_after,
            "sessionstore.compaction.fallback_stage": compaction.fallback_stage,
            "sessionstore.compaction.entries_covered": compaction.entries_covered,
            "gen_ai.request.model": compaction.summarizer_model,
        }
    if outcome.failure is not None:
        found["sessionstore.compaction.failed_stage"] = outcome.failure.stage
    return found
