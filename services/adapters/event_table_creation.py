"""What the event store adds to the library's tables, made by a process that migrates.

The library's recorders create their events and snapshots tables as the store
opens; on top of those the store keeps an index of the events by topic, the id
index, the idempotency keys and the data keys, created here right after, in the
same set-up (services.adapters.event_store). A process told not to migrate
creates none of them (services.adapters.event_tables says which a database lacks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg import sql

from services.adapters.id_index import IdRow, IndexingRecorder


def create_event_tables(
    recorder: IndexingRecorder, id_rows_of: Callable[[StoredEvent], list[IdRow]]
) -> int:
    """Creates those the recorder's database lacks; answers how many id rows were
    filled from the stored events (``id_rows_of`` says each event's), for an id
    index created on a database written before it existed."""
    _index_topics(recorder)
    backfilled_ids = recorder.create_id_index(id_rows_of)
    recorder.create_key_table()
    recorder.create_data_key_table()
    return backfilled_ids


def _index_topics(indexing: IndexingRecorder) -> None:
    """Lets sessions be listed by their Started events without scanning every event."""
    recorder: Any = indexing
    if not hasattr(recorder, "datastore"):
        return  # the in-memory recorder indexes nothing
    table = recorder.events_table_name
    if isinstance(recorder, PostgresApplicationRecorder):
        statement: Any = sql.SQL(
            "CREATE INDEX IF NOT EXISTS {index} ON {schema}.{table} (topic, notification_id)"
        ).format(
            index=sql.Identifier(f"{table}_topic_idx"),
            schema=sql.Identifier(recorder.datastore.schema),
            table=sql.Identifier(table),
        )
    else:
        statement = f"CREATE INDEX IF NOT EXISTS {table}_topic_idx ON {table} (topic)"
    with recorder.datastore.transaction(commit=True) as cursor:
        cursor.execute(statement)
