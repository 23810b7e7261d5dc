"""Which data keys a save makes, and which an erasure deletes (services.adapters.sealing)."""

from __future__ import annotations

from collections.abc import Iterable

from domain.compaction_events import CompactionRecorded
from domain.session import Session
from domain.session_events import (
    EntriesAppended,
    EntriesErased,
    Event,
    SessionErased,
    SettingsChanged,
    Started,
    SystemPromptSet,
    ToolCallsAbandoned,
)
from services.adapters.sealing import ENTRY, EVENT, SNAPSHOT, DataKeyRow, ShredRow, new_key

ANY_VERSION = -1


def data_key_rows(events: Iterable[object]) -> list[DataKeyRow]:
    """A new key for each entry and each content-bearing event about to be stored."""
    rows: list[DataKeyRow] = []
    for event in events:
        if not isinstance(event, Event):
            continue
        session_id, version = event.originator_id, event.originator_version
        if isinstance(event, EntriesAppended):
            rows.extend((session_id, version, ENTRY, e.id, new_key()) for e in event.entries)
        elif isinstance(event, ToolCallsAbandoned):
            rows.append((session_id, version, ENTRY, event.entry.id, new_key()))
        elif isinstance(event, CompactionRecorded | SystemPromptSet):
            rows.append((session_id, version, EVENT, "", new_key()))
        elif isinstance(event, Started | SettingsChanged) and event.settings.title:
            rows.append((session_id, version, EVENT, "", new_key()))  # the title is content
    return rows


def snapshot_key_row(session: Session) -> DataKeyRow | None:
    """A key for the snapshot about to be taken of the session, if it holds a title."""
    if not session.settings.title:
        return None
    return (session.id, session.version, SNAPSHOT, "", new_key())


def shred_rows(events: Iterable[object]) -> list[ShredRow]:
    """The keys the erasures among these events delete, in the same transaction."""
    rows: list[ShredRow] = []
    for event in events:
        if isinstance(event, EntriesErased):
            session_id = event.originator_id
            rows.extend((session_id, ANY_VERSION, ENTRY, i) for i in event.entry_ids)
            rows.extend((session_id, v, EVENT, "") for v in event.tainted_compactions)
        elif isinstance(event, SessionErased):
            rows.append((event.originator_id, ANY_VERSION, "", ""))
    return rows
