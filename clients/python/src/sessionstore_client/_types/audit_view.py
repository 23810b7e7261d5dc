# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The messages before the .proto's first heading, as dataclasses.

sessionstore_client.types has every message and enum of the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from sessionstore_client._types.enums import PromptFormat

__all__ = ["AuditViewRequest", "EntryStatus", "TurnVerification", "ViewAudit"]


@dataclass(slots=True)
class AuditViewRequest:
    """The AuditViewRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.AuditViewRequest"
    session_id: str = ""
    version: int | None = None
    time: datetime | None = None
    #: At most this many entries per page; 0 (the default) means as many as fit
    #: in one message. An audit too large for one message comes in pages
    #: whatever the page size: follow next_page_token.
    page_size: int = 0
    #: From the previous page's next_page_token. Later pages are of the version
    #: the first page was (as_of is then ignored), so a paged audit is consistent.
    page_token: str = ""


@dataclass(slots=True)
class EntryStatus:
    """The EntryStatus message."""

    PROTO: ClassVar[str] = "sessionstore.v1.EntryStatus"
    entry_id: str = ""
    #: user, assistant, tool, system or custom.
    role: str = ""
    #: The version whose event appended it.
    version: int = 0
    #: "shown", "summarised", "pinned", "pruned", "guarded", "retracted" or "cleared".
    status: str = ""
    #: Why: the compaction that summarised it, the prune or guard decision, the
    #: version that retracted or cleared it.
    detail: str = ""


@dataclass(slots=True)
class TurnVerification:
    """The TurnVerification message."""

    PROTO: ClassVar[str] = "sessionstore.v1.TurnVerification"
    #: The assistant entry that named the view it answered.
    entry_id: str = ""
    view_version: int = 0
    format: PromptFormat = PromptFormat.UNSPECIFIED
    claimed_hash: str = ""
    #: The hash of the view replayed at view_version ("" when that version does not exist).
    replayed_hash: str = ""
    verified: bool = False


@dataclass(slots=True)
class ViewAudit:
    """The ViewAudit message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ViewAudit"
    session_id: str = ""
    version: int = 0
    #: Every entry appended by the version, oldest first (this page's).
    entries: list[EntryStatus] = field(default_factory=list)
    #: The newest (up to 50) turns that carry a prompt_ref; on every page.
    turns: list[TurnVerification] = field(default_factory=list)
    #: On every page.
    erasures: list[Erasure] = field(default_factory=list)
    #: Set when more entries follow: pass it as page_token for the next page.
    next_page_token: str = ""


# Other sections' messages, named in the annotations above. Imported last,
# once this module's classes are defined, so that two sections naming each
# other's messages load whichever of them is imported first.
from sessionstore_client._types.erasure import Erasure
