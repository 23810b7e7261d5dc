# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The messages under the .proto's "sessions" heading, as dataclasses.

sessionstore_client.types has every message and enum of the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

__all__ = [
    "CompactionPolicy",
    "CreateSessionRequest",
    "GetSessionRequest",
    "ListSessionsRequest",
    "ListSessionsResponse",
    "MemoryPolicy",
    "PruningPolicy",
    "Session",
    "SessionSettings",
    "SummarizerChain",
    "ToolFilter",
    "ToolResultGuardPolicy",
    "UpdateSettingsRequest",
    "WindowGuardPolicy",
]


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
    #: and request; "off": only on request (Compact): an overflow is recorded, and
    #: the window it states learned, but nothing is compacted.
    mode: str | None = None
    #: At least this many tokens free after a compaction; 0: min(20,000, W / 4).
    reserve_floor_tokens: int | None = None
    #: For local OpenAI-compatible servers, e.g. http://127.0.0.1:8000/v1.
    summarizer_api_base: str | None = None
    #: The summariser's own window; 0: from its model's metadata.
    summarizer_window_tokens: int | None = None
    #: With identifier_policy "custom": how the summary treats identifiers.
    identifier_instructions: str | None = None
    #: Caps each step of the chain, with step_timeout_seconds: a step gives up
    #: after the smaller of the two.
    timeout_seconds: int | None = None
    #: Overflow reports per turn before compaction_failure.
    max_attempts: int | None = None
    #: Every compaction (the hard drop too) leaves the prompt under this share of
    #: the window: it caps the compaction's target with the threshold and the
    #: reserve floor.
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
    #: 0 or unset: resolved from the server's models config, else the model's
    #: metadata, else 200,000. In a Session: the window in force, the one prompt
    #: views and the context report use (see Session.context_window_source).
    context_window_tokens: int | None = None
    #: Largest entry accepted, in bytes of content.
    max_entry_bytes: int | None = None
    #: At most 500 characters.
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
    #: Where settings.context_window_tokens, the window in force, came from:
    #: session, modelsConfig, model, default, or learned (a smaller window a
    #: provider's overflow error taught), as the context report's window.source.
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
    #: Forget what providers' overflow errors taught the session, for every model:
    #: the windows (stated or inferred), the answer's room and the limits in bytes,
    #: when they no longer hold (a proxy's body limit raised, a misread error, the
    #: model moved to a larger deployment). Views are then fitted to the resolved
    #: window again, until an error teaches anew. The calibration stays (the
    #: provider's count per store token, which every usage report corrects).
    #: Recorded as the event LearnedLimitsForgotten, before any settings change of
    #: the same request; nothing is recorded when nothing was learned, so a retry
    #: changes nothing.
    forget_learned_limits: bool = False


# Other sections' messages, named in the annotations above. Imported last,
# once this module's classes are defined, so that two sections naming each
# other's messages load whichever of them is imported first.
from sessionstore_client._types.entries import Usage
from sessionstore_client._types.erasure import Erasure
