"""What a session is made of: entries, their roles and content blocks.

Plain immutable values. They know how to turn into and back from JSON-ready
dicts, which is how events carry them into the store.

Their roles live apart: domain.content_blocks holds the roles and blocks,
domain.entries the entries and their stored form, domain.entry_validation the
checks of one entry on its own. This module gathers their public names, the
ones the rest of the code imports.
"""

from __future__ import annotations

from domain.content_blocks import (
    MAX_PROVIDER_ITEM_TYPE_CHARS,
    PROVIDERS,
    Block,
    ImageRef,
    ProviderItem,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    block_texts,
    provider_item_object,
    stood_in_call,
)
from domain.entries import Entry, PromptRef, Usage, stand_ins
from domain.entry_validation import (
    INT64_MAX,
    MAX_ID_CHARS,
    renderable_json,
    usage_total,
    validate_entry,
    validate_entry_ids,
    validate_id,
)

__all__ = [
    "INT64_MAX",
    "MAX_ID_CHARS",
    "MAX_PROVIDER_ITEM_TYPE_CHARS",
    "PROVIDERS",
    "Block",
    "Entry",
    "ImageRef",
    "PromptRef",
    "ProviderItem",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolCall",
    "ToolResult",
    "Usage",
    "block_texts",
    "provider_item_object",
    "renderable_json",
    "stand_ins",
    "stood_in_call",
    "usage_total",
    "validate_entry",
    "validate_entry_ids",
    "validate_id",
]
