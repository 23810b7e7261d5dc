"""The session catalog: one row per session, for listing and filtering.

Each event maps to one change of its session's row; events that change
nothing the catalog shows still move its version and updated time, so the
row says how far the session has come.
"""

from __future__ import annotations

from typing import Any

from domain.compaction_events import CompactionRecorded
from domain.session_events import (
    EntriesAppended,
    PruneRecorded,
    SessionErased,
    SettingsChanged,
    Started,
    ToolCallsAbandoned,
)
from projections.read_models.rows import CatalogChange


def catalog_changes(event: Any) -> list[CatalogChange]:
    """The catalog changes of one stored session event."""

    base = {
        "session_id": event.originator_id,
        "version": event.originator_version,
        "updated": event.timestamp,
    }
    if isinstance(event, Started):
        settings = event.settings
        return [
            CatalogChange(
                **base,
                insert=True,
                values={
                    "title": settings.title,
                    "model": settings.model,
                    "parent_session_id": event.parent_session_id,
                    "tenant": event.tenant,
                    "created": event.timestamp,
                },
                labels=dict(settings.labels),
            )
        ]
    if isinstance(event, SettingsChanged):
        settings = event.settings
        return [
            CatalogChange(
                **base,
                values={"title": settings.title, "model": settings.model},
                labels=dict(settings.labels),
            )
        ]
    if isinstance(event, EntriesAppended):
        tokens = sum(e.token_count for e in event.entries)
        return [CatalogChange(**base, increments={"entries": len(event.entries), "tokens": tokens})]
    if isinstance(event, ToolCallsAbandoned):
        return [CatalogChange(**base, increments={"entries": 1, "tokens": event.entry.token_count})]
    if isinstance(event, CompactionRecorded):
        return [CatalogChange(**base, increments={"compactions": 1})]
    if isinstance(event, PruneRecorded):
        return [CatalogChange(**base, increments={"prunes": 1})]
    if isinstance(event, SessionErased):
        # The title is the client's to erase too: the row keeps only the structure.
        return [CatalogChange(**base, values={"erased": 1, "title": ""})]
    return [CatalogChange(**base)]
