"""Group commit on a real SQLite event store: batches form, and a conflict stays with its writer."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from eventsourcing.persistence import IntegrityError

from domain.content import Entry, Role, TextBlock
from domain.ids import HistoryIds
from domain.session import Session
from domain.settings import SessionSettings
from projections.session_history import SessionHistory
from services.adapters.event_store import EventStore
from services.adapters.group_commit import GroupCommit
from services.config import persistence_env


def new_session(session_id: str) -> Session:
    return Session.start(session_id, SessionSettings(model="gpt-4o"), (128_000, "session"))


def add_turn(session: Session, text: str) -> None:
    session.append(
        [Entry("", None, None, Role.USER, (TextBlock(text),))],
        HistoryIds(SessionHistory(session.id)),
    )


@pytest.fixture
def store(tmp_path: Path) -> EventStore:
    return EventStore(persistence_env(f"sqlite:///{tmp_path}/events.db"))


def test_concurrent_writers_share_inserts_and_all_land(store: EventStore) -> None:
    batches: list[int] = []

    def save_together(sessions: Sequence[Session]) -> None:
        batches.append(len(sessions))
        if len(batches) == 1:
            time.sleep(0.2)  # a slow first insert, so the other writers queue behind it
        store.save_sessions(sessions)

    group = GroupCommit(save_together)
    sessions = [new_session(f"s{i}") for i in range(8)]
    writers = [threading.Thread(target=group.save, args=(s,)) for s in sessions]
    for writer in writers:
        writer.start()
        time.sleep(0.01)
    for writer in writers:
        writer.join()
    assert sum(batches) == 8
    assert max(batches) > 1
    for session in sessions:
        assert store.repository.get(session.id).version == 1
        assert not session.pending_events


def test_a_conflict_in_a_shared_insert_fails_only_its_writer(store: EventStore) -> None:
    contested = new_session("contested")
    store.save_sessions([contested])
    stale = copy.deepcopy(contested)
    add_turn(contested, "first")
    store.save_sessions([contested])  # another writer took version 2
    add_turn(stale, "second")  # this copy wants version 2 too
    bystander = new_session("bystander")

    gate = threading.Event()
    errors: dict[str, BaseException] = {}
    batches: list[list[str]] = []

    def save_together(sessions: Sequence[Session]) -> None:
        gate.wait(5)  # hold the first insert until both writers have queued
        batches.append([s.id for s in sessions])
        store.save_sessions(sessions)

    group = GroupCommit(save_together)

    def write(session: Session) -> None:
        try:
            group.save(session)
        except IntegrityError as error:
            errors[session.id] = error

    first = threading.Thread(target=write, args=(new_session("opener"),))
    first.start()
    time.sleep(0.05)
    others = [threading.Thread(target=write, args=(s,)) for s in (stale, bystander)]
    for writer in others:
        writer.start()
    time.sleep(0.05)
    gate.set()
    for writer in [first, *others]:
        writer.join()

    # The two queued writers shared an insert, which failed; then each went alone.
    assert batches[0] == ["opener"]
    assert sorted(batches[1]) == ["bystander", "contested"]
    assert sorted(map(tuple, batches[2:])) == [("bystander",), ("contested",)]
    assert set(errors) == {"contested"}
    assert store.repository.get("bystander").version == 1
    stored = store.session_events("contested")
    assert [e.originator_version for e in stored] == [1, 2]
    assert stored[1].entries[0].content == (TextBlock("first"),)  # type: ignore[attr-defined]
