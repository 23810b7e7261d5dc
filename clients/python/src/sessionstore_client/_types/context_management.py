# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The messages under the .proto's "context management" heading, as dataclasses.

sessionstore_client.types has every message and enum of the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from sessionstore_client._types.enums import FileStatus, PromptFormat

__all__ = [
    "CompactRequest",
    "CompactResponse",
    "CompactionPlan",
    "ContextReport",
    "FileReport",
    "GetContextReportRequest",
    "InjectedFile",
    "PlanChunk",
    "ReportOverflowRequest",
    "SetSystemPromptRequest",
    "SetSystemPromptResponse",
    "Skill",
    "SystemPrompt",
    "SystemPromptTokens",
    "Tool",
    "ToolReport",
    "ToolResultReport",
    "TurnUsage",
]


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
    #: A retried Compact with the same key answers the compaction the first try
    #: recorded and summarises nothing; the same key with other instructions or
    #: force is refused (INVALID_ARGUMENT, reason idempotency_key_reused). Keys
    #: are the session's, shared with AppendEntries: a key one call used is
    #: refused to the other. Ignored with dry_run (it writes nothing).
    idempotency_key: str = ""


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
    #: True when this was a retry answered from the compaction its key recorded.
    replayed: bool = False


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
    #: The prompt view the provider refused: its version is required, 1 to the
    #: session's version (OUT_OF_RANGE otherwise); its request_hash is optional.
    view_version: int = 0
    view_hash: str = ""
    #: The format of the view to answer; defaults to OpenAI.
    format: PromptFormat = PromptFormat.UNSPECIFIED
    #: The size in bytes of the request the provider refused, as the client sent it
    #: (its HTTP body, or the client's measure of it: the messages, system prompt and
    #: tools as its library encodes them). 0: unknown, and the store measures its own
    #: rendering of the refused view instead. Learned from a request refused for its
    #: bytes (HTTP 413): it includes what the client adds to the view (tools or a
    #: system prompt of its own, its library's JSON, a converted format), which the
    #: store's rendering does not. At most 1 GiB, and at least a quarter of the
    #: store's rendering of the view (which the request carried); INVALID_ARGUMENT
    #: otherwise.
    request_bytes: int = 0


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
    #: The session's version the whole report is of, its totals included.
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
    #: The smallest limit in bytes a request the provider refused for its size taught
    #: (HTTP 413, OverflowReported.learned_request_bytes, in the store's measure), and
    #: what prompt views keep their rendered size (messages, system prompt and tools)
    #: under: 80% of it. 0: none.
    learned_request_bytes: int = 0
    request_bytes_allowed: int = 0
    #: The version at which the client last had the session forget what providers
    #: taught (UpdateSettingsRequest.forget_learned_limits; 0: never).
    limits_forgotten_version: int = 0


# Other sections' messages, named in the annotations above. Imported last,
# once this module's classes are defined, so that two sections naming each
# other's messages load whichever of them is imported first.
from sessionstore_client._types.entries import Usage
from sessionstore_client._types.views import Compaction, WindowGuardState
