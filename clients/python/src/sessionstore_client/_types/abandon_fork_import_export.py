# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The messages under the .proto's "abandon, fork, import, export" heading, as dataclasses.

sessionstore_client.types has every message and enum of the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

__all__ = [
    "AbandonToolCallsRequest",
    "AbandonToolCallsResponse",
    "ClearSessionRequest",
    "ClearSessionResponse",
    "ExportSessionChunk",
    "ExportSessionRequest",
    "ForkSessionRequest",
    "ImportHeader",
    "ImportSessionRequest",
    "ImportSessionResponse",
    "ImportedSession",
    "RetractEntryRequest",
    "RetractEntryResponse",
]


@dataclass(slots=True)
class AbandonToolCallsRequest:
    """The AbandonToolCallsRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.AbandonToolCallsRequest"
    session_id: str = ""
    #: Empty: every open call.
    tool_call_ids: list[str] = field(default_factory=list)
    #: Why: kept in the log and shown to the model in the synthetic results.
    reason: str = ""
    expected_version: int | None = None


@dataclass(slots=True)
class AbandonToolCallsResponse:
    """The AbandonToolCallsResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.AbandonToolCallsResponse"
    version: int = 0
    tool_call_ids: list[str] = field(default_factory=list)
    #: The tool entry holding the synthetic results.
    entry: Entry | None = None
    #: The write's position (see Session.position).
    position: int = 0


@dataclass(slots=True)
class RetractEntryRequest:
    """The RetractEntryRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.RetractEntryRequest"
    session_id: str = ""
    #: The entry expected to be the latest; empty: whichever is.
    entry_id: str = ""
    #: Why: kept in the event.
    reason: str = ""
    expected_version: int | None = None


@dataclass(slots=True)
class RetractEntryResponse:
    """The RetractEntryResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.RetractEntryResponse"
    version: int = 0
    #: The entry taken back, whole, as stored.
    entry: Entry | None = None
    #: The write's position (see Session.position).
    position: int = 0


@dataclass(slots=True)
class ClearSessionRequest:
    """The ClearSessionRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ClearSessionRequest"
    session_id: str = ""
    #: Why: kept in the event.
    reason: str = ""
    expected_version: int | None = None


@dataclass(slots=True)
class ClearSessionResponse:
    """The ClearSessionResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ClearSessionResponse"
    version: int = 0
    #: The entries the log showed, now out of the views.
    entries_cleared: int = 0
    #: The write's position (see Session.position).
    position: int = 0


@dataclass(slots=True)
class ForkSessionRequest:
    """The ForkSessionRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ForkSessionRequest"
    session_id: str = ""
    version: int | None = None
    #: At the version that appended this entry.
    entry_id: str | None = None
    #: Optional; generated when empty. A fork stays in its parent's tenant: an
    #: admin forking another tenant's session names the fork "tenant/id".
    new_session_id: str = ""
    #: Settings of the fork that differ from the parent's (recorded after the copy).
    settings: SessionSettings | None = None


@dataclass(slots=True)
class ImportHeader:
    """The ImportHeader message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ImportHeader"
    #: "auto" (or empty), "pi", "openclaw", "claude-code" or "openai".
    format: str = ""
    #: The session's id; from the file (pi) or generated when empty.
    session_id: str = ""
    #: Settings over those read from the file (model, title, ...).
    settings: SessionSettings | None = None
    #: The file's name, for format detection and messages only.
    file_name: str = ""


@dataclass(slots=True)
class ImportSessionRequest:
    """The ImportSessionRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ImportSessionRequest"
    header: ImportHeader | None = None
    chunk: bytes | None = None


@dataclass(slots=True)
class ImportedSession:
    """The ImportedSession message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ImportedSession"
    session: Session | None = None
    #: Entries, compactions and abandonments (each call closed) it holds.
    entries: int = 0
    compactions: int = 0
    abandoned_tool_calls: int = 0
    #: Lines of the file it was read from; lines skipped as not part of the session.
    lines: int = 0
    #: For a fork of another branch: the entry the branch leaves the main one at.
    branch_point_entry_id: str = ""


@dataclass(slots=True)
class ImportSessionResponse:
    """The ImportSessionResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ImportSessionResponse"
    #: The main session first, then its forks.
    sessions: list[ImportedSession] = field(default_factory=list)
    format: str = ""
    bytes: int = 0
    #: The write's position (see Session.position), the import's last event:
    #: every session it created is in the read models once they reach it.
    position: int = 0


@dataclass(slots=True)
class ExportSessionRequest:
    """The ExportSessionRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ExportSessionRequest"
    session_id: str = ""
    #: The session as of this version; 0 or unset: now.
    version: int = 0


@dataclass(slots=True)
class ExportSessionChunk:
    """The ExportSessionChunk message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ExportSessionChunk"
    data: bytes = b""


# Other sections' messages, named in the annotations above. Imported last,
# once this module's classes are defined, so that two sections naming each
# other's messages load whichever of them is imported first.
from sessionstore_client._types.entries import Entry
from sessionstore_client._types.sessions import Session, SessionSettings
