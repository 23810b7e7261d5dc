"""The observability of one server or worker, built from its settings and OTEL_*.

Metrics are on when SESSIONSTORE_METRICS_ADDRESS is set; traces when the
OTEL_* variables ask for an exporter (services.observability.tracing). The
gRPC server's observing layer (services.grpc.observing) is always there: it names each
call's request id and session in the logs, whatever else is on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog
from opentelemetry import trace

from services.adapters.summarizers.base import Summarizer
from services.adapters.summarizers.provider import ProviderCompactor
from services.app.retention_scheduler import RetentionScheduler
from services.app.sessions import SessionService
from services.config import Config
from services.engine.base import ContextEngine
from services.observability.labels import BoundedLabels
from services.observability.sqlite_spans import trace_store_statements
from services.observability.store_events import StoreEvents
from services.observability.tracing import (
    TRACER_NAME,
    ObservedSummarizer,
    TracedEngine,
    instrument_databases,
    tracer_provider_from_environment,
)
from services.readmodels import ReadModels

if TYPE_CHECKING:
    # The SDK is imported only when tracing is on (services.observability.tracing).
    from opentelemetry.sdk.trace import TracerProvider

    from services.observability.metrics import Endpoint, Metrics

# What a step of the summariser chain is built as.
Step = Summarizer | ProviderCompactor

log = structlog.get_logger(__name__)


class Observability:
    def __init__(self, config: Config, tracer_provider: TracerProvider | None = None) -> None:
        """Set up before the stores are built: the database instrumentation must see
        their connections opened."""
        self._address = config.metrics_address
        self.metrics: Metrics | None = None
        if self._address:
            # prometheus_client (some 2 MB) only when metrics are on, here and below.
            from services.observability.metrics import Metrics

            self.metrics = Metrics()
            self.metrics.include_process()
        # A provider given (tests) is its giver's to shut down.
        self._owns_provider = tracer_provider is None
        self.tracer_provider = tracer_provider or tracer_provider_from_environment()
        self.tracer: trace.Tracer = (
            self.tracer_provider.get_tracer(TRACER_NAME)
            if self.tracer_provider is not None
            else trace.NoOpTracer()
        )
        if self.tracer_provider is not None:
            instrument_databases(self.tracer_provider)
        self._models = BoundedLabels()
        self.metrics_port = 0

    @property
    def tracing(self) -> bool:
        return self.tracer_provider is not None

    def summarizers(self, factory: Callable[[Any], Step]) -> Callable[[Any], Step]:
        if self.metrics is None and not self.tracing:
            return factory

        def observed(step: Any) -> Step:
            made = factory(step)
            if isinstance(made, ProviderCompactor):
                return made  # the provider's own compaction: no summariser to observe
            return ObservedSummarizer(made, self.tracer, self.metrics, self._models)

        return observed

    def engine(self, engine: ContextEngine) -> ContextEngine:
        return TracedEngine(engine, self.tracer) if self.tracing else engine

    def watch(self, sessions: SessionService, read_models: ReadModels | None) -> None:
        """Hooks onto what the stores report: saved events, and their state at scrape time."""
        if self.tracer_provider is not None:
            # PostgreSQL's statements are traced by psycopg's instrumentation already.
            trace_store_statements(getattr(sessions.store.recorder, "datastore", None), self.tracer)
            if read_models is not None:
                database = read_models.database
                instrument_databases(self.tracer_provider, [database.writer, database.reader])
        if self.metrics is None:
            return
        from services.observability.collector import StateCollector

        sessions.write_path.on_saved(StoreEvents(self.metrics, self._models).saved)
        # PostgreSQL's pool (psycopg's) has figures; SQLite's has none.
        pool = getattr(getattr(sessions.store.recorder, "datastore", None), "pool", None)
        pool = pool if hasattr(pool, "get_stats") else None

        def caches() -> dict[str, Any]:
            return {
                **sessions.histories.caches(),
                **sessions.access.caches(),
                **sessions.saved_versions.caches(),
            }

        writes = sessions.write_path
        self.metrics.registry.register(
            StateCollector(caches, pool, read_models, lambda: writes.lost_races)
        )

    def watch_retention(self, scheduler: RetentionScheduler) -> None:
        """What the server's retention removed, on its /metrics."""
        if self.metrics is None:
            return
        from services.observability.retention_figures import RetentionCollector

        self.metrics.registry.register(RetentionCollector(scheduler))

    def serve_metrics(self) -> None:
        if self.metrics is not None and self._address:
            self.metrics_port = self.metrics.serve(self._address)
            log.info("serving metrics", address=self._address, port=self.metrics_port)

    def close(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
        if self.tracer_provider is not None and self._owns_provider:
            self.tracer_provider.shutdown()


def serve_worker_metrics(
    config: Config, read_models: ReadModels, retention: RetentionScheduler | None = None
) -> Endpoint | None:
    """The worker's /metrics (when SESSIONSTORE_METRICS_ADDRESS is set): its process,
    the read models' progress, whether it projects (leads) now, and what retention
    removed."""
    if not config.metrics_address:
        return None
    from services.observability.collector import StateCollector
    from services.observability.metrics import Endpoint
    from services.observability.retention_figures import RetentionCollector

    endpoint = Endpoint()
    endpoint.include_process()
    endpoint.registry.register(StateCollector(read_models=read_models))
    if retention is not None:
        endpoint.registry.register(RetentionCollector(retention))
    port = endpoint.serve(config.metrics_address)
    log.info("serving metrics", address=config.metrics_address, port=port)
    return endpoint
