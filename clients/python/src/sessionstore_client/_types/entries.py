# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The messages under the .proto's "entries" heading, as dataclasses.

sessionstore_client.types has every message and enum of the API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar, TypeAlias

from sessionstore_client._types.enums import PromptFormat, Role

__all__ = [
    "ContentBlock",
    "Entry",
    "ImageBlock",
    "PromptRef",
    "ProviderItem",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "Usage",
]


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


ContentBlock: TypeAlias = (
    TextBlock | ThinkingBlock | ToolCallBlock | ToolResultBlock | ImageBlock | ProviderItem
)
"""One of the content block types; the ContentBlock message."""
