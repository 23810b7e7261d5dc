"""What an entry's content is made of: its role and its blocks.

Plain immutable values: text, thinking, tool calls and results, images, and a
provider's own objects kept verbatim, with the text a model reads in them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"
    CUSTOM = "custom"


@dataclass(frozen=True, slots=True)
class TextBlock:
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    thinking: str
    signature: str = ""


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments_json: str = "{}"


@dataclass(frozen=True, slots=True)
class ToolResult:
    tool_call_id: str
    content: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class ImageRef:
    uri: str
    media_type: str = ""


@dataclass(frozen=True, slots=True)
class ProviderItem:
    """A provider's own object, kept verbatim: what its API requires back unchanged
    (Anthropic ``thinking`` with its ``signature``, ``redacted_thinking``,
    ``compaction``; an OpenAI Responses ``reasoning`` item with its
    ``encrypted_content``; a Gemini part with its ``thoughtSignature``; a document).

    ``json`` is the object's JSON text exactly as the provider gave it: that
    provider's prompt view carries it byte for byte, the others leave it out and
    say so. In a tool entry it belongs to the tool result before it.
    """

    provider: str
    type: str
    json: str


# The providers whose objects a ProviderItem may hold (OpenAI's: Responses items).
PROVIDERS = ("anthropic", "openai", "gemini")
# Provider item types longer than this are no type a provider uses.
MAX_PROVIDER_ITEM_TYPE_CHARS = 256

Block = TextBlock | ThinkingBlock | ToolCall | ToolResult | ImageRef | ProviderItem


def block_texts(blocks: tuple[Block, ...]) -> list[str]:
    """Every piece of text a model would read in these blocks."""
    # isinstance tests, not class patterns: this runs for every entry folded, and a
    # class pattern with attributes costs several times more.
    texts: list[str] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolResult):
            texts.append(block.content)
        elif isinstance(block, ToolCall):
            texts.extend((block.name, block.arguments_json))
        elif isinstance(block, ThinkingBlock):
            texts.append(block.thinking)
        elif isinstance(block, ImageRef):
            texts.append(block.uri)
        elif isinstance(block, ProviderItem):
            # Counted from its JSON: opaque or not, the provider reads all of it.
            texts.append(block.json)
    return texts


def provider_item_object(item: ProviderItem) -> dict[str, Any]:
    """The provider item's object (validated at ingest to be one)."""
    value: dict[str, Any] = json.loads(item.json)
    return value


def stood_in_call(item: ProviderItem) -> tuple[str, str] | None:
    """(call id, name) of the tool call this provider item is in its provider's own form
    (an Anthropic ``tool_use``, an OpenAI ``function_call``, a Gemini ``functionCall``
    part, which carries the thought signature Gemini wants back): in that provider's
    view the item stands in for the entry's tool call block. The id may be empty (Gemini
    leaves it out): the name then finds the call."""
    if item.type not in ("tool_use", "function_call", "functionCall"):
        return None
    value = provider_item_object(item)
    if item.provider == "gemini":
        call = value.get("functionCall")
        if isinstance(call, dict):
            return str(call.get("id") or ""), str(call.get("name") or "")
    elif item.provider == "anthropic" and item.type == "tool_use":
        return str(value.get("id") or ""), str(value.get("name") or "")
    elif item.provider == "openai" and item.type == "function_call":
        return str(value.get("call_id") or ""), str(value.get("name") or "")
    return None
