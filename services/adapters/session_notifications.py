"""One session's events with their notification ids, for projecting that session again.

The library reads a session's events without their notification ids, and the
notification log without a filter by session; the read models need both (a
row's position is its event's notification id), so this asks the events
table directly, by its (originator, version) index.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import Notification
from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg import sql


def session_notifications(recorder: Any, session_id: str) -> list[Notification]:
    """The session's stored events in order, each with its notification id."""
    if isinstance(recorder, PostgresApplicationRecorder):
        datastore = recorder.datastore
        query: Any = sql.SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state "
            "FROM {schema}.{table} WHERE originator_id = %s ORDER BY originator_version"
        ).format(
            schema=sql.Identifier(datastore.schema),
            table=sql.Identifier(recorder.events_table_name),
        )
        with datastore.transaction(commit=False) as cursor:
            cursor.execute(query, (session_id,))
            rows = [
                (
                    r["notification_id"],
                    r["originator_id"],
                    r["originator_version"],
                    r["topic"],
                    bytes(r["state"]),
                )
                for r in cursor.fetchall()
            ]
    else:
        query = (
            "SELECT rowid, originator_id, originator_version, topic, state FROM "
            f"{recorder.events_table_name} WHERE originator_id = ? ORDER BY originator_version"
        )
        with recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute(query, (session_id,))
            rows = [tuple(r) for r in cursor.fetchall()]
    return [
        Notification(
            id=row[0],
            originator_id=row[1],
            originator_version=row[2],
            topic=row[3],
            state=row[4],
        )
        for row in rows
    ]
