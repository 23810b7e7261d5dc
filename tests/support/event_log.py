"""The PostgreSQL event log as its ordering tests drive it: plain stored events, and
the save every writer makes, called by hand in a transaction left open."""

from __future__ import annotations

from typing import Any

import psycopg
from eventsourcing.persistence import StoredEvent
from psycopg import sql
from psycopg.rows import scalar_row

from services.adapters.event_store import EventStore
from services.adapters.postgres_recorder import PostgresEventRecorder


def recorder_of(store: EventStore) -> PostgresEventRecorder:
    recorder = store.recorder
    assert isinstance(recorder, PostgresEventRecorder)
    return recorder


def stored_event(originator: str, version: int, topic: str) -> StoredEvent:
    return StoredEvent(
        originator_id=originator, originator_version=version, topic=topic, state=b"{}"
    )


def open_save(
    recorder: PostgresEventRecorder, conn: psycopg.Connection[Any], originator: str, topic: str
) -> int:
    """Makes the save every writer makes, version 1 of ``originator``, on ``conn``
    (in a transaction the caller leaves open); answers its notification id."""
    call = sql.SQL(
        "SELECT notification_id FROM {schema}.{function}(%s::text[], %s::bigint[], %s::text[], "
        "%s::bytea[], NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
    ).format(
        schema=sql.Identifier(recorder.datastore.schema),
        function=sql.Identifier(recorder.insert_function_name),
    )
    with conn.cursor(row_factory=scalar_row) as cursor:
        cursor.execute(call, ([originator], [1], [topic], [b"{}"]))
        (notification_id,) = cursor.fetchall()
    return int(notification_id)
