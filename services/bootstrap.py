"""The composition root: every part of the store, built from one Config.

The gRPC server, the CLI's in-process tests and the service-layer tests all
build the application here, so they run the same wiring. ``memory:`` as the
database URL gives the eventsourcing library's in-memory recorders, for
tests that need no database. Nothing else builds a service or wires one
part to another: who listens to saves, which engines exist and which port
the engines act through are all decided below.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from services.adapters.event_store import EventStore, build_event_store
from services.adapters.migration_checks import (
    refuse_lost_tables_to_migrate,
    require_migrated_to_read,
    require_migrated_to_start,
    require_migrated_to_write,
)
from services.adapters.providers import load_providers
from services.adapters.retention_file import read_policies
from services.adapters.summarizers import build_summarizer
from services.adapters.summary_claims import OneServerClaims, PostgresSummaryClaims, summary_claims
from services.app import tenancy
from services.app.access import SessionAccess
from services.app.audit import AuditService
from services.app.commands.compactions import CompactionCommands
from services.app.commands.entries import EntryCommands
from services.app.commands.erasure import ErasureCommands
from services.app.commands.forks import ForkCommands
from services.app.commands.sessions import SessionCommands
from services.app.context import ContextService
from services.app.event_streams import EventStreams
from services.app.history_cache import HistoryCache
from services.app.idempotency import Idempotency
from services.app.imports import ImportService
from services.app.queries import SessionQueries
from services.app.recall import RecallService
from services.app.retention import RetentionOutcome, RetentionPlan, RetentionService
from services.app.retention_scheduler import LeadingRetention, RetentionScheduler
from services.app.retrieval import Retrieval
from services.app.saved_versions import SavedVersions
from services.app.session_rules import SessionRules
from services.app.sessions import SessionCommandSet, SessionService
from services.app.write_path import WritePath
from services.config import Config
from services.engine.base import EngineContext
from services.engine.registry import EngineRegistry, installed_engines
from services.engine.runner import CompactionRunner
from services.observability.setup import Observability
from services.readmodels import ReadModels, build_read_models
from services.readmodels.event_batches import EventBatches
from services.readmodels.leadership import RETENTION_LOCK, lead_while

if TYPE_CHECKING:
    # The SDK is imported only when tracing is on (services.observability.tracing).
    from opentelemetry.sdk.trace import TracerProvider


@dataclass(frozen=True)
class Application:
    """The use cases, ready to serve."""

    sessions: SessionService
    context: ContextService
    runner: CompactionRunner
    imports: ImportService
    audit: AuditService
    streams: EventStreams
    # The SQL read models, unless the database is memory: or projections are off.
    read_models: ReadModels | None = None
    # Long-term memory over the whole history (answers RecallOff without read models).
    recall: RecallService | None = None
    # Metrics and traces (each off unless configured), and the calls' log context.
    observability: Observability | None = None
    # The retention policies, where this server keeps the read models itself and
    # was given a policy file; the server starts it.
    retention: LeadingRetention | None = None
    # Which server summarises a session (on PostgreSQL, connections of their own).
    claims: PostgresSummaryClaims | OneServerClaims | None = None

    def close(self) -> None:
        if self.retention is not None:
            self.retention.close()  # before what its runs use
        self.runner.close()
        if self.claims is not None:
            self.claims.close()  # frees the claims of summaries still running
        if self.read_models is not None:
            self.read_models.close()
        self.sessions.close()
        if self.observability is not None:
            self.observability.close()


def build_sessions(
    config: Config, store: EventStore, engine_names: Collection[str] = ()
) -> SessionService:
    """The session use cases on a store, each role its own object."""
    rules = SessionRules(config, engine_names)
    # The cache cap, shared out so that together the caches stay within it: a
    # 32nd each for the two per-session maps (tenants, latest saved versions:
    # some 23,000 sessions at 256 MB), a sixth for the aggregates, the rest for
    # histories and their renderings.
    budget = config.cache_max_mb << 20
    per_session_map = budget // 32
    access = SessionAccess(
        store, tenancy.SessionIds(store.legacy_tenants), budget // 6, per_session_map
    )
    histories = HistoryCache(store, access, budget - budget // 6 - 2 * per_session_map)
    saved_versions = SavedVersions(per_session_map)
    writes = WritePath(store, access, histories, saved_versions)
    idempotency = Idempotency(store, config.idempotency_ttl_seconds)
    erasure = ErasureCommands(writes, histories)
    commands = SessionCommandSet(
        sessions=SessionCommands(writes, histories, rules),
        entries=EntryCommands(writes, histories, idempotency),
        compactions=CompactionCommands(writes, histories, idempotency),
        erasure=erasure,
        forks=ForkCommands(writes, histories, rules, erasure),
    )
    return SessionService(
        config,
        store,
        rules=rules,
        access=access,
        histories=histories,
        write_path=writes,
        idempotency=idempotency,
        queries=SessionQueries(store, access, histories),
        commands=commands,
    )


def build_events(config: Config, *, read_models: bool) -> EventStore:
    """The event store of a server or a worker. One that migrates at start (the
    default) creates the tables, indexes and functions the store lacks; one told not
    to (SESSIONSTORE_MIGRATE_AT_START=false) creates nothing: it is refused, in one
    line naming `sessionstore migrate`, before the store is opened, unless that has
    brought the store to this release, the read models included where the process
    keeps or reads them (``read_models``). An event log (or data key) table missing
    from a store that had it is refused either way: made again, empty, it would hide
    the loss."""
    if config.database_url == "memory:":
        return build_event_store(config)
    if config.migrate_at_start:
        refuse_lost_tables_to_migrate(config.database_url)
        return build_event_store(config)
    require_migrated_to_start(config.database_url, read_models=read_models)
    return build_event_store(config, create_tables=False)


def build_service(config: Config) -> SessionService:
    return build_application(config).sessions


def build_application(config: Config, tracer_provider: TracerProvider | None = None) -> Application:
    """``tracer_provider``: where spans go; None: as the OTEL_* variables say."""
    observability = Observability(config, tracer_provider)
    providers = load_providers(config.providers_file)
    factories = installed_engines()
    # The read models are kept or read here unless the database is memory: or
    # projections are off.
    keeps_read_models = config.database_url != "memory:" and config.projections != "off"
    try:
        events = build_events(config, read_models=keeps_read_models)
    except BaseException:
        observability.close()  # a refused start leaves nothing open behind it
        raise
    sessions = build_sessions(config, events, engine_names=factories)
    runner = CompactionRunner(config.compaction_workers)
    # A claim is held only by a running compaction: one connection per worker at most.
    claims = summary_claims(events.postgres, config.compaction_workers)
    # The engines act on sessions through the service (their SessionPort), and
    # hear of every save from the write path.
    engines = EngineRegistry(
        EngineContext(
            port=sessions,
            summarizers=observability.summarizers(lambda step: build_summarizer(step, providers)),
            runner=runner,
            claims=claims,
        ),
        factories,
        wrap=observability.engine,
    )
    read_models = None
    if keeps_read_models:
        try:
            read_models = build_read_models(
                sessions.store,
                config.database_url,
                run_projection=config.projections == "inprocess",
                migrate_first=config.migrate_at_start,
                poll_seconds=config.projection_poll_seconds,
                recall_index=config.recall_index,
            )
        except BaseException:
            # A refused start (tables not migrated) leaves nothing open behind it.
            runner.close()
            claims.close()
            sessions.close()
            observability.close()
            raise
        if read_models.runner is not None:
            wake = read_models.runner.wake
            sessions.write_path.on_saved(lambda _session, _events: wake())
    recall = RecallService(sessions, read_models)
    context = ContextService(sessions, engines, Retrieval(recall))
    sessions.write_path.on_saved(context.ingest)
    observability.watch(sessions, read_models)
    retention = None
    if read_models is not None and config.projections == "inprocess":
        retention = build_scheduled_retention(config, sessions, read_models)
    if retention is not None:
        observability.watch_retention(retention.scheduler)
    return Application(
        sessions,
        context,
        runner,
        imports=ImportService(sessions),
        audit=AuditService(sessions, read_models),
        streams=EventStreams(sessions),
        read_models=read_models,
        recall=recall,
        observability=observability,
        retention=retention,
        claims=claims,
    )


def build_retention(
    sessions: SessionService,
    read_models: ReadModels,
    clock: Callable[[], datetime] | None = None,
) -> RetentionService:
    """Retention's use case: candidates from the catalog, erasures through the sessions'
    own erasure (``clock``: when "now" is, for dry runs of a later date and tests)."""
    return RetentionService(sessions, read_models.queries, clock)


def build_scheduled_retention(
    config: Config, sessions: SessionService, read_models: ReadModels
) -> LeadingRetention | None:
    """The retention policies applied on their schedule by the process that holds the
    retention lock (one of the workers and servers on a PostgreSQL database; on
    SQLite, whichever was given the file). Erasures go through ``sessions``, so a
    server's caches drop what went. None without a policy file (then retention
    removes nothing)."""
    if config.retention_file is None:
        return None
    scheduler = RetentionScheduler(
        build_retention(sessions, read_models),
        config.retention_file,
        config.retention_interval_seconds,
        threading.Event(),
    )
    database = read_models.database
    return LeadingRetention(
        scheduler,
        lambda stopping, leading: lead_while(
            database, RETENTION_LOCK, stopping, leading.set, leading.clear
        ),
    )


CATALOG = "catalog"


@contextmanager
def retention_on_database(
    database_url: str, at: datetime | None = None, *, erases: bool
) -> Iterator[RetentionService]:
    """Retention straight on the database, as ``migrate`` works, for the CLI: the session
    catalog is first brought up to the store's latest event, so the plan sees every
    session; no projection is left running. A store behind this release (its tables
    missing or not migrated, a PostgreSQL schema that is not there) is refused and
    nothing is created, for a run that ``erases`` as for a dry run: only `sessionstore
    migrate` migrates, whatever SESSIONSTORE_MIGRATE_AT_START says."""
    if erases:
        require_migrated_to_write(database_url)
    else:
        require_migrated_to_read(database_url)
    config = Config(database_url=database_url)
    events = build_event_store(config, create_schema=False, create_tables=False)
    try:
        models = build_read_models(
            events,
            database_url,
            run_projection=False,
            migrate_first=False,
            poll_seconds=0,
        )
        try:
            batches = EventBatches(events)
            head = events.recorder.max_notification_id() or 0
            position = models.store.positions([CATALOG])[CATALOG]
            while position < head:
                reached = models.store.catch_up(CATALOG, batches.fetch)[1]
                if reached <= position:
                    break  # another projector holds the model: take the catalog as it is
                position = reached
            sessions = build_sessions(config, events)
            yield build_retention(sessions, models, (lambda: at) if at else None)
        finally:
            models.close()
    finally:
        events.close()


def plan_retention(
    database_url: str, policy_file: Path, at: datetime | None = None
) -> RetentionPlan:
    """The dry run: what the policies would remove at ``at`` (now), and why."""
    policies = read_policies(policy_file)
    with retention_on_database(database_url, at, erases=False) as retention:
        return retention.plan(policies)


def apply_retention(database_url: str, policy_file: Path) -> tuple[RetentionPlan, RetentionOutcome]:
    policies = read_policies(policy_file)
    with retention_on_database(database_url, erases=True) as retention:
        plan = retention.plan(policies)
        return plan, retention.apply(plan, policies)
