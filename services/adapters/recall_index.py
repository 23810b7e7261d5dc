"""The recall index's writer: every entry's chunks in, erased ones out.

A read model like the others (tracked, rebuilt from zero by `sessionstore
rebuild recall`, its poison events quarantined), with one
difference: it reads the entries' content, so its batches are decoded with
content (ReadModel.entry_content), apart from the models that need none.

No embedding is computed here. The projection's transaction holds the
model's tracking row (and on SQLite the database's write lock) while it
writes: a call to an embedding provider inside it would hold up every other
read model and writer for as long as the provider takes. Embeddings are made
when a semantic search first needs them, outside any transaction, and cached
(services.adapters.recall_queries).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from eventsourcing.domain import get_topic
from sqlalchemy import Connection, delete, insert, select, update

from domain.session_events import EntriesAppended, EntriesErased, SessionErased, ToolCallsAbandoned
from projections.read_models.recall import (
    RecallChunk,
    RecallErasure,
    appended_entries,
    entry_chunks,
    erasure,
)
from services.adapters import read_model_tables as t
from services.adapters.read_model_db import ReadModelDatabase
from services.adapters.read_model_writers import ReadModel, micros, storable
from services.adapters.tokenizers import tokenizer_for

RECALL_TOPICS = [
    get_topic(EntriesAppended),
    get_topic(ToolCallsAbandoned),
    get_topic(EntriesErased),
    get_topic(SessionErased),
]
# Chunks are cut by this model's tokenizer (o200k_base): what embedding models
# and today's chat models count, near enough, whatever the session's model.
CHUNKING_MODEL = "gpt-4o"


@cache
def _codec() -> tuple[Any, Any]:
    encoding = tokenizer_for(CHUNKING_MODEL).encoding
    assert encoding is not None

    def encode(text: str) -> list[int]:
        return encoding.encode_ordinary(text)

    return encode, encoding.decode


class RecallIndex(ReadModel):
    name = "recall"
    topics = RECALL_TOPICS
    tables = t.MODEL_TABLES[name]
    entry_content = True

    def __init__(self, postgres: bool) -> None:
        self.postgres = postgres

    def write(self, connection: Connection, position: int, event: Any) -> None:
        self.write_batch(connection, [(position, event)])

    def write_batch(self, connection: Connection, batch: Sequence[tuple[int, Any]]) -> None:
        encode, decode = _codec()
        counts: dict[str, int] = {}
        pending: list[dict[str, Any]] = []
        for position, event in batch:
            erased = erasure(event)
            if erased is not None:
                _insert(connection, pending)
                pending = []
                self._erase(connection, erased)
                continue
            entries = appended_entries(event)
            if not entries:
                continue
            session_id = str(event.originator_id)
            first = counts.get(session_id)
            if first is None:
                first = _entries_so_far(connection, session_id)
            counts[session_id] = first + len(entries)
            chunks = entry_chunks(
                session_id,
                entries,
                first,
                event.originator_version,
                event.timestamp,
                encode,
                decode,
            )
            pending += [_row(chunk, position) for chunk in chunks]
        _insert(connection, pending)
        for session_id, count in counts.items():
            _set_entries(connection, session_id, count)

    def forget(self, connection: Connection, session_id: str) -> None:
        connection.execute(
            delete(t.recall_chunks).where(t.recall_chunks.c.session_id == session_id)
        )
        connection.execute(
            delete(t.recall_sessions).where(t.recall_sessions.c.session_id == session_id)
        )

    def _erase(self, connection: Connection, erased: RecallErasure) -> None:
        """Drops the chunks of what was erased, and the cached embeddings of their
        text: an erased entry is never found again, by words or by meaning. (Another
        session holding the same text embeds it again when next searched.)"""
        c = t.recall_chunks.c
        rows = c.session_id == erased.session_id
        if erased.entry_ids is not None:
            rows = rows & c.entry_id.in_(list(erased.entry_ids))
        hashes = {r.content_hash for r in connection.execute(select(c.content_hash).where(rows))}
        if not hashes:
            return
        connection.execute(delete(t.recall_chunks).where(rows))
        e = t.recall_embeddings.c
        connection.execute(delete(t.recall_embeddings).where(e.content_hash.in_(sorted(hashes))))
        if not self.postgres:
            # FTS5 marks deleted rows and drops their terms only when it merges its
            # segments: merging now leaves no erased word in the index.
            connection.exec_driver_sql("INSERT INTO recall_fts(recall_fts) VALUES ('optimize')")


def empty_recall_index(database: ReadModelDatabase) -> bool:
    """Empties an index kept before and turned off since, and sets its position back
    to 0; answers whether there was one. Off, the index follows no erasure: its text
    would outlive every erasure made meanwhile. Turned on again, it builds itself
    from the log's first event, as an index never kept does."""
    tracking = t.tracking.c
    with database.writer.begin() as connection:
        position = connection.execute(
            select(tracking.position).where(tracking.name == RecallIndex.name)
        ).scalar()
        held = connection.execute(select(t.recall_chunks.c.id).limit(1)).first()
        if not position and held is None:
            return False
        for table in (t.recall_chunks, t.recall_sessions, t.recall_embeddings):
            connection.execute(delete(table))
        connection.execute(delete(t.quarantine).where(t.quarantine.c.model == RecallIndex.name))
        connection.execute(
            update(t.tracking).where(tracking.name == RecallIndex.name).values(position=0)
        )
        if not database.postgres:
            connection.exec_driver_sql("INSERT INTO recall_fts(recall_fts) VALUES ('optimize')")
    if not database.postgres:
        # The deleted rows' bytes leave the file too (secure_delete overwrote them
        # in the write-ahead log, which this empties into the file).
        with database.writer.connect() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    return True


def _row(chunk: RecallChunk, position: int) -> dict[str, Any]:
    return storable(
        {
            "session_id": chunk.session_id,
            "entry_id": chunk.entry_id,
            "chunk": chunk.chunk,
            "entry_position": chunk.entry_position,
            "version": chunk.version,
            "position": position,
            "recorded_us": micros(chunk.recorded_at),
            "role": chunk.role,
            "text": chunk.text,
            "content_hash": chunk.content_hash,
        }
    )


def _insert(connection: Connection, rows: list[dict[str, Any]]) -> None:
    if rows:
        connection.execute(insert(t.recall_chunks), rows)


def _entries_so_far(connection: Connection, session_id: str) -> int:
    s = t.recall_sessions.c
    found = connection.execute(select(s.entries).where(s.session_id == session_id)).scalar()
    return int(found or 0)


def _set_entries(connection: Connection, session_id: str, entries: int) -> None:
    s = t.recall_sessions.c
    changed = connection.execute(
        update(t.recall_sessions).where(s.session_id == session_id).values(entries=entries)
    )
    if not changed.rowcount:
        connection.execute(insert(t.recall_sessions).values(session_id=session_id, entries=entries))
