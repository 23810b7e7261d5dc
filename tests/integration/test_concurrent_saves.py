"""Saves on PostgreSQL run side by side, and only saves hold readers back.

No lock is taken by every save: a save goes through while another's
transaction is still open. A reader stops below a save still running, but a
long transaction that is not a save (a migration, a read model's batch) holds
nobody back. Positions are not consecutive, so lags are counted; and the
NOTIFY that wakes listeners still comes once a save has committed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from eventsourcing.persistence import StoredEvent
from psycopg import sql

from services.adapters.event_store import EventStore
from services.config import persistence_env
from tests.support.event_log import open_save, recorder_of, stored_event

TOPIC = "concurrent-saves-test-event"
BOUND_SECONDS = 10


@pytest.fixture
def store(postgres_schema_url: str) -> Iterator[EventStore]:
    store = EventStore(persistence_env(postgres_schema_url))
    yield store
    store.close()


def event(originator: str, version: int) -> StoredEvent:
    return stored_event(originator, version, TOPIC)


def test_a_save_does_not_wait_for_another_to_commit(
    store: EventStore, postgres_schema_url: str
) -> None:
    recorder = recorder_of(store)
    saved: list[int] = []
    with psycopg.connect(postgres_schema_url.split("?")[0]) as conn:
        with conn.transaction():
            open_id = open_save(recorder, conn, "open", TOPIC)
            writer = threading.Thread(
                target=lambda: saved.extend(recorder.insert_events([event("late", 1)]))
            )
            writer.start()
            writer.join(BOUND_SECONDS)
            # Saved and answered while the other save's transaction is still open.
            assert not writer.is_alive() and saved
            assert saved[0] > open_id
            # Readers stop below the open save; the answered one is the latest stored.
            assert (recorder.max_notification_id() or 0) < open_id
            assert store.latest_position() == saved[0]
        assert store.head_position() == saved[0]


def test_a_long_transaction_that_is_no_save_holds_no_reader_back(
    store: EventStore, postgres_schema_url: str
) -> None:
    recorder = recorder_of(store)
    with psycopg.connect(postgres_schema_url.split("?")[0]) as conn, conn.transaction():
        # A transaction with an id of its own, left open: a migration, say.
        conn.execute("CREATE TEMP TABLE busy (n int)")
        conn.execute("INSERT INTO busy VALUES (1)")
        (saved,) = recorder.insert_events([event("after", 1)])
        assert recorder.max_notification_id() == saved
        found = recorder.select_notifications(start=None, limit=10)
        assert [n.id for n in found] == [saved]


def test_lags_are_counted_in_events(store: EventStore) -> None:
    recorder = recorder_of(store)
    first = recorder.insert_events([event("a", 1), event("a", 2)])
    recorder.insert_events([event("b", 1)])
    recorder.insert_events([event("c", 1), event("c", 2), event("c", 3)])
    head = store.head_position()
    # Each save's ids are one block, apart from the next save's.
    assert head - first[0] > 6
    assert store.events_between(0, head) == 6
    assert store.events_between(first[-1], head) == 4
    assert store.events_between(head, head) == 0


def test_listeners_are_woken_once_a_save_commits(
    store: EventStore, postgres_schema_url: str
) -> None:
    recorder = recorder_of(store)
    with psycopg.connect(postgres_schema_url.split("?")[0], autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(recorder.channel_name)))
        (saved,) = recorder.insert_events([event("woken", 1)])
        began = time.monotonic()
        woken = next(listener.notifies(timeout=BOUND_SECONDS), None)
        assert woken is not None, f"no NOTIFY within {time.monotonic() - began:.1f} s"
        assert woken.channel == recorder.channel_name
        # The save it tells of is there to read.
        assert recorder.max_notification_id() == saved


def test_the_head_only_moves_on_while_saves_run(store: EventStore) -> None:
    """Saves drawing blocks while a reader looks (some after it read the last block
    drawn) never take the head back, nor away."""
    recorder = recorder_of(store)
    (first,) = recorder.insert_events([event("first", 1)])
    stop = threading.Event()

    def write(n: int) -> None:
        version = 0
        while not stop.is_set():
            version += 1
            recorder.insert_events([event(f"writer-{n}", version)])

    writers = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for writer in writers:
        writer.start()
    heads: list[int | None] = []
    try:
        end = time.monotonic() + 2
        while time.monotonic() < end:
            heads.append(recorder.max_notification_id())
    finally:
        stop.set()
        for writer in writers:
            writer.join()
    assert len(heads) > 100
    assert None not in heads and min(h for h in heads if h is not None) >= first
    assert heads == sorted(heads, key=lambda h: h or 0)
