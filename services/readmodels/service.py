"""What queries ask of the read models: their rows, once they have reached a position.

A client that wrote on one server and reads on another passes the position
its write answered (``min_position``); without one, a listing waits for the
store's head at the moment it was asked, so it includes every write
acknowledged before it, as the listing from the event store did.

A wait ends when the models reach the position, when the call is cut (the
client cancelled, the server stops: UNAVAILABLE), when a model it waits for
is failing (UNAVAILABLE at once, not at the deadline), or when an event it
waited for was quarantined instead of applied (FAILED_PRECONDITION: the
answer would miss it).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import structlog
from sqlalchemy.exc import SQLAlchemyError

from domain.errors import PreconditionFailed, Unavailable, VersionOutOfRange
from services import deadline
from services.adapters.event_store import EventStore
from services.adapters.migration_checks import require_migrated
from services.adapters.read_model_db import ReadModelDatabase, migrate, open_database
from services.adapters.read_model_queries import ReadModelQueries
from services.adapters.read_model_store import Quarantined, ReadModelStore, describe_error
from services.adapters.read_model_writers import Catalog, CompactionAudit, PruneAudit
from services.adapters.recall_index import RecallIndex, empty_recall_index
from services.readmodels.runner import ReadModelRunner
from services.readmodels.topics import COMPACTION_TOPICS, PRUNE_TOPICS

log = structlog.get_logger(__name__)

# How long a query waits for the read models when the client set no deadline.
DEFAULT_WAIT_SECONDS = 10.0
# A wait looks again at least this often (woken sooner by the projection of this
# process when it commits), and sooner still when the call is cut.
WAIT_STEP_SECONDS = 0.1
# Without a projection in this process, the positions are polled: first often.
FIRST_POLL_SECONDS = 0.02
# How many quarantined events the status lists, newest first.
STATUS_QUARANTINED = 20


class ReadModelsBehind(PreconditionFailed):
    """The read models did not reach the asked position in time."""

    reason = "read_models_behind"


class ReadModelQuarantined(PreconditionFailed):
    """An event the query waited for was quarantined: the answer would miss it."""

    reason = "READ_MODEL_QUARANTINED"


def model_store(database: ReadModelDatabase, recall_index: bool = False) -> ReadModelStore:
    """The read models kept; the recall index only when asked for, as it holds the
    entries' text unsealed (SESSIONSTORE_RECALL_INDEX)."""
    models = [Catalog(), CompactionAudit(COMPACTION_TOPICS), PruneAudit(PRUNE_TOPICS)]
    if recall_index:
        models.append(RecallIndex(database.postgres))
    return ReadModelStore(database, models)


@dataclass(frozen=True)
class ModelStatus:
    """One read model's progress, for the health detail and `readmodels status`."""

    name: str
    position: int
    head: int
    # Events after the position up to the head (positions are not consecutive).
    lag: int
    quarantined: int
    # While the projection of this process cannot reach the database for it.
    failing_since: float | None = None  # time.time()
    error: str = ""
    retry_in_seconds: float = 0.0


@dataclass
class ReadModels:
    events: EventStore
    database: ReadModelDatabase
    store: ReadModelStore
    queries: ReadModelQueries
    # The in-process projection, when this process runs it.
    runner: ReadModelRunner | None
    # Queries of this process waiting now for the models to reach their position: a
    # figure for the metrics (a stalled projection shows as queries piling up).
    waiting: int = field(default=0, init=False)
    _waiting_lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def wait_for(self, names: Sequence[str], position: int, deadline_at: float | None) -> int:
        """Waits until the models have applied ``position`` (the store's head when 0;
        no wait when negative) and answers the position they reached."""
        if position == 0:
            position = self.events.head_position()
        elif position > (latest := self.events.latest_position()):
            # Nothing has been written there yet: waiting could only time out.
            raise VersionOutOfRange(
                f"min_position {position} is beyond the store's latest position {latest}; "
                "send a position a write answered, or 0 for the latest"
            )
        started = reached = min(self.store.positions(names).values())
        if reached >= position:
            return reached
        with self._counted_wait():
            reached = self._wait(names, position, reached, deadline_at)
        skipped = self.store.first_quarantined(names, started, position)
        if skipped is not None:
            raise _quarantined(skipped)
        return reached

    def _wait(
        self, names: Sequence[str], position: int, reached: int, deadline_at: float | None
    ) -> int:
        if self.runner is not None:
            self.runner.hurry()  # once: a model backing off is not hurried
        end = deadline_at if deadline_at is not None else time.monotonic() + DEFAULT_WAIT_SECONDS
        step = FIRST_POLL_SECONDS
        while reached < position:
            deadline.check("waiting for the read models")
            self._refuse_if_failing(names)
            left = end - time.monotonic()
            if left <= 0:
                raise ReadModelsBehind(
                    f"the read models reached position {reached}, not {position}, in time; "
                    "retry, or check that the projection is running (SESSIONSTORE_PROJECTIONS)"
                )
            if self.runner is not None:
                with self.runner.progress:
                    self.runner.progress.wait(min(WAIT_STEP_SECONDS, left))
            else:
                deadline.pause(min(step, left))
                step = min(WAIT_STEP_SECONDS, step * 2)
            reached = min(self.store.positions(names).values())
        return reached

    @contextmanager
    def _counted_wait(self) -> Iterator[None]:
        with self._waiting_lock:
            self.waiting += 1
        try:
            yield
        finally:
            with self._waiting_lock:
                self.waiting -= 1

    def _refuse_if_failing(self, names: Sequence[str]) -> None:
        if self.runner is None:
            return
        for name, state in self.runner.failing(names).items():
            if state.refusal is not None:
                # Copied: the same refusal may be raised in several calls at once.
                refusal = copy.copy(state.refusal)
                refusal.args = (f"the {name} read model cannot catch up: {state.refusal}",)
                raise refusal
            raise Unavailable(
                f"the {name} read model cannot catch up now ({state.error}); it retries by "
                "itself: retry shortly"
            )

    def status(self) -> list[ModelStatus]:
        head = self.events.head_position()
        positions = self.store.positions()
        counts = self.store.quarantine_counts()
        failing = self.runner.failing() if self.runner is not None else {}
        statuses = []
        for name in sorted(self.store.models):
            state = failing.get(name)
            statuses.append(
                ModelStatus(
                    name,
                    positions[name],
                    head,
                    self.events.events_between(positions[name], head),
                    counts.get(name, 0),
                    failing_since=state.failing_since if state else None,
                    error=state.error if state else "",
                    retry_in_seconds=state.retry_in() if state else 0.0,
                )
            )
        return statuses

    def recently_quarantined(self, limit: int = STATUS_QUARANTINED) -> list[Quarantined]:
        return sorted(self.store.quarantined(), key=lambda q: -q.recorded_us)[:limit]

    def start(self) -> None:
        if self.runner is not None:
            self.runner.start()

    def close(self, timeout: float = 1.0) -> None:
        """Stops the projection, waiting at most ``timeout`` for a batch in flight, and
        closes the database's connections. A batch the database still holds then
        keeps its connection, which disposing the engines would not close, only
        cut loose from them unsaid: they are left open for it instead, and the log
        says so. It ends once the database lets it go (a batch not committed is
        rolled back: nothing is lost); a later close, or the process's exit,
        closes the connections."""
        still = self.runner.stop(timeout) if self.runner is not None else []
        if still:
            log.warning(
                "read model database left open for the projection threads still "
                "running; its connections close with the process",
                threads=still,
            )
            return
        self.database.dispose()


def _quarantined(event: Quarantined) -> ReadModelQuarantined:
    error = ReadModelQuarantined(
        f"the {event.model} read model could not apply the event at position "
        f"{event.position} and went on without it, so this answer would miss it; an "
        "operator sees why with `sessionstore readmodels status` and applies it again "
        "after a fix with `sessionstore readmodels retry`"
    )
    error.metadata = {"model": event.model, "position": str(event.position)}
    return error


def _empty_recall_index(database: ReadModelDatabase) -> None:
    """With the index off, an index kept before is emptied (empty_recall_index)."""
    try:
        emptied = empty_recall_index(database)
    except SQLAlchemyError as error:
        # Not migrated yet (nothing to empty), or the database is down: this
        # server starts all the same, as it would without this step.
        log.warning("recall index not checked", error=describe_error(error))
        return
    if emptied:
        log.warning(
            "recall index emptied: SESSIONSTORE_RECALL_INDEX is off, and an index kept "
            "before would keep the text of what is erased while it is off; turned on "
            "again, it builds itself from the first event"
        )


def build_read_models(
    events: EventStore,
    database_url: str,
    *,
    run_projection: bool,
    migrate_first: bool,
    poll_seconds: float,
    recall_index: bool = False,
) -> ReadModels:
    """The read models on the database; ``migrate_first``: bring the tables to this
    release's latest migration (making again those dropped since, their models reset
    to rebuild from the first event), else refuse (StartRefused) tables not there."""
    database = open_database(database_url)
    try:
        if migrate_first:
            migrated = migrate(database)
            if migrated.recorded is not None:
                log.warning(
                    "read model migration version was lost: recorded again before migrating",
                    detail=migrated.recorded.describe(),
                    revision=migrated.recorded.revision,
                )
            remade = migrated.remade
            if remade is not None:
                log.warning(
                    "read model tables were missing: made again, to be rebuilt from the "
                    "first event by the projection",
                    missing=[o.name for o in remade.named()],
                    models=list(remade.models),
                )
        else:
            require_migrated(database)
    except BaseException:
        database.dispose()
        raise
    store = model_store(database, recall_index)
    if run_projection and not recall_index:
        _empty_recall_index(database)
    runner = ReadModelRunner(events, store, poll_seconds) if run_projection else None
    return ReadModels(events, database, store, ReadModelQueries(database), runner)
