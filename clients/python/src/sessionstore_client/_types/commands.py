# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The messages under the .proto's "commands" heading, as dataclasses.

sessionstore_client.types has every message and enum of the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sessionstore_client._types.enums import PromptFormat, PruneAction

__all__ = [
    "AppendEntriesRequest",
    "AppendEntriesResponse",
    "CompactionRedone",
    "CompactionUndone",
    "PrunedEntry",
    "RecordCompactionRequest",
    "RecordCompactionResponse",
    "RecordPruneRequest",
    "RecordPruneResponse",
    "UndoCompactionRequest",
    "UndoCompactionResponse",
    "ViewAfterAppend",
]


@dataclass(slots=True)
class AppendEntriesRequest:
    """The AppendEntriesRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.AppendEntriesRequest"
    session_id: str = ""
    entries: list[Entry] = field(default_factory=list)
    #: When set, the append is refused (ABORTED) unless the session is at this version.
    expected_version: int | None = None
    #: A retried append with the same key returns the first result and writes nothing.
    idempotency_key: str = ""
    #: Set to get the prompt view right after this append in the same call.
    view_after_append: ViewAfterAppend | None = None


@dataclass(slots=True)
class ViewAfterAppend:
    """The prompt view an append answers with: as GetPromptViewRequest, of the
    session's latest version (no as_of).
    """

    PROTO: ClassVar[str] = "sessionstore.v1.ViewAfterAppend"
    format: PromptFormat = PromptFormat.UNSPECIFIED
    token_budget: int | None = None
    #: The view the client holds: the answer is then only the messages appended
    #: after it, when nothing before them changed (see GetPromptViewRequest).
    held_version: int | None = None
    held_hash: str = ""


@dataclass(slots=True)
class AppendEntriesResponse:
    """The AppendEntriesResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.AppendEntriesResponse"
    version: int = 0
    entry_ids: list[str] = field(default_factory=list)
    token_counts: list[int] = field(default_factory=list)
    #: True when this was a retry answered from the first append.
    replayed: bool = False
    #: The notification id of the append's event (of the store's head, for a replay).
    position: int = 0
    #: With view_after_append: the prompt view right after the append.
    view_after_append: PromptView | None = None
    #: When the append was written but its view could not be served, whatever
    #: kept it (a refusal such as the window guard's, the database unavailable,
    #: a fault of the server's): the status GetPromptView would answer, as
    #: "CODE: message" ("UNAVAILABLE: ...", or "INTERNAL: ..." with the details
    #: in the server's log only). The append stands; do not send it again: ask
    #: GetPromptView for the view.
    view_after_append_error: str = ""


@dataclass(slots=True)
class RecordCompactionRequest:
    """The RecordCompactionRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.RecordCompactionRequest"
    session_id: str = ""
    #: With provider_item: optional, what other providers' views show in its place
    #: (else the item's own summary text, Anthropic's content; else a note that it is
    #: opaque).
    summary: str = ""
    first_kept_entry_id: str = ""
    tokens_before: int = 0
    tokens_after: int = 0
    #: Why: "overflow", "threshold", "manual", ...
    reason: str = ""
    summarizer_model: str = ""
    details: dict[str, str] = field(default_factory=dict)
    expected_version: int | None = None
    #: A compaction the provider made on its side: its compaction item (Anthropic's
    #: compaction block, an OpenAI Responses compaction item), which that
    #: provider's view shows in place of the summary, leaving out everything before
    #: it as the provider does. The reason defaults to "provider".
    provider_item: ProviderItem | None = None
    #: With provider_item: what the provider answered before it, sent before it in
    #: that provider's view (OpenAI's /responses/compact answers the user messages
    #: it kept, then its item). Other views read these messages' text after the
    #: summary.
    provider_retained: list[ProviderItem] = field(default_factory=list)


@dataclass(slots=True)
class RecordCompactionResponse:
    """The RecordCompactionResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.RecordCompactionResponse"
    version: int = 0
    compaction: Compaction | None = None
    position: int = 0


@dataclass(slots=True)
class PrunedEntry:
    """The PrunedEntry message."""

    PROTO: ClassVar[str] = "sessionstore.v1.PrunedEntry"
    entry_id: str = ""
    action: PruneAction = PruneAction.UNSPECIFIED
    #: Characters a soft trim keeps from the start and the end. Unset: the
    #: session's pruning policy (soft_trim_head_chars, soft_trim_tail_chars).
    head_chars: int | None = None
    tail_chars: int | None = None


@dataclass(slots=True)
class UndoCompactionRequest:
    """The UndoCompactionRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.UndoCompactionRequest"
    session_id: str = ""
    #: The version that recorded the compaction to take back; 0: the latest in force.
    compaction_version: int = 0
    #: Why: kept in the event.
    reason: str = ""
    expected_version: int | None = None
    #: Who asks (a person or an agent's name): kept in the event.
    requested_by: str = ""
    #: The version of an undo (a compaction_undone event) to take back; leave
    #: compaction_version unset with it.
    undo_version: int = 0


@dataclass(slots=True)
class UndoCompactionResponse:
    """The UndoCompactionResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.UndoCompactionResponse"
    version: int = 0
    #: Set when a compaction was taken back.
    undone: CompactionUndone | None = None
    #: Set when an undo was taken back (undo_version).
    redone: CompactionRedone | None = None
    #: The write's position (see Session.position).
    position: int = 0


@dataclass(slots=True)
class CompactionUndone:
    """A compaction taken back."""

    PROTO: ClassVar[str] = "sessionstore.v1.CompactionUndone"
    #: The version that recorded the compaction taken back.
    compaction_version: int = 0
    reason: str = ""
    requested_by: str = ""
    #: The compaction in force after it (0: none; the log starts at the first entry)
    #: and the position of the first entry the durable log keeps.
    restored_compaction_version: int = 0
    first_kept_position: int = 0
    #: The prompt's message tokens right after, as the store counts them.
    prompt_tokens: int = 0


@dataclass(slots=True)
class CompactionRedone:
    """An undo taken back: its compactions are in force again, as recorded."""

    PROTO: ClassVar[str] = "sessionstore.v1.CompactionRedone"
    #: The version of the undo taken back.
    undo_version: int = 0
    #: The compactions in force again, oldest first; the last makes the cut.
    compaction_versions: list[int] = field(default_factory=list)
    reason: str = ""
    requested_by: str = ""
    #: The position of the first entry the durable log keeps.
    first_kept_position: int = 0
    #: The prompt's message tokens right after, as the store counts them.
    prompt_tokens: int = 0


@dataclass(slots=True)
class RecordPruneRequest:
    """The RecordPruneRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.RecordPruneRequest"
    session_id: str = ""
    entries: list[PrunedEntry] = field(default_factory=list)
    reason: str = ""
    expected_version: int | None = None
    #: Anthropic context editing's report, as the response's context_management
    #: gave it ({"applied_edits": [...]}). Each clear_tool_uses edit clears the
    #: oldest tool results of the prompt view not yet cleared, as many as it says;
    #: the report is kept with the prune. Leave entries empty with it. A report
    #: that lists no edits is refused: there is nothing to prune.
    applied_edits_json: str = ""


@dataclass(slots=True)
class RecordPruneResponse:
    """The RecordPruneResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.RecordPruneResponse"
    version: int = 0
    #: The decisions as recorded, with the sizes the session's policy filled in.
    entries: list[PrunedEntry] = field(default_factory=list)
    position: int = 0


# Other sections' messages, named in the annotations above. Imported last,
# once this module's classes are defined, so that two sections naming each
# other's messages load whichever of them is imported first.
from sessionstore_client._types.entries import Entry, ProviderItem
from sessionstore_client._types.views import Compaction, PromptView
