"""What an erased entry, summary or system prompt reads as, and who may erase.

Erasure is crypto-shredding in the store (services.adapters.sealing): the
content's keys are deleted, so the content itself is gone. What remains is the
structure, and the views show these placeholders in its place: a tool call
keeps its id and name (with empty arguments) and its result keeps the call's
id, so every view stays one a provider accepts.
"""

from __future__ import annotations

from types import MappingProxyType

from domain.errors import PreconditionFailed, quoted

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

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session {quoted(session_id)} was erased; it takes no more writes "
            "(start a new session)"
        )


def is_erased(metadata: object) -> bool:
    return isinstance(metadata, MappingProxyType | dict) and metadata.get(ERASED_KEY) == "true"
