"""The notification log read in binary, for the PostgreSQL recorder.

The library reads notifications as text, in which every byte of an event's
state travels hex-escaped: a projection that follows a 15 MiB append then
moves and decodes some 40 MB, beside the writes it runs with. This is the
library's query (same filters, same order), read in binary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import InterfaceError, Notification, OperationalError
from eventsourcing.utils import retry
from psycopg import sql


class BinaryNotifications:
    """Mixed into a PostgresApplicationRecorder: ``select_notifications`` in binary."""

    datastore: Any
    events_table_name: str

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)  # as the library's
    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        conditions: list[sql.Composable] = []
        params: list[Any] = []
        if start is not None:
            conditions.append(
                sql.SQL("notification_id >= %s" if inclusive_of_start else "notification_id > %s")
            )
            params.append(start)
        if stop is not None:
            conditions.append(sql.SQL("notification_id <= %s"))
            params.append(stop)
        if topics:
            conditions.append(sql.SQL("topic = ANY(%s)"))
            params.append(list(topics))
        statement = sql.SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state "
            "FROM {schema}.{table}{where} ORDER BY notification_id LIMIT %s"
        ).format(
            schema=sql.Identifier(self.datastore.schema),
            table=sql.Identifier(self.events_table_name),
            where=sql.SQL(" WHERE ") + sql.SQL(" AND ").join(conditions)
            if conditions
            else sql.SQL(""),
        )
        params.append(limit)
        with self.datastore.get_connection() as conn, conn.cursor(binary=True) as cursor:
            cursor.execute(statement, params, prepare=True)
            return [
                Notification(
                    id=row["notification_id"],
                    originator_id=row["originator_id"],
                    originator_version=row["originator_version"],
                    topic=row["topic"],
                    state=bytes(row["state"]),
                )
                for row in cursor.fetchall()
            ]
