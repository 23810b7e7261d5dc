# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The messages under the .proto's "erasure" heading, as dataclasses.

sessionstore_client.types has every message and enum of the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

__all__ = ["EraseEntriesRequest", "EraseResponse", "EraseSessionRequest", "Erasure"]


@dataclass(slots=True)
class Erasure:
    """An erasure: the content is gone from the store; the fact, who and when stay."""

    PROTO: ClassVar[str] = "sessionstore.v1.Erasure"
    #: The entries erased; empty when the whole session was.
    entry_ids: list[str] = field(default_factory=list)
    #: The compactions whose summaries were erased with them (tainted).
    tainted_compaction_versions: list[int] = field(default_factory=list)
    erased_by: str = ""
    reason: str = ""
    version: int = 0
    erased_at: datetime | None = None
    whole_session: bool = False
    #: Set when this session is a fork erased with the session it copied from (that
    #: session's id); empty when its own erasure was asked for.
    erased_with: str = ""


@dataclass(slots=True)
class EraseSessionRequest:
    """The EraseSessionRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.EraseSessionRequest"
    session_id: str = ""
    #: Why: kept in the event and the audit. Required: a blank reason is refused
    #: (INVALID_ARGUMENT).
    reason: str = ""
    #: Who asks (a person or an agent's name): kept in the event.
    erased_by: str = ""


@dataclass(slots=True)
class EraseEntriesRequest:
    """The EraseEntriesRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.EraseEntriesRequest"
    session_id: str = ""
    entry_ids: list[str] = field(default_factory=list)
    #: As in EraseSessionRequest: why, required.
    reason: str = ""
    erased_by: str = ""


@dataclass(slots=True)
class EraseResponse:
    """The EraseResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.EraseResponse"
    version: int = 0
    erasure: Erasure | None = None
    #: The write's position (see Session.position).
    position: int = 0
    #: The forks (transitively, of the same tenant) that copied the erased content and
    #: were erased with it, each recording its own erasure (erased_with: this session).
    forks_erased: list[str] = field(default_factory=list)
