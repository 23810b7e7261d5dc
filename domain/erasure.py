"""What an erased entry, summary or system prompt reads as, and who may erase.

Erasure is crypto-shredding in the store (services.adapters.sealing): the
content's keys are deleted, so the content itself is gone. What remains is the
structure, and the views show these placeholders in its place: a tool call
keeps its id and name (with empty arguments) and its result keeps the call's
id, so every view stays one a provider accepts.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Protocol

from domain.compaction_changes import RecordedCut
from domain.errors import EntryNotFound, PreconditionFailed, quoted

ERASED_TEXT = "[erased]"
ERASED_SUMMARY = (
    "[summary erased: it was built from erased content; compact again to regenerate it]"
)
ERASED_KEY = "erased"
# Metadata of an entry read back without its content.
ERASED_METADATA = MappingProxyType({ERASED_KEY: "true"})
MAX_ERASE_REASON_CHARS = 2_000
MAX_ERASER_CHARS = 256


class SessionWasErased(PreconditionFailed):
    """The session was erased whole: it takes no more writes."""

    reason = "session_erased"

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {quoted(session_id)} was erased; it takes no more writes "
            "(start a new session)"
        )
        self.stream = session_id


def is_erased(metadata: object) -> bool:
    return isinstance(metadata, MappingProxyType | dict) and metadata.get(ERASED_KEY) == "true"


class ErasedContent(Protocol):
    """What planning an erasure asks of the session's whole history."""

    def position_of(self, entry_id: str) -> int | None: ...

    def compactions(self) -> Sequence[RecordedCut]:
        """Every compaction recorded, undone or not, oldest first."""


def plan_erasure(history: ErasedContent, entry_ids: Sequence[str]) -> list[int]:
    """The compactions an erasure of these entries taints: every one whose cut lies
    past one of them (a later summary may be built on an earlier one). Raises
    EntryNotFound for an id not in the session."""
    positions = []
    for entry_id in entry_ids:
        position = history.position_of(entry_id)
        if position is None:
            raise EntryNotFound(f"entry {quoted(entry_id)} is not in this session")
        positions.append(position)
    first = min(positions)
    return [c.version for c in history.compactions() if c.first_kept_position > first]
