"""The composition root: every part of the store, built from one Config.

The gRPC server, the CLI's in-process tests and the service-layer tests all
build the application here, so they run the same wiring. ``memory:`` as the
database URL gives the eventsourcing library's in-memory recorders, for
tests that need no database.
"""

from __future__ import annotations

from services.adapters.event_store import EventStore
from services.app.sessions import SessionService
from services.config import Config

# Aggregates read for queries are cached and fast-forwarded from the store.
AGGREGATE_CACHE_SIZE = 10_000


def build_event_store(config: Config) -> EventStore:
    env = {**config.eventsourcing_env(), "AGGREGATE_CACHE_MAXSIZE": str(AGGREGATE_CACHE_SIZE)}
    return EventStore(env, snapshot_interval=config.snapshot_interval)


def build_service(config: Config) -> SessionService:
    return SessionService(config, build_event_store(config))
