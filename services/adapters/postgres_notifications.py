"""The notification log as the PostgreSQL recorder's readers see it.

Readers read no further than the head the database says is safe
(services.adapters.postgres_ordering): past it a save still running may commit
an id lower than one read. The library reads notifications as text, in which
every byte of an event's state travels hex-escaped: a projection that follows
a 15 MiB append then moves and decodes some 40 MB, beside the writes it runs
with. This is the library's query (same filters, same order), read in binary.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

from eventsourcing.persistence import InterfaceError, Notification, OperationalError
from eventsourcing.utils import retry
from psycopg import sql
from psycopg.rows import scalar_row

# A lag is counted this far at most: a model rebuilt from the start would
# otherwise count the whole log on every look at its status.
COUNTED_AT_MOST = 1_000_000


class NotificationLog:
    """Mixed into a PostgresApplicationRecorder: the head, and the log read up to it
    in binary."""

    datastore: Any
    events_table_name: str
    head_function_name: str

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)  # as the library's
    def max_notification_id(self) -> int | None:
        """The highest notification id a reader may read up to: every id below it is
        committed or never will be."""
        head: int | None = self._scalar(self._head_statement)
        return head

    def latest_notification_id(self) -> int | None:
        """The highest id committed (the library's head), which a reader may have to
        stop below while a save with a lower block runs."""
        latest: int | None = self._scalar(self._latest_statement)
        return latest

    def notifications_between(self, after: int, upto: int) -> int:
        """How many events are stored after position ``after`` up to ``upto``, counted
        up to COUNTED_AT_MOST (ids are sparse)."""
        if upto <= after:
            return 0
        counted = self._scalar(self._count_statement, (after, upto, COUNTED_AT_MOST))
        return int(counted or 0)

    # Composed once each: the head is read on every projection round.
    @cached_property
    def _head_statement(self) -> sql.Composed:
        return sql.SQL("SELECT {}.{}()").format(
            sql.Identifier(self.datastore.schema), sql.Identifier(self.head_function_name)
        )

    @cached_property
    def _latest_statement(self) -> sql.Composed:
        return sql.SQL("SELECT max(notification_id) FROM {}").format(self._table)

    @cached_property
    def _count_statement(self) -> sql.Composed:
        return sql.SQL(
            "SELECT count(*) FROM (SELECT FROM {} "
            "WHERE notification_id > %s AND notification_id <= %s LIMIT %s) AS lagging"
        ).format(self._table)

    @property
    def _table(self) -> sql.Identifier:
        return sql.Identifier(self.datastore.schema, self.events_table_name)

    def _scalar(self, statement: sql.Composed, params: Sequence[Any] = ()) -> Any:
        with self.datastore.get_connection() as conn, conn.cursor(row_factory=scalar_row) as cursor:
            cursor.execute(statement, params, prepare=True)
            return cursor.fetchone()

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
        """The library's, read no further than the head when not told where to stop."""
        if stop is None:
            stop = self.max_notification_id() or 0
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
