"""A projection stopped while the database holds a batch in flight: the stop says which
threads still run, and a start (a worker that regained the lead) waits for them to end
rather than run a second set of threads beside them; as long as a stop waits, no
longer: held beyond that, they are left to end first, and the projection starts then
(unless a stop calls it off), with the start long returned."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from sqlalchemy import Connection

from domain.session import Session
from domain.settings import SessionSettings
from services.adapters.event_store import EventStore
from services.adapters.read_model_db import ReadModelDatabase, migrate, open_database
from services.adapters.read_model_queries import ReadModelQueries
from services.adapters.read_model_store import ReadModelStore
from services.adapters.read_model_writers import ReadModel
from services.config import persistence_env
from services.readmodels.runner import ReadModelRunner
from services.readmodels.service import ReadModels
from tests.support.waiting import eventually

WAITS_FOR_OLD_THREADS = "read model projection waits for its threads from before to end"
STARTS_ONCE_THEY_END = (
    "read model threads from before still running, held by the database; "
    "projection starts once they end, not beside them"
)
LEFT_OPEN = (
    "read model database left open for the projection threads still running; "
    "its connections close with the process"
)
# How long the start in these tests waits for the threads held: well short of the
# default, so that the wait runs out.
START_WAIT_SECONDS = 0.3
POLL_SECONDS = 0.05


class HeldModel(ReadModel):
    """A read model of every event whose first write is held until the test lets it go
    on: to the runner, a database that stopped answering mid-batch."""

    name = "held"

    def __init__(self) -> None:
        self.begun = threading.Event()
        self.go_on = threading.Event()
        self.written: list[int] = []

    def write(self, connection: Connection, position: int, event: Any) -> None:
        if not self.begun.is_set():
            self.begun.set()
            self.go_on.wait(10)  # a bound only so that a failed test ends
        self.written.append(position)


def new_session(session_id: str) -> Session:
    return Session.start(session_id, SessionSettings(model="gpt-4o"), (128_000, "session"))


@pytest.fixture
def events(database_url: str) -> Iterator[EventStore]:
    store = EventStore(persistence_env(database_url))
    yield store
    store.close()


@pytest.fixture
def database(database_url: str, events: EventStore) -> Iterator[ReadModelDatabase]:
    opened = open_database(database_url)
    migrate(opened)
    yield opened
    opened.dispose()


@pytest.fixture
def held() -> Iterator[HeldModel]:
    model = HeldModel()
    yield model
    model.go_on.set()  # a failed test leaves no thread held


def _projection_threads(excluding: set[threading.Thread]) -> list[threading.Thread]:
    return [
        thread
        for thread in threading.enumerate()
        if thread.name.startswith("read-models") and thread not in excluding
    ]


def _reaches(runner: ReadModelRunner, name: str, position: int) -> None:
    give_up_at = time.monotonic() + 10  # a bound only so that a failed test ends
    while runner.models.position(name) < position:
        assert time.monotonic() < give_up_at, f"{name} never reached {position}"
        with runner.progress:
            runner.progress.wait(0.1)


@pytest.fixture
def runner(
    events: EventStore, database: ReadModelDatabase, held: HeldModel
) -> Iterator[ReadModelRunner]:
    projection = ReadModelRunner(events, ReadModelStore(database, [held]), POLL_SECONDS)
    yield projection
    held.go_on.set()
    projection.stop()


def _stopped_with_a_batch_held(
    runner: ReadModelRunner, events: EventStore, held: HeldModel
) -> tuple[int, list[threading.Thread], set[threading.Thread]]:
    """The runner started, its first batch held, and stopped: answers the position of
    that batch's event, the threads still running (the held one) and those that ran
    before the runner started."""
    events.save_sessions([new_session("s-1")])
    before = set(threading.enumerate())
    runner.start()
    assert held.begun.wait(5)
    assert runner.stop(timeout=0.5) == ["read-models"]
    return events.head_position(), _projection_threads(before), before


def test_a_stop_leaving_a_batch_in_flight_says_so_and_a_start_waits_for_it(
    events: EventStore, database: ReadModelDatabase, held: HeldModel
) -> None:
    runner = ReadModelRunner(events, ReadModelStore(database, [held]), POLL_SECONDS)
    starter: threading.Thread | None = None
    try:
        events.save_sessions([new_session("s-1")])
        first = events.head_position()
        before = set(threading.enumerate())
        runner.start()
        assert held.begun.wait(5)
        old = _projection_threads(before)

        still = runner.stop(timeout=0.5)
        assert "read-models" in still  # its batch is held: it cannot have ended
        assert not runner.running

        with structlog.testing.capture_logs() as logged:
            starter = threading.Thread(target=runner.start, name="starter")
            starter.start()
            give_up_at = time.monotonic() + 5
            while not any(e["event"] == WAITS_FOR_OLD_THREADS for e in logged):
                assert time.monotonic() < give_up_at, "the start did not wait"
                time.sleep(0.01)
            # Waiting: no second set of threads beside the one still held.
            assert set(_projection_threads(before)) <= set(old)
            held.go_on.set()
            starter.join(5)
            assert not starter.is_alive(), "the start waited on after the old threads ended"
        assert not any(thread.is_alive() for thread in old)
        assert runner.running
        # The batch held was applied once, by the thread that held it.
        assert held.written == [first]
        assert runner.models.position("held") == first

        # The new threads project, and a start while they do starts no more.
        running = _projection_threads(before)
        runner.start()
        assert _projection_threads(before) == running
        events.save_sessions([new_session("s-2")])
        runner.wake()
        _reaches(runner, "held", events.head_position())
        assert held.written == [first, events.head_position()]
        assert runner.stop() == []
    finally:
        held.go_on.set()
        if starter is not None:
            starter.join(5)
        runner.stop()


def test_a_start_whose_wait_runs_out_returns_and_projects_once_the_held_threads_end(
    runner: ReadModelRunner, events: EventStore, held: HeldModel
) -> None:
    """The database holds the batch longer than a start waits (a PostgreSQL frozen
    for good would hold it for ever): the start returns, saying so, with no second
    set of threads beside the held one; once the database lets it go, it commits its
    batch and the new set projects what comes next, each event once."""
    first, old, before = _stopped_with_a_batch_held(runner, events, held)
    with structlog.testing.capture_logs() as logged:
        started = time.monotonic()
        runner.start(timeout=START_WAIT_SECONDS)
        waited = time.monotonic() - started
    assert START_WAIT_SECONDS <= waited < START_WAIT_SECONDS + 2, waited
    said = [e for e in logged if e["event"] == STARTS_ONCE_THEY_END]
    assert [e["threads"] for e in said] == [["read-models"]]
    assert said[0]["log_level"] == "warning"
    assert not runner.running
    runner.start(timeout=START_WAIT_SECONDS)  # a start already waiting: nothing more
    time.sleep(5 * POLL_SECONDS)
    assert _projection_threads(before) == old
    assert not runner.running

    held.go_on.set()
    # Written once the batch is let go: on SQLite it holds the file's write lock.
    events.save_sessions([new_session("s-2")])
    assert eventually(lambda: runner.running, 10), "the projection never started"
    assert not any(thread.is_alive() for thread in old)
    _reaches(runner, "held", events.head_position())
    assert held.written == [first, events.head_position()]
    assert runner.stop() == []


def test_a_stop_calls_off_a_start_still_waiting_for_held_threads(
    runner: ReadModelRunner, events: EventStore, held: HeldModel
) -> None:
    """A worker that took the lead back and lost it again before the held threads
    ended: the stop calls off the start that waited for them, and says the held
    thread still runs; once it ends, nothing starts. A start then projects."""
    first, old, before = _stopped_with_a_batch_held(runner, events, held)
    runner.start(timeout=START_WAIT_SECONDS)
    assert runner.stop(timeout=START_WAIT_SECONDS) == ["read-models"]
    assert not any(t.name == "starting-read-models" for t in threading.enumerate())

    held.go_on.set()
    for thread in old:
        thread.join(5)
        assert not thread.is_alive()
    time.sleep(5 * POLL_SECONDS)  # what a start put off would have taken to start
    assert not runner.running
    assert _projection_threads(before) == []
    assert held.written == [first]

    events.save_sessions([new_session("s-2")])
    runner.start(timeout=START_WAIT_SECONDS)
    assert runner.running
    _reaches(runner, "held", events.head_position())
    assert held.written == [first, events.head_position()]


def test_a_close_leaves_the_database_open_to_a_batch_still_held(
    runner: ReadModelRunner, events: EventStore, database: ReadModelDatabase, held: HeldModel
) -> None:
    """A server or worker closing while the database holds a batch: the close leaves
    the engines to it (disposed, they would look closed while its connection stays
    open), and says so; the batch commits once let go, and a close with nothing left
    running disposes them."""
    models = ReadModels(events, database, runner.models, ReadModelQueries(database), runner)
    events.save_sessions([new_session("s-1")])
    first = events.head_position()
    before = set(threading.enumerate())
    models.start()
    assert held.begun.wait(5)
    pools = (database.writer.pool, database.reader.pool)
    with structlog.testing.capture_logs() as logged:
        models.close(timeout=START_WAIT_SECONDS)
    (left,) = [e for e in logged if e["event"] == LEFT_OPEN]
    assert left["threads"] == ["read-models"] and left["log_level"] == "warning"
    assert (database.writer.pool, database.reader.pool) == pools  # not disposed

    with structlog.testing.capture_logs() as logged:
        held.go_on.set()
        for thread in _projection_threads(before):
            thread.join(5)
            assert not thread.is_alive()
    assert not [e for e in logged if e["log_level"] in ("error", "warning")]
    assert held.written == [first]
    assert runner.models.position("held") == first

    models.close()
    assert database.writer.pool is not pools[0] and database.reader.pool is not pools[1]
