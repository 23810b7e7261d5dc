"""What queries ask of the read models: their rows, once they have reached a position.

A client that wrote on one server and reads on another passes the position
its write answered (``min_position``); without one, a listing waits for the
store's head at the moment it was asked, so it includes every write
acknowledged before it, as the listing from the event store did.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from domain.errors import PreconditionFailed, VersionOutOfRange
from services.adapters.event_store import EventStore
from services.adapters.read_model_db import ReadModelDatabase, migrate, open_database
from services.adapters.read_model_queries import ReadModelQueries
from services.adapters.read_model_store import (
    Catalog,
    CompactionAudit,
    PruneAudit,
    ReadModelStore,
)
from services.readmodels.runner import ReadModelRunner
from services.readmodels.topics import COMPACTION_TOPICS, PRUNE_TOPICS

# How long a query waits for the read models when the client set no deadline.
DEFAULT_WAIT_SECONDS = 10.0
WAIT_STEP_SECONDS = 0.02


class ReadModelsBehind(PreconditionFailed):
    """The read models did not reach the asked position in time."""


def model_store(database: ReadModelDatabase) -> ReadModelStore:
    return ReadModelStore(
        database, [Catalog(), CompactionAudit(COMPACTION_TOPICS), PruneAudit(PRUNE_TOPICS)]
    )


@dataclass
class ReadModels:
    events: EventStore
    database: ReadModelDatabase
    store: ReadModelStore
    queries: ReadModelQueries
    # The in-process projection, when this process runs it.
    runner: ReadModelRunner | None

    def wait_for(self, names: Sequence[str], position: int, deadline: float | None) -> int:
        """Waits until the models have applied ``position`` (the store's head when 0;
        no wait when negative) and answers the position they reached."""
        head = self.events.recorder.max_notification_id() or 0
        if position == 0:
            position = head
        elif position > head:
            # Nothing has been written there yet: waiting could only time out.
            raise VersionOutOfRange(
                f"min_position {position} is beyond the store's latest position {head}; send "
                "a position a write answered, or 0 for the latest"
            )
        end = deadline if deadline is not None else time.monotonic() + DEFAULT_WAIT_SECONDS
        while True:
            reached = min(self.store.position(name) for name in names)
            if reached >= position:
                return reached
            if time.monotonic() >= end:
                raise ReadModelsBehind(
                    f"the read models reached position {reached}, not {position}, in time; "
                    "retry, or check that the projection is running (SESSIONSTORE_PROJECTIONS)"
                )
            if self.runner is not None:
                self.runner.hurry()
                with self.runner.progress:
                    self.runner.progress.wait(WAIT_STEP_SECONDS)
            else:
                time.sleep(WAIT_STEP_SECONDS)

    def start(self) -> None:
        if self.runner is not None:
            self.runner.start()

    def close(self) -> None:
        if self.runner is not None:
            self.runner.stop()
        self.database.dispose()


def build_read_models(
    events: EventStore,
    database_url: str,
    *,
    run_projection: bool,
    migrate_first: bool,
    poll_seconds: float,
) -> ReadModels:
    database = open_database(database_url)
    if migrate_first:
        migrate(database)
    store = model_store(database)
    runner = ReadModelRunner(events, store, poll_seconds) if run_projection else None
    return ReadModels(events, database, store, ReadModelQueries(database), runner)
