# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The messages under the .proto's "audit" heading, as dataclasses.

sessionstore_client.types has every message and enum of the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from sessionstore_client._types.enums import PruneAction

__all__ = [
    "CompactionRecord",
    "GetCompactionRequest",
    "GetCompactionResponse",
    "GetReadModelStatusRequest",
    "ListCompactionsRequest",
    "ListCompactionsResponse",
    "ListPrunesRequest",
    "ListPrunesResponse",
    "PruneRecord",
    "QuarantinedEvent",
    "ReadModelState",
    "ReadModelStatus",
    "RecallHit",
    "RecallRequest",
    "RecallResponse",
]


@dataclass(slots=True)
class CompactionRecord:
    """A compaction as the audit records it: one row per compaction and per
    failed compaction, with everything the receipt (or failure) says, and one
    per undo (outcome "undone", trigger "undo") and per undo taken back
    (outcome "redone", trigger "redo"), with the cut and prompt tokens after
    it in first_kept_position and tokens_after.
    """

    PROTO: ClassVar[str] = "sessionstore.v1.CompactionRecord"
    session_id: str = ""
    version: int = 0
    timestamp: datetime | None = None
    #: What started it: manual, threshold, budget (a view asked within less than
    #: the session's budget), overflow, client (or the client's word).
    trigger: str = ""
    #: "ok", "failed", "tainted" (done, then its summary erased with entries it
    #: covered), "undone" or "redone".
    outcome: str = ""
    #: Where a failed one failed, and why.
    stage: str = ""
    reason: str = ""
    summarizer_model: str = ""
    first_kept_entry_id: str = ""
    first_covered_entry_id: str = ""
    last_covered_entry_id: str = ""
    entries_covered: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    tokens_before_source: str = ""
    tokens_after_source: str = ""
    summary_tokens: int = 0
    prompt_hash: str = ""
    chunks: int = 0
    fallback_stage: str = ""
    attempt: int = 0
    duration_ms: int = 0
    engine: str = ""
    instructions: str = ""
    #: The notification id of the event that recorded it.
    position: int = 0
    #: An undo: the compaction it took back (later ones went with it). A redo:
    #: the compaction in force again (the newest it re-applies).
    compaction_version: int = 0
    #: An undo: the compaction in force after it (0: none).
    restored_compaction_version: int = 0
    #: A redo: the undo it took back.
    undo_version: int = 0
    #: Who asked for the undo or redo.
    requested_by: str = ""
    #: The position of the first entry the durable log keeps after it.
    first_kept_position: int = 0


@dataclass(slots=True)
class ListCompactionsRequest:
    """The ListCompactionsRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ListCompactionsRequest"
    #: One session's compactions; all sessions' when empty.
    session_id: str = ""
    #: since <= time < until.
    since: datetime | None = None
    until: datetime | None = None
    trigger: str = ""
    #: The summariser's model.
    model: str = ""
    #: "ok", "failed", "tainted", "undone" or "redone"; all when empty.
    outcome: str = ""
    page_size: int = 0
    page_token: str = ""
    #: As in ListSessionsRequest.
    min_position: int = 0


@dataclass(slots=True)
class ListCompactionsResponse:
    """The ListCompactionsResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ListCompactionsResponse"
    compactions: list[CompactionRecord] = field(default_factory=list)
    next_page_token: str = ""
    position: int = 0


@dataclass(slots=True)
class GetCompactionRequest:
    """The GetCompactionRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.GetCompactionRequest"
    session_id: str = ""
    #: The version of the event that recorded the compaction (or its failure).
    version: int = 0
    min_position: int = 0
    #: At most this many replaced entries per page; 0 (the default) means as
    #: many as fit in one message. Entries too large for one message together
    #: come in pages whatever the page size: follow next_page_token.
    page_size: int = 0
    #: From the previous page's next_page_token (with the same version).
    page_token: str = ""


@dataclass(slots=True)
class GetCompactionResponse:
    """The GetCompactionResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.GetCompactionResponse"
    record: CompactionRecord | None = None
    #: The receipt with its summary (unset for a failed compaction).
    compaction: Compaction | None = None
    #: The entries the summary replaced: from the previous compaction's first
    #: kept entry up to this one's, as stored (this page's). The other fields
    #: come with every page.
    replaced_entries: list[Entry] = field(default_factory=list)
    #: Whether the compaction is in force now (not taken back by an undo, or
    #: re-applied since).
    in_force: bool = False
    #: The undos that took it back and the redos that re-applied it, oldest first.
    changes: list[CompactionRecord] = field(default_factory=list)
    #: Set when more replaced entries follow: pass it as page_token.
    next_page_token: str = ""


@dataclass(slots=True)
class PruneRecord:
    """One pruned entry of a RecordPrune."""

    PROTO: ClassVar[str] = "sessionstore.v1.PruneRecord"
    session_id: str = ""
    version: int = 0
    timestamp: datetime | None = None
    entry_id: str = ""
    action: PruneAction = PruneAction.UNSPECIFIED
    head_chars: int | None = None
    tail_chars: int | None = None
    #: Characters of the entry's tool output as stored (unset for prunes
    #: recorded before the store kept sizes), and those of it the prune keeps
    #: (head and tail for a soft trim, 0 for a hard clear; the notice aside).
    chars_before: int | None = None
    chars_after: int | None = None
    reason: str = ""
    position: int = 0


@dataclass(slots=True)
class ListPrunesRequest:
    """The ListPrunesRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ListPrunesRequest"
    session_id: str = ""
    since: datetime | None = None
    until: datetime | None = None
    action: PruneAction = PruneAction.UNSPECIFIED
    page_size: int = 0
    page_token: str = ""
    min_position: int = 0


@dataclass(slots=True)
class ListPrunesResponse:
    """The ListPrunesResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ListPrunesResponse"
    prunes: list[PruneRecord] = field(default_factory=list)
    next_page_token: str = ""
    position: int = 0


@dataclass(slots=True)
class GetReadModelStatusRequest:
    """The GetReadModelStatusRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.GetReadModelStatusRequest"


@dataclass(slots=True)
class ReadModelState:
    """The ReadModelState message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ReadModelState"
    #: catalog, compactions or prunes.
    name: str = ""
    #: The last notification id the model applied.
    position: int = 0
    #: Events the store holds beyond position.
    lag: int = 0
    #: Events the model could not apply, skipped and kept to retry.
    quarantined: int = 0
    #: Set while this server's projection of the model cannot reach the database;
    #: it retries by itself after retry_in_seconds.
    failing_since: datetime | None = None
    error: str = ""
    retry_in_seconds: float = 0.0


@dataclass(slots=True)
class QuarantinedEvent:
    """The QuarantinedEvent message."""

    PROTO: ClassVar[str] = "sessionstore.v1.QuarantinedEvent"
    model: str = ""
    position: int = 0
    session_id: str = ""
    #: The stored event's type.
    topic: str = ""
    error: str = ""
    quarantined_at: datetime | None = None
    attempts: int = 0


@dataclass(slots=True)
class ReadModelStatus:
    """The ReadModelStatus message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ReadModelStatus"
    #: The store's latest position.
    head: int = 0
    models: list[ReadModelState] = field(default_factory=list)
    #: The latest quarantined events, newest first (at most 20).
    quarantined: list[QuarantinedEvent] = field(default_factory=list)
    #: Who keeps the read models: inprocess (this server), worker or off.
    projections: str = ""


@dataclass(slots=True)
class RecallRequest:
    """The RecallRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.RecallRequest"
    #: The session searched; with tenant_wide, the session whose settings
    #: (memory.embedding_model) the search uses.
    session_id: str = ""
    #: Words to find (full text) and, with an embedding model, a meaning to match.
    query: str = ""
    #: At most this many hits (1 to 100; 0: 10).
    limit: int = 0
    #: Search every session of the caller's tenant, not only session_id.
    tenant_wide: bool = False
    #: Only sessions with all of these labels.
    labels: dict[str, str] = field(default_factory=dict)
    #: Only entries stored since <= time < until.
    since: datetime | None = None
    until: datetime | None = None
    #: As in ListSessionsRequest: wait until the index has reached this position.
    min_position: int = 0


@dataclass(slots=True)
class RecallHit:
    """The RecallHit message."""

    PROTO: ClassVar[str] = "sessionstore.v1.RecallHit"
    entry_id: str = ""
    session_id: str = ""
    #: The version of the event that appended the entry.
    version: int = 0
    #: Higher is better: reciprocal rank fusion of the full-text and semantic
    #: ranks (full text alone without an embedding model).
    score: float = 0.0
    #: The matching piece of the entry's text.
    snippet: str = ""
    #: The version of the compaction in force that hid the entry from the
    #: prompt view; 0 when the entry is still in the view.
    hidden_by_compaction: int = 0
    #: The entry's role (user, assistant, tool, system) and when it was stored.
    role: str = ""
    timestamp: datetime | None = None
    #: How it was found: "fulltext", "semantic" or "fulltext+semantic".
    matched_by: str = ""


@dataclass(slots=True)
class RecallResponse:
    """The RecallResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.RecallResponse"
    hits: list[RecallHit] = field(default_factory=list)
    #: The index's position the answer reflects.
    position: int = 0
    #: The embedding model used; empty for a full-text search.
    embedding_model: str = ""


# Other sections' messages, named in the annotations above. Imported last,
# once this module's classes are defined, so that two sections naming each
# other's messages load whichever of them is imported first.
from sessionstore_client._types.entries import Entry
from sessionstore_client._types.views import Compaction
