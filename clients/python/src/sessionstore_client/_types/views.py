# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The messages under the .proto's "views" heading, as dataclasses.

sessionstore_client.types has every message and enum of the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from sessionstore_client._types.enums import PromptFormat

__all__ = [
    "Compaction",
    "CompactionFailure",
    "DurableLog",
    "EngineAction",
    "GetEntryRequest",
    "GetPromptViewRequest",
    "GetViewRequest",
    "GuardDecision",
    "OmittedBlock",
    "PromptView",
    "SummarizerAttempt",
    "ViewRepair",
    "WindowGuardState",
]


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
    #: The idempotency_key of the Compact that recorded it, as EntriesAppended
    #: shows an append's, wherever the compaction is shown (ReadEvents'
    #: compaction_recorded, CompactResponse, GetCompaction, the durable log, the
    #: context report); empty when it was recorded otherwise or the call gave none.
    idempotency_key: str = ""


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
    #: session, modelsConfig, model, default, or learned (from a provider's
    #: overflow error).
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
    #: "truncated", "compaction_failed", "not_compacted" (an overflow report that
    #: compacted nothing: why, in detail); "fitted_to_message" (the view was larger than
    #: one message carries: brought within it by a tighter budget, sizes in detail);
    #: "fitted_to_request_bytes" (the view was over the limit in bytes a provider's
    #: refusal taught, OverflowReported.learned_request_bytes: brought under it the
    #: same way);
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


# Other sections' messages, named in the annotations above. Imported last,
# once this module's classes are defined, so that two sections naming each
# other's messages load whichever of them is imported first.
from sessionstore_client._types.commands import PrunedEntry
from sessionstore_client._types.entries import Entry, ProviderItem
from sessionstore_client._types.erasure import Erasure
