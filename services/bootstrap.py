"""The composition root: every part of the store, built from one Config.

The gRPC server, the CLI's in-process tests and the service-layer tests all
build the application here, so they run the same wiring. ``memory:`` as the
database URL gives the eventsourcing library's in-memory recorders, for
tests that need no database.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.adapters.event_store import EventStore
from services.adapters.providers import load_providers
from services.adapters.summarizers import build_summarizer
from services.app.context import ContextService
from services.app.recall import RecallService
from services.app.retrieval import Retrieval
from services.app.sessions import SessionService
from services.config import Config
from services.engine.base import EngineContext
from services.engine.registry import EngineRegistry
from services.engine.runner import CompactionRunner
from services.readmodels import ReadModels, build_read_models

# Aggregates read for queries are cached and fast-forwarded from the store.
AGGREGATE_CACHE_SIZE = 10_000


def build_event_store(config: Config) -> EventStore:
    env = {**config.eventsourcing_env(), "AGGREGATE_CACHE_MAXSIZE": str(AGGREGATE_CACHE_SIZE)}
    return EventStore(env, snapshot_interval=config.snapshot_interval)


@dataclass(frozen=True)
class Application:
    """The use cases, ready to serve."""

    sessions: SessionService
    context: ContextService
    runner: CompactionRunner
    # The SQL read models, unless the database is memory: or projections are off.
    read_models: ReadModels | None = None
    # Long-term memory over the whole history (answers RecallOff without read models).
    recall: RecallService | None = None

    def close(self) -> None:
        self.runner.close()
        if self.read_models is not None:
            self.read_models.close()
        self.sessions.close()


def build_service(config: Config) -> SessionService:
    return build_application(config).sessions


def build_application(config: Config) -> Application:
    providers = load_providers(config.providers_file)
    sessions = SessionService(config, build_event_store(config))
    runner = CompactionRunner(config.compaction_workers)
    engines = EngineRegistry(
        EngineContext(
            port=sessions,
            summarizers=lambda step: build_summarizer(step, providers),
            runner=runner,
        )
    )
    sessions.engine_names = set(engines.names)
    read_models = None
    if config.database_url != "memory:" and config.projections != "off":
        read_models = build_read_models(
            sessions.store,
            config.database_url,
            run_projection=config.projections == "inprocess",
            migrate_first=config.migrate_at_start,
            poll_seconds=config.projection_poll_seconds,
        )
        if read_models.runner is not None:
            wake = read_models.runner.wake
            sessions.on_saved.append(lambda _session, _events: wake())
    recall = RecallService(sessions, read_models)
    context = ContextService(sessions, engines, Retrieval(recall))
    return Application(sessions, context, runner, read_models, recall)
