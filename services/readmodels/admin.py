"""Operator's actions on the read models: migrate, rebuild from zero."""

from __future__ import annotations

from services.adapters.read_model_db import migrate, open_database
from services.bootstrap import build_event_store
from services.config import Config
from services.readmodels.runner import ReadModelRunner
from services.readmodels.service import model_store


def migrate_database(database_url: str) -> None:
    database = open_database(database_url)
    try:
        migrate(database)
    finally:
        database.dispose()


def rebuild_read_model(database_url: str, name: str) -> tuple[int, int]:
    """Drops the model's rows and position and applies every event again.

    A projection running meanwhile (in a server or worker) takes turns with
    this one on the tracking row's lock, so no event is applied twice.
    """
    events = build_event_store(Config(database_url=database_url))
    database = open_database(database_url)
    try:
        migrate(database)
        store = model_store(database)
        store.reset(name)
        runner = ReadModelRunner(events, store, poll_seconds=0)
        applied = 0
        while True:
            count, position = store.catch_up(name, runner.fetch)
            applied += count
            if count < runner.batch:
                return applied, position
    finally:
        database.dispose()
        events.close()
