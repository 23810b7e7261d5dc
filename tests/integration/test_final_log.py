"""No reader of the notification log on PostgreSQL ever passes over an event that
commits later.

While a writer's transaction is open, no reader may see, beyond where it
stands, an event that another writer committed meanwhile with a later id than
the open transaction's (or else, with the open transaction's ids below it, a
reader tracking its position would move past them and never read them). Many
writers racing a following reader prove the same with real concurrency. These
hold for any way of ordering the log (today blocks of ids and a head that
readers stop at, services.adapters.postgres_ordering; before, a table lock
that made the second writer wait), and fail for a log whose ids are taken with
no lock and read as they commit.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from eventsourcing.persistence import Notification, StoredEvent
from psycopg import sql

from services.adapters.event_store import EventStore
from services.adapters.postgres_recorder import PostgresEventRecorder
from services.config import persistence_env
from tests.support.event_log import open_save, recorder_of, stored_event

TOPIC = "final-log-test-event"
# Long enough for any writer to end and any event to be read; only a test that
# fails waits this long.
NOT_BLOCKED_SECONDS = 60


@pytest.fixture
def store(postgres_schema_url: str) -> Iterator[EventStore]:
    store = EventStore(persistence_env(postgres_schema_url))
    yield store
    store.close()


def event(originator: str, version: int) -> StoredEvent:
    return stored_event(originator, version, TOPIC)


def read_after(recorder: PostgresEventRecorder, position: int) -> list[Notification]:
    """What a tracking reader reads: up to the head it was told, from its position."""
    head = recorder.max_notification_id() or 0
    if head <= position:
        return []
    return list(
        recorder.select_notifications(
            start=position, limit=10_000, stop=head, inclusive_of_start=False
        )
    )


def catch_up(recorder: PostgresEventRecorder, position: int, wanted: int) -> list[Notification]:
    """Reads on until ``wanted`` events are read, or gives up (events a reader passed
    over never come) and answers what it read."""
    found: list[Notification] = []
    give_up = time.monotonic() + NOT_BLOCKED_SECONDS
    while len(found) < wanted and time.monotonic() < give_up:
        page = read_after(recorder, position)
        if page:
            found += page
            position = page[-1].id
        else:
            time.sleep(0.01)
    return found


def saved_or_waiting(recorder: PostgresEventRecorder, writer: threading.Thread) -> None:
    """Returns once the writer has saved, or waits for a lock in the database."""
    waiting = sql.SQL(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND position({schema} IN query) > 0"
    ).format(schema=sql.Literal(recorder.datastore.schema))
    give_up = time.monotonic() + NOT_BLOCKED_SECONDS
    with recorder.datastore.get_connection() as conn:
        while writer.is_alive() and time.monotonic() < give_up:
            row = conn.execute(waiting).fetchone()
            if row is not None and row["n"] > 0:
                return
            time.sleep(0.01)
    assert not writer.is_alive() or time.monotonic() < give_up


def test_no_reader_passes_an_open_writer(store: EventStore) -> None:
    recorder = recorder_of(store)
    start = recorder.max_notification_id() or 0
    late: list[int] = []
    writer = threading.Thread(
        target=lambda: late.extend(recorder.insert_events([event("late", 1)]))
    )
    with recorder.datastore.get_connection() as open_writer, open_writer.transaction():
        # The save every writer makes, its transaction left open.
        early_id = open_save(recorder, open_writer, "early", TOPIC)
        # Another writer saves meanwhile (or waits for this one, with a lock).
        writer.start()
        saved_or_waiting(recorder, writer)
        while_open = read_after(recorder, start)
        assert [n.originator_id for n in while_open] == []
        assert (recorder.max_notification_id() or 0) < early_id
    writer.join(NOT_BLOCKED_SECONDS)
    assert not writer.is_alive()
    # Both committed: a reader from where it stood reads both, the open one's first.
    found = catch_up(recorder, start, 2)
    assert [(n.originator_id, n.id) for n in found] == [("early", early_id), ("late", *late)]


def test_concurrent_writers_never_pass_a_following_reader(store: EventStore) -> None:
    recorder = recorder_of(store)
    start = recorder.max_notification_id() or 0
    writers, saves = 8, 40
    written: list[tuple[str, int]] = []
    done = threading.Event()
    failures: list[BaseException] = []

    def write(n: int) -> None:
        originator, version = f"writer-{n}", 0
        rng = random.Random(n)
        try:
            for _ in range(saves):
                batch = [event(originator, version + i + 1) for i in range(rng.randint(1, 5))]
                recorder.insert_events(batch)
                version += len(batch)
                written.extend((e.originator_id, e.originator_version) for e in batch)
        except BaseException as error:
            failures.append(error)

    read: list[Notification] = []

    def follow() -> None:
        position = start
        while True:
            finished = done.is_set()  # read once more after the writers end
            page = read_after(recorder, position)
            read.extend(page)
            if page:
                position = page[-1].id
            elif finished:
                return
            else:
                done.wait(0.001)

    reader = threading.Thread(target=follow)
    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    reader.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    done.set()
    reader.join()
    # What the follower has not read yet, from where it stands.
    rest = catch_up(recorder, read[-1].id if read else start, len(written) - len(read))
    seen = read + rest
    assert len(seen) == len(written) == len(set(written))
    assert sorted((n.originator_id, n.originator_version) for n in seen) == sorted(written)
    ids = [n.id for n in seen]
    assert ids == sorted(set(ids))
    for n in range(writers):
        versions = [x.originator_version for x in seen if x.originator_id == f"writer-{n}"]
        assert versions == list(range(1, len(versions) + 1))


def test_a_database_written_with_the_table_lock_keeps_its_order(postgres_schema_url: str) -> None:
    """Events a database holds from before (ids one apart, taken under the table
    lock) keep their ids, and those saved once a server of this version has
    started come after them, read by the same readers."""
    earlier = EventStore(persistence_env(postgres_schema_url))
    recorder = recorder_of(earlier)
    table = sql.SQL("{}.{}").format(
        sql.Identifier(recorder.datastore.schema), sql.Identifier(recorder.events_table_name)
    )
    with psycopg.connect(postgres_schema_url.split("?")[0], autocommit=True) as conn:
        qualified = table.as_string(conn)
        row = conn.execute(
            "SELECT pg_get_serial_sequence(%s, 'notification_id')", (qualified,)
        ).fetchone()
        assert row is not None
        # As the table lock's versions left it: ids one apart.
        conn.execute(sql.SQL("ALTER SEQUENCE {} INCREMENT BY 1").format(sql.SQL(row[0])))
        for version in (1, 2):
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (originator_id, originator_version, topic, state) "
                    "VALUES ('old', %s, %s, '{{}}')"
                ).format(table),
                (version, TOPIC),
            )
    earlier.close()
    store = EventStore(persistence_env(postgres_schema_url))
    try:
        recorder = recorder_of(store)
        recorder.insert_events([event("old", 3), event("new", 1)])
        found = catch_up(recorder, 0, 4)
    finally:
        store.close()
    assert [(n.originator_id, n.originator_version) for n in found] == [
        ("old", 1),
        ("old", 2),
        ("old", 3),
        ("new", 1),
    ]
    ids = [n.id for n in found]
    assert ids[:2] == [1, 2]
    assert ids[2] > 2 and ids[3] == ids[2] + 1  # one save: one block
