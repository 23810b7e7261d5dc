# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The API's messages and enums as plain Python values.

Every message of the .proto is a dataclass here, every enum an IntEnum; the
documentation is the .proto's. Build requests from them and read answers as
them: the client converts to and from protocol buffers.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar, TypeAlias


class Role(enum.IntEnum):
    """The API's Role values."""

    UNSPECIFIED = 0
    USER = 1
    ASSISTANT = 2
    TOOL = 3
    SYSTEM = 4
    CUSTOM = 5


class PruneAction(enum.IntEnum):
    """The API's PruneAction values."""

    UNSPECIFIED = 0
    #: Keep head and tail characters, with a notice in between.
    SOFT_TRIM = 1
    #: Replace the whole result with a placeholder.
    HARD_CLEAR = 2


class PromptFormat(enum.IntEnum):
    """The API's PromptFormat values."""

    UNSPECIFIED = 0
    #: OpenAI chat completions messages; litellm takes them as they are.
    OPENAI = 1
    #: Anthropic Messages API: top-level system plus alternating messages.
    ANTHROPIC = 2
    #: OpenAI Responses API input items; the system prompt is the instructions.
    OPENAI_RESPONSES = 3
    #: Google Gemini generateContent contents; the system prompt is the
    #: systemInstruction.
    GEMINI = 4


class FileStatus(enum.IntEnum):
    """The API's FileStatus values."""

    UNSPECIFIED = 0
    OK = 1
    TRUNCATED = 2
    MISSING = 3


__all__ = [
    "AbandonToolCallsRequest",
    "AbandonToolCallsResponse",
    "AppendEntriesRequest",
    "AppendEntriesResponse",
    "AuditViewRequest",
    "ClearSessionRequest",
    "ClearSessionResponse",
    "CompactRequest",
    "CompactResponse",
    "Compaction",
    "CompactionFailure",
    "CompactionPlan",
    "CompactionPolicy",
    "CompactionRecord",
    "CompactionRedone",
    "CompactionUndone",
    "ContentBlock",
    "ContextReport",
    "CreateSessionRequest",
    "DurableLog",
    "EngineAction",
    "EntriesAppended",
    "Entry",
    "EntryRetracted",
    "EntryStatus",
    "EraseEntriesRequest",
    "EraseResponse",
    "EraseSessionRequest",
    "Erasure",
    "ExportSessionChunk",
    "ExportSessionRequest",
    "FileReport",
    "FileStatus",
    "ForkSessionRequest",
    "GetCompactionRequest",
    "GetCompactionResponse",
    "GetContextReportRequest",
    "GetEntryRequest",
    "GetPromptViewRequest",
    "GetReadModelStatusRequest",
    "GetSessionRequest",
    "GetViewRequest",
    "GuardDecision",
    "ImageBlock",
    "ImportHeader",
    "ImportSessionRequest",
    "ImportSessionResponse",
    "ImportedSession",
    "InjectedFile",
    "ListCompactionsRequest",
    "ListCompactionsResponse",
    "ListPrunesRequest",
    "ListPrunesResponse",
    "ListSessionsRequest",
    "ListSessionsResponse",
    "MemoryPolicy",
    "OmittedBlock",
    "OverflowReported",
    "PlanChunk",
    "PromptFormat",
    "PromptRef",
    "PromptView",
    "ProviderItem",
    "PruneAction",
    "PruneRecord",
    "PruneRecorded",
    "PrunedEntry",
    "PruningPolicy",
    "QuarantinedEvent",
    "ReadEventsRequest",
    "ReadModelState",
    "ReadModelStatus",
    "RecallHit",
    "RecallRequest",
    "RecallResponse",
    "RecordCompactionRequest",
    "RecordCompactionResponse",
    "RecordPruneRequest",
    "RecordPruneResponse",
    "ReportOverflowRequest",
    "RetractEntryRequest",
    "RetractEntryResponse",
    "Role",
    "Session",
    "SessionCleared",
    "SessionEvent",
    "SessionSettings",
    "SessionStarted",
    "SetSystemPromptRequest",
    "SetSystemPromptResponse",
    "SettingsChanged",
    "Skill",
    "SummarizerAttempt",
    "SummarizerChain",
    "SystemPrompt",
    "SystemPromptTokens",
    "TextBlock",
    "ThinkingBlock",
    "TokenLesson",
    "Tool",
    "ToolCallBlock",
    "ToolCallsAbandoned",
    "ToolFilter",
    "ToolReport",
    "ToolResultBlock",
    "ToolResultGuardPolicy",
    "ToolResultReport",
    "TurnUsage",
    "TurnVerification",
    "UndoCompactionRequest",
    "UndoCompactionResponse",
    "UpdateSettingsRequest",
    "Usage",
    "ViewAfterAppend",
    "ViewAudit",
    "ViewRepair",
    "WindowGuardPolicy",
    "WindowGuardState",
]


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


@dataclass(slots=True)
class TextBlock:
    """The TextBlock message."""

    PROTO: ClassVar[str] = "sessionstore.v1.TextBlock"
    text: str = ""


@dataclass(slots=True)
class ThinkingBlock:
    """The ThinkingBlock message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ThinkingBlock"
    thinking: str = ""
    #: Provider signature that must travel back with the thinking (Anthropic).
    signature: str = ""


@dataclass(slots=True)
class ToolCallBlock:
    """The ToolCallBlock message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ToolCallBlock"
    id: str = ""
    name: str = ""
    #: The call's arguments as a JSON object.
    arguments_json: str = ""


@dataclass(slots=True)
class ToolResultBlock:
    """The ToolResultBlock message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ToolResultBlock"
    tool_call_id: str = ""
    content: str = ""
    is_error: bool = False


@dataclass(slots=True)
class ImageBlock:
    """The ImageBlock message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ImageBlock"
    #: Where the image is (https:, data:, s3:, ...). The store keeps the reference only.
    uri: str = ""
    media_type: str = ""


@dataclass(slots=True)
class ProviderItem:
    """A provider's own object, kept verbatim: what its API requires back unchanged.
    The prompt view in that provider's format carries json byte for byte; the
    others leave it out and list it in PromptView.omitted. Counted from json.
    """

    PROTO: ClassVar[str] = "sessionstore.v1.ProviderItem"
    #: "anthropic" (Messages content blocks: thinking with its signature,
    #: redacted_thinking, compaction, documents), "openai" (Responses items:
    #: reasoning with encrypted_content, compaction, input_file) or "gemini"
    #: (Content parts, with their thoughtSignature).
    provider: str = ""
    #: The object's type ("redacted_thinking", "reasoning", ...; the client's word
    #: for a Gemini part, e.g. "functionCall"); when the object has a "type" field it
    #: must be the same.
    type: str = ""
    #: The object as the provider gave it: a JSON object, kept exactly.
    json: str = ""


@dataclass(slots=True)
class Usage:
    """Token usage the provider reported for an assistant turn."""

    PROTO: ClassVar[str] = "sessionstore.v1.Usage"
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(slots=True)
class Entry:
    """The Entry message."""

    PROTO: ClassVar[str] = "sessionstore.v1.Entry"
    #: Stable id; generated when left empty on append.
    id: str = ""
    #: Defaults to the previous entry of the session.
    parent_id: str = ""
    #: Defaults to the time of the append.
    timestamp: datetime | None = None
    role: Role = Role.UNSPECIFIED
    content: list[ContentBlock] = field(default_factory=list)
    #: Assistant entries only.
    usage: Usage | None = None
    #: For ROLE_CUSTOM: what kind of note this is (e.g. "model-snapshot").
    custom_type: str = ""
    #: Free-form labels kept with the entry (provider, model, stop reason, ...).
    metadata: dict[str, str] = field(default_factory=dict)
    #: Output only: counted once at ingest.
    token_count: int = 0
    #: Output only: the tokenizer that counted token_count, e.g. "o200k_base".
    tokenizer: str = ""
    #: Assistant entries: the prompt view the model answered, so its reported
    #: usage calibrates the store's estimate and an audit can check the view.
    prompt_ref: PromptRef | None = None
    #: Output only: the session version whose event appended this entry.
    version: int = 0


@dataclass(slots=True)
class PromptRef:
    """A prompt view as served: its version, format and request_hash."""

    PROTO: ClassVar[str] = "sessionstore.v1.PromptRef"
    version: int = 0
    format: PromptFormat = PromptFormat.UNSPECIFIED
    hash: str = ""


@dataclass(slots=True)
class ToolFilter:
    """Tool-name globs: a tool's results are prunable when allowed (empty: all)
    and not denied; deny wins.
    """

    PROTO: ClassVar[str] = "sessionstore.v1.ToolFilter"
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)


@dataclass(slots=True)
class PruningPolicy:
    """The PruningPolicy message."""

    PROTO: ClassVar[str] = "sessionstore.v1.PruningPolicy"
    #: "off" (default), "cache-ttl" (docs/context-management.md 3.4) or "recent-n"
    #: (byte caps by recency).
    mode: str | None = None
    ttl_seconds: int | None = None
    keep_last_assistants: int | None = None
    soft_trim_ratio: float | None = None
    hard_clear_ratio: float | None = None
    min_prunable_tool_chars: int | None = None
    soft_trim_max_chars: int | None = None
    soft_trim_head_chars: int | None = None
    soft_trim_tail_chars: int | None = None
    #: recent-n: the newest recent_n results keep up to recent_max_bytes, older ones old_max_bytes.
    recent_n: int | None = None
    recent_max_bytes: int | None = None
    old_max_bytes: int | None = None
    #: Set: replaces both lists (send it empty to clear them).
    tools: ToolFilter | None = None


@dataclass(slots=True)
class SummarizerChain:
    """The summarisers a compaction tries, in order, until one writes a summary that
    fits: "conversation" (the session's own model), a litellm model name
    ("openai/gpt-4o-mini"), a model with the name of a provider entry of the
    server's providers file ("openai/qwen2.5@local": its API base and key),
    "offline" (no model) or "hard-drop" (the oldest entries dropped to fit, which
    always lands and ends every chain). Set: replaces the list (empty: the
    default, summarizer_model if set, then offline, then hard-drop).
    """

    PROTO: ClassVar[str] = "sessionstore.v1.SummarizerChain"
    steps: list[str] = field(default_factory=list)


@dataclass(slots=True)
class CompactionPolicy:
    """Token figures left at 0 are derived from the window W in force (the resolved
    one, or the provider's when its overflow errors said less).
    """

    PROTO: ClassVar[str] = "sessionstore.v1.CompactionPolicy"
    #: Start compacting (in the background) when the calibrated estimate exceeds
    #: this share of the window.
    threshold_ratio: float | None = None
    #: Room kept for the answer; 0: min(16,384, W / 8). The view never holds more
    #: than W - reserve.
    reserve_tokens: int | None = None
    #: The newest entries a compaction keeps; 0: W / 10.
    keep_recent_tokens: int | None = None
    #: Model that writes summaries, any litellm name (e.g. "openai/gpt-4o-mini");
    #: empty: the offline summariser, which needs no model, key or network.
    summarizer_model: str | None = None
    #: "preserve" (default), "anonymize" or "custom".
    identifier_policy: str | None = None
    #: "auto" (default): on threshold, overflow and request; "manual": on overflow
    #: and request; "off": never.
    mode: str | None = None
    #: At least this many tokens free after a compaction; 0: min(20,000, W / 4).
    reserve_floor_tokens: int | None = None
    #: For local OpenAI-compatible servers, e.g. http://127.0.0.1:8000/v1.
    summarizer_api_base: str | None = None
    #: The summariser's own window; 0: from its model's metadata.
    summarizer_window_tokens: int | None = None
    #: With identifier_policy "custom": how the summary treats identifiers.
    identifier_instructions: str | None = None
    #: A compaction still running after this long fails.
    timeout_seconds: int | None = None
    #: Overflow reports per turn before compaction_failure.
    max_attempts: int | None = None
    #: Without a summariser: keep the newest messages that fit this share of the window.
    max_history_share: float | None = None
    #: What a summary may take; 0: min(4,096, W / 5).
    summary_max_tokens: int | None = None
    summarizers: SummarizerChain | None = None
    #: One step of the chain (its retries included) gives up after this long.
    step_timeout_seconds: int | None = None


@dataclass(slots=True)
class WindowGuardPolicy:
    """The WindowGuardPolicy message."""

    PROTO: ClassVar[str] = "sessionstore.v1.WindowGuardPolicy"
    enabled: bool | None = None
    #: Prompt views are refused (FAILED_PRECONDITION) below this window.
    hard_min_tokens: int | None = None
    #: Prompt views carry a warning below this window.
    warn_below_tokens: int | None = None


@dataclass(slots=True)
class ToolResultGuardPolicy:
    """The ToolResultGuardPolicy message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ToolResultGuardPolicy"
    enabled: bool | None = None
    #: A cap in characters besides the cap in tokens; 0 (default): none.
    live_cap_chars: int | None = None
    #: A result never shows more than this share of the window.
    max_window_share: float | None = None
    min_keep_chars: int | None = None
    tail_share: float | None = None
    max_tail_chars: int | None = None
    #: 0 (default): never; else a result over this share of the window is left out whole.
    placeholder_window_share: float | None = None
    #: A result over this many tokens shows its head (and its tail, when that looks
    #: like an error, a total or closing JSON) within it; 0: max(4,000, W / 20).
    live_cap_tokens: int | None = None
    #: The tool the agent's runtime offers to read an entry back, named in the
    #: notice of a trimmed result (empty: the notice names the entry only).
    read_back_tool: str | None = None


@dataclass(slots=True)
class SessionSettings:
    """The SessionSettings message."""

    PROTO: ClassVar[str] = "sessionstore.v1.SessionSettings"
    #: The conversation model, e.g. "gpt-4o" or "anthropic/claude-sonnet-4-5".
    model: str | None = None
    #: 0 or unset: resolved from the model's metadata, else 200,000.
    context_window_tokens: int | None = None
    #: Largest entry accepted, in bytes of content.
    max_entry_bytes: int | None = None
    title: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    pruning: PruningPolicy | None = None
    compaction: CompactionPolicy | None = None
    #: The context engine: "layered" (default: guard, tool-result guard,
    #: compaction, pruning) or "sliding-window"; others by plug-in name.
    engine: str | None = None
    window_guard: WindowGuardPolicy | None = None
    tool_result_guard: ToolResultGuardPolicy | None = None
    #: Injected system prompt files are cut to this many characters each.
    max_system_file_chars: int | None = None
    #: Long-term memory: how Recall searches and what assemble retrieves.
    memory: MemoryPolicy | None = None


@dataclass(slots=True)
class MemoryPolicy:
    """The MemoryPolicy message."""

    PROTO: ClassVar[str] = "sessionstore.v1.MemoryPolicy"
    #: An embedding model through litellm (e.g. "openai/text-embedding-3-small"):
    #: Recall then also searches by meaning. Empty: full text only, no model.
    embedding_model: str | None = None
    #: Where the embedding model is served; empty: litellm's default for it.
    embedding_api_base: str | None = None
    #: The prompt view holds the best this many recalled hits for the newest
    #: user turn, as a marked context block within the budget; 0: off.
    retrieval_top_k: int | None = None
    #: An embedding call gives up after this long (the search is then full text).
    embedding_timeout_seconds: int | None = None


@dataclass(slots=True)
class Session:
    """The Session message."""

    PROTO: ClassVar[str] = "sessionstore.v1.Session"
    id: str = ""
    version: int = 0
    settings: SessionSettings | None = None
    #: Where context_window_tokens came from: session, modelsConfig, model or default.
    context_window_source: str = ""
    created_at: datetime | None = None
    updated_at: datetime | None = None
    entry_count: int = 0
    total_tokens: int = 0
    compaction_count: int = 0
    total_usage: Usage | None = None
    last_entry_id: str = ""
    open_tool_call_ids: list[str] = field(default_factory=list)
    #: A fork: the session it was forked from and that session's version it copies.
    parent_session_id: str = ""
    forked_at_version: int = 0
    #: In the answer to a write (CreateSession, UpdateSettings, ForkSession):
    #: the write's position, the notification id of its last event. Pass it as
    #: min_position to a query of the read models to read your write there.
    position: int = 0
    #: Set when the session was erased whole.
    erased: Erasure | None = None


@dataclass(slots=True)
class CreateSessionRequest:
    """The CreateSessionRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.CreateSessionRequest"
    #: Optional; 1-128 characters of letters, digits and . _ : @ -. Generated when empty.
    session_id: str = ""
    settings: SessionSettings | None = None


@dataclass(slots=True)
class GetSessionRequest:
    """The GetSessionRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.GetSessionRequest"
    session_id: str = ""


@dataclass(slots=True)
class ListSessionsRequest:
    """The ListSessionsRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ListSessionsRequest"
    page_size: int = 0
    page_token: str = ""
    #: Filters, all of which a session must pass: every label given, the model,
    #: a case-insensitive part of the title, and updated_after <= updated < updated_before.
    labels: dict[str, str] = field(default_factory=dict)
    model: str = ""
    title_contains: str = ""
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    #: Wait (within the call's deadline) until the catalog has applied this
    #: position. 0: the store's latest position when the call arrives (every
    #: acknowledged write is listed); negative: answer from the catalog as it is.
    min_position: int = 0
    #: "created" (oldest first, the default) or "updated" (most recently updated first).
    order_by: str = ""


@dataclass(slots=True)
class ListSessionsResponse:
    """The ListSessionsResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ListSessionsResponse"
    sessions: list[Session] = field(default_factory=list)
    next_page_token: str = ""
    #: The catalog's position when it answered.
    position: int = 0


@dataclass(slots=True)
class UpdateSettingsRequest:
    """The UpdateSettingsRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.UpdateSettingsRequest"
    session_id: str = ""
    #: Fields set here replace the session's; unset fields keep their value.
    #: Labels, when any are set, replace the session's labels.
    settings: SessionSettings | None = None
    expected_version: int | None = None
    #: Labels to remove (after any replacement); unknown keys are ignored.
    remove_labels: list[str] = field(default_factory=list)


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
    #: When the append was written but its view could not be served (say, the
    #: window guard refused it): the status GetPromptView would answer, as
    #: "CODE: message". The append stands; do not send it again.
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
    #: the report is kept with the prune. Leave entries empty with it.
    applied_edits_json: str = ""


@dataclass(slots=True)
class RecordPruneResponse:
    """The RecordPruneResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.RecordPruneResponse"
    version: int = 0
    #: The decisions as recorded, with the sizes the session's policy filled in.
    entries: list[PrunedEntry] = field(default_factory=list)
    position: int = 0


@dataclass(slots=True)
class Compaction:
    """The Compaction message."""

    PROTO: ClassVar[str] = "sessionstore.v1.Compaction"
    summary: str = ""
    first_kept_entry_id: str = ""
    tokens_before: int = 0
    tokens_after: int = 0
    reason: str = ""
    summarizer_model: str = ""
    details: dict[str, str] = field(default_factory=dict)
    #: The version of the event that recorded it, and when.
    version: int = 0
    timestamp: datetime | None = None
    #: The summary's own token count and tokenizer.
    summary_tokens: int = 0
    tokenizer: str = ""
    #: The receipt: which entries the summary replaces...
    first_covered_entry_id: str = ""
    last_covered_entry_id: str = ""
    entries_covered: int = 0
    #: ...where the token counts came from ("tokenizer:<name>", "calibrated",
    #: "provider", "client")...
    tokens_before_source: str = ""
    tokens_after_source: str = ""
    #: ...sha256 of what the summariser was asked, how many chunks, which
    #: fallback ("full", "oversized-omitted", "hard-drop"), which attempt,
    #: how long it took, which engine, and the instructions given.
    prompt_hash: str = ""
    chunks: int = 0
    fallback_stage: str = ""
    attempt: int = 0
    duration_ms: int = 0
    engine: str = ""
    instructions: str = ""
    #: Its summary was erased with entries it covered; Compact regenerates it.
    tainted: bool = False
    #: Every summariser the chain tried, in order, and what became of it.
    attempts: list[SummarizerAttempt] = field(default_factory=list)
    #: A provider's compaction: its item, shown in that provider's view in place of
    #: the summary.
    provider_item: ProviderItem | None = None
    #: What the provider answered before its item (OpenAI's kept user messages),
    #: shown before the item in that provider's view.
    provider_retained: list[ProviderItem] = field(default_factory=list)


@dataclass(slots=True)
class SummarizerAttempt:
    """One step of a compaction's summariser chain."""

    PROTO: ClassVar[str] = "sessionstore.v1.SummarizerAttempt"
    #: The step as the chain names it ("openai/gpt-4o-mini@local", "offline", ...).
    summarizer: str = ""
    #: "used" (it wrote the summary), "failed", "timed-out" or "too-large" (its
    #: summary and what the cut keeps did not fit the budget).
    outcome: str = ""
    reason: str = ""
    duration_ms: int = 0


@dataclass(slots=True)
class CompactionFailure:
    """A compaction that did not happen; it changed nothing else."""

    PROTO: ClassVar[str] = "sessionstore.v1.CompactionFailure"
    trigger: str = ""
    #: "plan", "summarise", "verify", "timeout" or "attempts".
    stage: str = ""
    reason: str = ""
    attempt: int = 0
    summarizer_model: str = ""
    duration_ms: int = 0
    version: int = 0
    timestamp: datetime | None = None


@dataclass(slots=True)
class GetViewRequest:
    """The GetViewRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.GetViewRequest"
    session_id: str = ""
    version: int | None = None
    time: datetime | None = None
    #: GetDurableLog answers at most this many entries per page; 0 (the default)
    #: means as many as fit in one message. A log too large for one message
    #: comes in pages whatever the page size: follow next_page_token.
    page_size: int = 0
    #: From the previous page's next_page_token. Later pages are of the version
    #: the first page was (as_of is then ignored), so a paged read is consistent.
    page_token: str = ""


@dataclass(slots=True)
class GetPromptViewRequest:
    """The GetPromptViewRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.GetPromptViewRequest"
    session_id: str = ""
    version: int | None = None
    time: datetime | None = None
    #: Defaults to OpenAI.
    format: PromptFormat = PromptFormat.UNSPECIFIED
    #: The current view must fit this many tokens (e.g. to leave room for a long
    #: answer); the engine compacts to get there. Never more than the session's
    #: own budget. Ignored for replays (as_of).
    token_budget: int | None = None
    #: The view the client already holds (its version and request_hash). When
    #: that view is still the beginning of the current one (nothing compacted,
    #: pruned or guarded differently since, same system prompt and tools), the
    #: answer carries only the messages appended after it (appended = true):
    #: the client's provider prompt cache is still valid. Otherwise the whole view.
    held_version: int | None = None
    held_hash: str = ""


@dataclass(slots=True)
class DurableLog:
    """The DurableLog message."""

    PROTO: ClassVar[str] = "sessionstore.v1.DurableLog"
    session_id: str = ""
    #: The version this view is as of.
    version: int = 0
    #: Unset when the session was never compacted.
    compaction: Compaction | None = None
    entries: list[Entry] = field(default_factory=list)
    #: Tokens of the pinned entries, the summary and the entries.
    total_tokens: int = 0
    #: System entries from before the compaction's cut. The system prompt is
    #: pinned: both views keep it, ahead of the summary, whatever the cut.
    pinned: list[Entry] = field(default_factory=list)
    #: Set when more entries follow: send it as page_token for the next page.
    #: Every page carries the version, compaction, pinned entries and
    #: total_tokens of the whole log.
    next_page_token: str = ""
    #: Every erasure of the session: erasure reaches back into every version.
    erasures: list[Erasure] = field(default_factory=list)


@dataclass(slots=True)
class WindowGuardState:
    """The context window guard's verdict (docs/context-management.md 3.1)."""

    PROTO: ClassVar[str] = "sessionstore.v1.WindowGuardState"
    #: "ok", "warn" or "block".
    level: str = ""
    window_tokens: int = 0
    #: session, modelsConfig, model or default.
    source: str = ""
    hard_min_tokens: int = 0
    warn_below_tokens: int = 0
    message: str = ""


@dataclass(slots=True)
class GuardDecision:
    """How the tool-result guard shows one result it did not keep whole
    (docs/context-management.md 3.2).
    """

    PROTO: ClassVar[str] = "sessionstore.v1.GuardDecision"
    entry_id: str = ""
    tool_call_id: str = ""
    #: "truncate" or "replace".
    action: str = ""
    head_chars: int = 0
    tail_chars: int = 0
    original_chars: int = 0
    reason: str = ""


@dataclass(slots=True)
class EngineAction:
    """Something the context engine did to serve a view."""

    PROTO: ClassVar[str] = "sessionstore.v1.EngineAction"
    #: "compacted", "waited_for_compaction", "compaction_running", "pruned",
    #: "truncated", "compaction_failed"; "fitted_to_message" (the view was larger than
    #: one message carries: brought within it by a tighter budget, sizes in detail);
    #: "recalled" (memory.retrieval_top_k: hidden entries recalled into the view, as a
    #: marked context block before the newest user turn) or "recall_skipped".
    kind: str = ""
    detail: str = ""
    #: The version of the event that recorded it.
    version: int = 0


@dataclass(slots=True)
class PromptView:
    """The PromptView message."""

    PROTO: ClassVar[str] = "sessionstore.v1.PromptView"
    session_id: str = ""
    version: int = 0
    format: PromptFormat = PromptFormat.UNSPECIFIED
    #: JSON array in the requested format, ready to send: messages (OpenAI chat,
    #: Anthropic), input items (Responses) or contents (Gemini).
    messages_json: str = ""
    #: The system prompt as the provider takes it, as JSON: Anthropic's top-level
    #: system blocks, Responses' instructions (a string), Gemini's
    #: systemInstruction ({"parts": [...]}); empty when there is none, and for
    #: OpenAI chat, where it is the first message.
    system_json: str = ""
    #: Estimated prompt tokens after pruning.
    estimated_tokens: int = 0
    context_window_tokens: int = 0
    #: Entries whose tool results were trimmed or cleared in this view.
    pruned: list[PrunedEntry] = field(default_factory=list)
    #: The stored tools in the requested format (a JSON array; "[]" when none).
    tools_json: str = ""
    #: sha256 (hex) of the request's canonical JSON:
    #: {"format":"openai"|"openai-responses"|"anthropic"|"gemini","system":<system_json or null>,"tools":<tools_json>,"messages":<messages_json>}
    request_hash: str = ""
    guard: WindowGuardState | None = None
    guarded: list[GuardDecision] = field(default_factory=list)
    #: What the engine did for this view (empty when it only read).
    actions: list[EngineAction] = field(default_factory=list)
    engine: str = ""
    #: The view never holds more than this (threshold and reserve applied).
    budget_tokens: int = 0
    #: True: messages_json holds only the messages appended after held_version
    #: (the request's), which the client appends to the messages it holds;
    #: request_hash is the whole view's.
    appended: bool = False
    base_version: int = 0
    #: estimated_tokens is the store's count times this calibration, which the
    #: provider's usage reports and overflow errors teach (1.0 until then);
    #: uncalibrated_tokens is the count itself.
    calibration: float = 0.0
    uncalibrated_tokens: int = 0
    #: Over this (and under budget_tokens) a compaction runs in the background.
    threshold_tokens: int = 0
    #: Room kept for the answer: budget_tokens = window - reserve_tokens.
    reserve_tokens: int = 0
    #: Blocks this view leaves out because its provider cannot take them (another
    #: provider's items, thinking without a signature, images where the format has
    #: no place for one), each with the reason.
    omitted: list[OmittedBlock] = field(default_factory=list)
    #: What this view does differently from the log so its provider accepts it
    #: (the log itself is never rewritten).
    repairs: list[ViewRepair] = field(default_factory=list)


@dataclass(slots=True)
class OmittedBlock:
    """A block a prompt view leaves out."""

    PROTO: ClassVar[str] = "sessionstore.v1.OmittedBlock"
    #: The entry that holds it, and its place in the entry's content; an empty
    #: entry_id and block_index -1 for the compaction's provider item.
    entry_id: str = ""
    block_index: int = 0
    #: "provider_item", "compaction_item", "thinking" or "image".
    kind: str = ""
    #: For provider items: their provider and type.
    provider: str = ""
    type: str = ""
    reason: str = ""


@dataclass(slots=True)
class ViewRepair:
    """One thing a prompt view does differently from the log."""

    PROTO: ClassVar[str] = "sessionstore.v1.ViewRepair"
    #: "synthetic_result": a tool call whose result never came (or not right after
    #: it) is answered by a synthetic error result; "dropped_result": a result
    #: whose call is not right before it (compacted away, lost, answered already)
    #: is left out; "leading_user_turn": a view that would open with the
    #: assistant's turn gets a user turn first (Anthropic, Gemini);
    #: "call_id_rewritten": a tool call id the provider would refuse is shown as
    #: view_tool_call_id (a result appended for that id answers the original call).
    kind: str = ""
    #: The call's entry (synthetic_result, call_id_rewritten) or the result's
    #: (dropped_result).
    entry_id: str = ""
    tool_call_id: str = ""
    view_tool_call_id: str = ""
    detail: str = ""


@dataclass(slots=True)
class GetEntryRequest:
    """The GetEntryRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.GetEntryRequest"
    session_id: str = ""
    entry_id: str = ""


@dataclass(slots=True)
class ReadEventsRequest:
    """The ReadEventsRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ReadEventsRequest"
    session_id: str = ""
    #: Events after this version (0: from the start).
    after_version: int = 0
    #: After the stored events, keep the stream open and send new ones as they land.
    follow: bool = False


@dataclass(slots=True)
class SessionStarted:
    """The SessionStarted message."""

    PROTO: ClassVar[str] = "sessionstore.v1.SessionStarted"
    settings: SessionSettings | None = None
    parent_session_id: str = ""
    forked_at_version: int = 0


@dataclass(slots=True)
class ToolCallsAbandoned:
    """Tool calls closed without an answer; entry holds their synthetic error
    results (metadata "synthetic": "abandoned").
    """

    PROTO: ClassVar[str] = "sessionstore.v1.ToolCallsAbandoned"
    tool_call_ids: list[str] = field(default_factory=list)
    reason: str = ""
    entry: Entry | None = None


@dataclass(slots=True)
class TokenLesson:
    """The provider counted provider_tokens for a prompt the store estimated at
    estimated_tokens; the session's calibration for the model became calibration.
    """

    PROTO: ClassVar[str] = "sessionstore.v1.TokenLesson"
    model: str = ""
    estimated_tokens: int = 0
    provider_tokens: int = 0
    calibration: float = 0.0
    source: str = ""


@dataclass(slots=True)
class EntryRetracted:
    """The log's latest entry taken out of the views; the entry stays in the store."""

    PROTO: ClassVar[str] = "sessionstore.v1.EntryRetracted"
    entry_id: str = ""
    reason: str = ""


@dataclass(slots=True)
class SessionCleared:
    """Every entry taken out of the views; the entries stay in the store."""

    PROTO: ClassVar[str] = "sessionstore.v1.SessionCleared"
    entries_cleared: int = 0
    reason: str = ""


@dataclass(slots=True)
class EntriesAppended:
    """The EntriesAppended message."""

    PROTO: ClassVar[str] = "sessionstore.v1.EntriesAppended"
    entries: list[Entry] = field(default_factory=list)
    idempotency_key: str = ""
    guarded: list[GuardDecision] = field(default_factory=list)
    #: What the provider's usage on these entries taught.
    lessons: list[TokenLesson] = field(default_factory=list)


@dataclass(slots=True)
class OverflowReported:
    """The OverflowReported message."""

    PROTO: ClassVar[str] = "sessionstore.v1.OverflowReported"
    provider: str = ""
    status_code: int = 0
    message: str = ""
    kind: str = ""
    view_version: int = 0
    view_hash: str = ""
    #: What the error stated and the store learned: the provider's window and the
    #: answer's room the request asked for (0: not stated)...
    learned_window_tokens: int = 0
    learned_output_tokens: int = 0
    #: ...and its count of the refused prompt, against the store's estimate.
    lesson: TokenLesson | None = None


@dataclass(slots=True)
class PruneRecorded:
    """The PruneRecorded message."""

    PROTO: ClassVar[str] = "sessionstore.v1.PruneRecorded"
    entries: list[PrunedEntry] = field(default_factory=list)
    reason: str = ""
    #: The provider's report the prune was recorded from (RecordPruneRequest).
    applied_edits_json: str = ""


@dataclass(slots=True)
class SettingsChanged:
    """The SettingsChanged message."""

    PROTO: ClassVar[str] = "sessionstore.v1.SettingsChanged"
    settings: SessionSettings | None = None


@dataclass(slots=True)
class SessionEvent:
    """The SessionEvent message."""

    PROTO: ClassVar[str] = "sessionstore.v1.SessionEvent"
    session_id: str = ""
    version: int = 0
    timestamp: datetime | None = None
    event: (
        SessionStarted
        | EntriesAppended
        | Compaction
        | PruneRecorded
        | SettingsChanged
        | CompactionFailure
        | OverflowReported
        | SystemPrompt
        | ToolCallsAbandoned
        | CompactionUndone
        | Erasure
        | CompactionRedone
        | EntryRetracted
        | SessionCleared
        | None
    ) = None


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
    #: Why: kept in the event and the audit.
    reason: str = ""
    #: Who asks (a person or an agent's name): kept in the event.
    erased_by: str = ""


@dataclass(slots=True)
class EraseEntriesRequest:
    """The EraseEntriesRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.EraseEntriesRequest"
    session_id: str = ""
    entry_ids: list[str] = field(default_factory=list)
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
    #: Optional; generated when empty.
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


@dataclass(slots=True)
class InjectedFile:
    """The InjectedFile message."""

    PROTO: ClassVar[str] = "sessionstore.v1.InjectedFile"
    path: str = ""
    #: The file's text; cut to the session's max_system_file_chars in the prompt.
    content: str = ""
    #: The client could not read it: reported MISSING, nothing injected.
    missing: bool = False
    #: Output only.
    raw_chars: int = 0
    injected_chars: int = 0
    status: FileStatus = FileStatus.UNSPECIFIED


@dataclass(slots=True)
class Skill:
    """The Skill message."""

    PROTO: ClassVar[str] = "sessionstore.v1.Skill"
    name: str = ""
    description: str = ""


@dataclass(slots=True)
class Tool:
    """The Tool message."""

    PROTO: ClassVar[str] = "sessionstore.v1.Tool"
    name: str = ""
    description: str = ""
    #: The tool's parameters as a JSON Schema object.
    parameters_json: str = ""


@dataclass(slots=True)
class SystemPromptTokens:
    """Tokens of each part of the system prompt, counted when it was set."""

    PROTO: ClassVar[str] = "sessionstore.v1.SystemPromptTokens"
    text: int = 0
    files: int = 0
    skills: int = 0
    tool_list: int = 0
    tool_schemas: int = 0
    total: int = 0
    tokenizer: str = ""


@dataclass(slots=True)
class SystemPrompt:
    """The SystemPrompt message."""

    PROTO: ClassVar[str] = "sessionstore.v1.SystemPrompt"
    text: str = ""
    files: list[InjectedFile] = field(default_factory=list)
    skills: list[Skill] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    #: Output only.
    tokens: SystemPromptTokens | None = None


@dataclass(slots=True)
class SetSystemPromptRequest:
    """The SetSystemPromptRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.SetSystemPromptRequest"
    session_id: str = ""
    system_prompt: SystemPrompt | None = None
    expected_version: int | None = None


@dataclass(slots=True)
class SetSystemPromptResponse:
    """The SetSystemPromptResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.SetSystemPromptResponse"
    version: int = 0
    #: As stored: files cut and sized, tokens counted.
    system_prompt: SystemPrompt | None = None
    #: False when it equals the stored one (nothing recorded).
    changed: bool = False
    #: The write's position (see Session.position); the store's head when unchanged.
    position: int = 0


@dataclass(slots=True)
class CompactRequest:
    """The CompactRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.CompactRequest"
    session_id: str = ""
    #: What the summary should keep or stress, e.g. "keep the API decisions".
    instructions: str = ""
    #: Compact even when the prompt is below the threshold.
    force: bool = False
    #: Answer the plan; write nothing.
    dry_run: bool = False
    expected_version: int | None = None


@dataclass(slots=True)
class PlanChunk:
    """The PlanChunk message."""

    PROTO: ClassVar[str] = "sessionstore.v1.PlanChunk"
    entry_ids: list[str] = field(default_factory=list)
    tokens: int = 0


@dataclass(slots=True)
class CompactionPlan:
    """The CompactionPlan message."""

    PROTO: ClassVar[str] = "sessionstore.v1.CompactionPlan"
    first_kept_entry_id: str = ""
    first_covered_entry_id: str = ""
    last_covered_entry_id: str = ""
    entries_covered: int = 0
    chunks: list[PlanChunk] = field(default_factory=list)
    tokens_before: int = 0
    estimated_tokens_after: int = 0
    #: Entries too large for the summariser: left out, with a note in the summary.
    oversized_entry_ids: list[str] = field(default_factory=list)
    #: System entries kept ahead of the summary whatever the cut.
    pinned_entry_ids: list[str] = field(default_factory=list)
    summarizer_model: str = ""
    summarizer_window_tokens: int = 0
    reason: str = ""


@dataclass(slots=True)
class CompactResponse:
    """The CompactResponse message."""

    PROTO: ClassVar[str] = "sessionstore.v1.CompactResponse"
    #: False for a dry run, or when there was nothing worth compacting (see reason).
    compacted: bool = False
    reason: str = ""
    plan: CompactionPlan | None = None
    #: The compaction recorded, with its receipt.
    compaction: Compaction | None = None
    version: int = 0
    #: The write's position (see Session.position): the compaction's, or its
    #: failure's; the store's head when nothing was written (a dry run).
    position: int = 0


@dataclass(slots=True)
class ReportOverflowRequest:
    """The ReportOverflowRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ReportOverflowRequest"
    session_id: str = ""
    #: The provider's error as the client got it: message or body, HTTP status, provider.
    error_text: str = ""
    status_code: int = 0
    #: e.g. "openai", "anthropic"; empty: the session model's provider.
    provider: str = ""
    #: The prompt view the provider refused.
    view_version: int = 0
    view_hash: str = ""
    #: The format of the view to answer; defaults to OpenAI.
    format: PromptFormat = PromptFormat.UNSPECIFIED


@dataclass(slots=True)
class GetContextReportRequest:
    """The GetContextReportRequest message."""

    PROTO: ClassVar[str] = "sessionstore.v1.GetContextReportRequest"
    session_id: str = ""


@dataclass(slots=True)
class FileReport:
    """The FileReport message."""

    PROTO: ClassVar[str] = "sessionstore.v1.FileReport"
    path: str = ""
    raw_chars: int = 0
    injected_chars: int = 0
    status: FileStatus = FileStatus.UNSPECIFIED


@dataclass(slots=True)
class ToolReport:
    """The ToolReport message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ToolReport"
    name: str = ""
    schema_chars: int = 0


@dataclass(slots=True)
class ToolResultReport:
    """The ToolResultReport message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ToolResultReport"
    entry_id: str = ""
    tool_name: str = ""
    chars: int = 0
    #: What the prompt shows of it, after the guard and pruning.
    shown_chars: int = 0
    tokens: int = 0
    #: "", "truncate", "replace", "soft_trim" or "hard_clear".
    action: str = ""


@dataclass(slots=True)
class TurnUsage:
    """The TurnUsage message."""

    PROTO: ClassVar[str] = "sessionstore.v1.TurnUsage"
    entry_id: str = ""
    version: int = 0
    usage: Usage | None = None
    #: The store's estimate of the prompt view the turn answered, when it carries a prompt_ref.
    estimated_input_tokens: int = 0


@dataclass(slots=True)
class ContextReport:
    """The ContextReport message."""

    PROTO: ClassVar[str] = "sessionstore.v1.ContextReport"
    session_id: str = ""
    version: int = 0
    engine: str = ""
    window: WindowGuardState | None = None
    #: The prompt view's estimated_tokens; the four parts below add up to it.
    used_tokens: int = 0
    used_percent: float = 0.0
    system_prompt_tokens: int = 0
    summary_tokens: int = 0
    pinned_tokens: int = 0
    messages_tokens: int = 0
    #: The estimate scaled by the provider-reported calibration (1.0 when none yet):
    #: the figure every budget compares.
    calibrated_tokens: int = 0
    calibration_ratio: float = 0.0
    last_provider_input_tokens: int = 0
    #: Over this a compaction starts (in the background).
    threshold_tokens: int = 0
    system_prompt: SystemPromptTokens | None = None
    files: list[FileReport] = field(default_factory=list)
    skills: list[Skill] = field(default_factory=list)
    top_tools: list[ToolReport] = field(default_factory=list)
    largest_tool_results: list[ToolResultReport] = field(default_factory=list)
    latest_compaction: Compaction | None = None
    compaction_count: int = 0
    compaction_failures: int = 0
    prune_count: int = 0
    turns: list[TurnUsage] = field(default_factory=list)
    total_usage: Usage | None = None
    entries: int = 0
    entries_in_prompt: int = 0
    #: The most a prompt view may hold (window less the reserve), and that reserve.
    budget_tokens: int = 0
    reserve_tokens: int = 0


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
    #: "ok", "failed", "undone" or "redone".
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
    #: "ok", "failed", "undone" or "redone"; all when empty.
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


ContentBlock: TypeAlias = (
    TextBlock | ThinkingBlock | ToolCallBlock | ToolResultBlock | ImageBlock | ProviderItem
)
"""One of the content block types; the ContentBlock message."""
