"""A projection stopped while the database holds a batch in flight: the stop says which
threads still run, and a start (a worker that regained the lead) waits for them to end
rather than run a second set of threads beside them."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from sqlalchemy import Connection

from domain.session import Session
from domain.settings import SessionSettings
from services.adapters.event_store import EventStore
from services.adapters.read_model_db import migrate, open_database
from services.adapters.read_model_store import ReadModelStore
from services.adapters.read_model_writers import ReadModel
from services.config import persistence_env
from services.readmodels.runner import ReadModelRunner

WAITS_FOR_OLD_THREADS = "read model projection waits for its threads from before to end"


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
def events(tmp_path: Path) -> Iterator[EventStore]:
    store = EventStore(persistence_env(f"sqlite:///{tmp_path}/sessions.db"))
    yield store
    store.close()


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


def test_a_stop_leaving_a_batch_in_flight_says_so_and_a_start_waits_for_it(
    tmp_path: Path, events: EventStore
) -> None:
    database = open_database(f"sqlite:///{tmp_path}/sessions.db")
    migrate(database)
    held = HeldModel()
    runner = ReadModelRunner(events, ReadModelStore(database, [held]), poll_seconds=0.05)
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
        database.dispose()
