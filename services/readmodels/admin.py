"""Operator's actions on the read models: migrate, rebuild from zero, status, retry.

Each connects to the database itself; a projection running meanwhile (in a
server or worker) takes turns with it on the tracking rows' locks, so no
event is applied twice. Only the migration creates or migrates tables: the
others refuse a store not at this release, whatever
SESSIONSTORE_MIGRATE_AT_START says, as a deploy's servers of the release
before may still serve it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from services.adapters.database_errors import Kind, kind_of
from services.adapters.event_store import build_event_store
from services.adapters.lost_version import Recorded
from services.adapters.migration_checks import (
    not_migrated,
    refuse_lost_tables_to_migrate,
    require_migrated_to_read,
    require_migrated_to_write,
)
from services.adapters.read_model_db import migrate, open_database, refuse_newer_release
from services.adapters.read_model_repair import Remade
from services.adapters.read_model_store import Quarantined
from services.adapters.session_notifications import session_notifications
from services.config import Config
from services.readmodels.event_batches import EventBatches
from services.readmodels.service import ModelStatus, ReadModels, build_read_models


@dataclass(frozen=True)
class Rebuilt:
    """A read model rebuilt from the first event by `migrate`, its tables dropped."""

    name: str
    applied: int
    position: int


@dataclass(frozen=True)
class Migration:
    """What `migrate` made again of a store at the latest migration (None: nothing),
    the models it rebuilt, and those left for the projection to rebuild (the recall
    index where this process does not keep it)."""

    remade: Remade | None = None
    rebuilt: tuple[Rebuilt, ...] = ()
    left: tuple[str, ...] = ()
    recorded: Recorded | None = None  # the revision told for tables whose version was lost


def migrate_database(database_url: str, stamp: str | None = None) -> Migration:
    """Brings the store to this release: the event store's tables, indexes and
    functions created where missing (those a release added filled from the stored
    events), then the read models migrated, their tables dropped since made again and
    rebuilt from the events. A server or worker told not to migrate, and the commands
    that only read, create none of them: this is what makes them. An event log (or
    data key) table missing from a store that had it is refused (StartRefused): made
    again, empty, it would hide the loss. Read-model tables whose recorded version was
    lost get the revision ``stamp`` names, or the one their schema matches
    (services.adapters.lost_version)."""
    database = open_database(database_url)
    try:
        refuse_newer_release(database)
        refuse_lost_tables_to_migrate(database_url)
        build_event_store(Config(database_url=database_url)).close()
        migrated = migrate(database, stamp)
    finally:
        database.dispose()
    remade, recorded = migrated.remade, migrated.recorded
    if remade is None:
        return Migration(recorded=recorded)
    # Rebuilt here, not left to the projections: the servers answer at once, and a
    # worker's projection, with nothing new to apply, would not look at its positions
    # again until the next write.
    recall_kept = Config(database_url=database_url).recall_index
    names = [name for name in remade.models if name != "recall" or recall_kept]
    rebuilt = []
    with _read_models(database_url, writes=True) as models:
        for name in names:
            rebuilt.append(Rebuilt(name, *_apply_every_event(models, name)))
    left = tuple(name for name in remade.models if name not in names)
    return Migration(remade, tuple(rebuilt), left, recorded)


def wait_until_migrated(database_url: str, seconds: float, every: float = 1.0) -> str:
    """Waits up to ``seconds`` for another process (a deploy's migration job) to bring
    the store to this release (the event store's tables made, the read models at the
    latest migration); answers why not, or empty. A database not up yet is waited
    for too."""
    database = open_database(database_url)
    give_up_at = time.monotonic() + seconds
    try:
        while True:
            try:
                behind = not_migrated(database)
            except Exception as error:
                # What a migration job brings, or a database coming up, is waited for;
                # a grant the role lacks or a damaged file is not: said at once.
                if kind_of(error) not in (Kind.OUTAGE, Kind.NOT_MIGRATED):
                    raise
                behind = str(error)
            left = give_up_at - time.monotonic()
            if not behind or left <= 0:
                return behind
            time.sleep(min(every, left))
    finally:
        database.dispose()


@contextmanager
def _read_models(
    database_url: str, *, writes: bool, recall_index: bool = False
) -> Iterator[ReadModels]:
    """The read models of a database at this release, with no projection running
    here; the recall index among them when SESSIONSTORE_RECALL_INDEX or
    ``recall_index`` asks for it. A store behind this release (its tables missing or
    not migrated, a PostgreSQL schema that is not there) is refused, for a command
    that ``writes`` rows as for one that reads: none of them migrates, whatever
    SESSIONSTORE_MIGRATE_AT_START says, and nothing is created."""
    if writes:
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
            recall_index=config.recall_index or recall_index,
        )
        try:
            yield models
        finally:
            models.close()
    finally:
        events.close()


def rebuild_read_model(database_url: str, name: str) -> tuple[int, int]:
    """Drops the model's rows, quarantine and position, and applies every event again
    (on tables already at this release: a rebuild migrates nothing)."""
    # Rebuilding the recall index by name asks for it, whatever the environment says.
    with _read_models(database_url, writes=True, recall_index=name == "recall") as models:
        models.store.reset(name)
        return _apply_every_event(models, name)


def _apply_every_event(models: ReadModels, name: str) -> tuple[int, int]:
    """Applies the events after the model's position, up to the store's head; answers
    (events applied, position reached)."""
    batches = EventBatches(models.events)
    content = models.store.model(name).entry_content
    applied = 0
    while True:
        count, position = models.store.catch_up(
            name, lambda at, topics: batches.fetch(at, topics, content)
        )
        applied += count
        if count < batches.size:
            return applied, position


def read_model_status(database_url: str) -> tuple[list[ModelStatus], list[Quarantined]]:
    """Each model's position and lag, and the events it quarantined (oldest first).
    Tables behind this release are refused, not migrated: a status only reads."""
    with _read_models(database_url, writes=False) as models:
        return models.status(), models.store.quarantined()


@dataclass(frozen=True)
class RetryResult:
    sessions: int  # sessions projected again
    applied: int  # quarantined events that applied this time
    still_failing: list[Quarantined]


def retry_quarantined(database_url: str, names: Sequence[str] = ()) -> RetryResult:
    """Applies the quarantined events again (after a fix), with the rest of their
    sessions' events in order: each such session is projected again from its first
    event in each model that quarantined it. What still fails stays quarantined."""
    with _read_models(database_url, writes=True) as models:
        wanted = list(names) or sorted(models.store.models)
        batches = EventBatches(models.events)
        before = models.store.quarantined(wanted)
        sessions = {(q.model, q.session_id) for q in before}
        still: list[Quarantined] = []
        for model, session_id in sorted(sessions):
            found = session_notifications(models.events.recorder, session_id)
            decoded = batches.decoded(found, models.store.model(model).entry_content)
            events = list(zip([n.id for n in found], decoded, strict=True))
            still += models.store.reproject(model, session_id, events)
        return RetryResult(len(sessions), len(before) - len(still), still)
