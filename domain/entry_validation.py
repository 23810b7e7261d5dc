"""Validation of one entry on its own (the session checks the rest): its ids, its
blocks for its role, provider items, usage and size, each refusal saying what to fix."""

from __future__ import annotations

import json
from typing import Any

import orjson

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
    stood_in_call,
)
from domain.entries import Entry, Usage, stand_ins
from domain.errors import InvalidEntry, InvalidRequest, quoted

# Counts travel as int64: a session's running totals must stay within it.
INT64_MAX = (1 << 63) - 1
# Ids are stored in indexed text columns and quoted in messages.
MAX_ID_CHARS = 512


def validate_id(value: str, field: str) -> None:
    """Refuses an id no store can hold: NUL characters, or too long to index."""
    if "\x00" in value:
        raise InvalidRequest(f"{field} {quoted(value)} contains a NUL character; remove it")
    if len(value) > MAX_ID_CHARS:
        raise InvalidRequest(
            f"{field} {quoted(value)} is longer than {MAX_ID_CHARS} characters; send a shorter one"
        )


def validate_entry_ids(entry: Entry, label: str) -> None:
    """The ids an entry brings, checked before anything is looked up by them."""
    validate_id(entry.id, f"{label}: id")
    if entry.parent_id:
        validate_id(entry.parent_id, f"{label}: parent_id")
    for block in entry.content:
        if isinstance(block, ToolCall):
            validate_id(block.id, f"{label}: tool call id")
        elif isinstance(block, ToolResult):
            validate_id(block.tool_call_id, f"{label}: tool_call_id")


def renderable_json(text: str) -> Any:
    """``text`` parsed as the prompt formats parse it, proved to render again.

    Raises ValueError saying why not: invalid JSON, nesting too deep, an
    integer beyond 64 bits, or a lone surrogate escape.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError("nested too deep") from None
    try:
        orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError) as error:
        raise ValueError(
            f"it cannot be rendered again ({error}): keep nesting under 255 levels, integers "
            "within 64 bits and strings free of lone surrogate escapes"
        ) from None
    return value


_ALLOWED_BLOCKS: dict[Role, tuple[type, ...]] = {
    Role.USER: (TextBlock, ImageRef, ProviderItem),
    Role.ASSISTANT: (TextBlock, ThinkingBlock, ToolCall, ImageRef, ProviderItem),
    # Images and provider items of a tool entry belong to the result before them.
    Role.TOOL: (ToolResult, ImageRef, ProviderItem),
    Role.SYSTEM: (TextBlock,),
    Role.CUSTOM: (TextBlock, ImageRef),
}


def validate_entry(entry: Entry, max_entry_bytes: int, label: str = "entry") -> None:
    """Refuses an entry that no session could hold, saying what to fix."""
    if not entry.content:
        raise InvalidEntry(f"{label} has no content blocks; send at least one")
    allowed = _ALLOWED_BLOCKS[entry.role]
    for block in entry.content:
        if not isinstance(block, allowed):
            kinds = ", ".join(_block_kind(t) for t in allowed)
            raise InvalidEntry(
                f"{label}: a {entry.role.value} entry may hold {kinds} blocks, "
                f"not {_block_kind(type(block))}"
            )
        _validate_block(label, block)
    if entry.role is Role.TOOL and not isinstance(entry.content[0], ToolResult):
        raise InvalidEntry(
            f"{label}: a tool entry starts with a tool_result; its images and provider items "
            "follow the result they belong to"
        )
    _check_stand_ins(entry, label)
    if not any(_has_substance(b) for b in entry.content):
        raise InvalidEntry(f"{label} is empty: every content block is blank")
    if entry.usage is not None:
        _validate_usage(label, entry.role, entry.usage)
    if entry.prompt_ref is not None:
        if entry.role is not Role.ASSISTANT:
            raise InvalidEntry(f"{label}: prompt_ref belongs on assistant entries only")
        if entry.prompt_ref.version < 1:
            raise InvalidEntry(f"{label}: prompt_ref.version must be 1 or more")
    size = entry.content_bytes()
    if size > max_entry_bytes:
        raise InvalidEntry(
            f"{label} is {size:,} bytes; the session's limit is {max_entry_bytes:,} "
            "(setting max_entry_bytes). Store large outputs elsewhere and keep a reference, "
            "or raise the limit"
        )


def _validate_usage(label: str, role: Role, usage: Usage) -> None:
    if role is not Role.ASSISTANT:
        raise InvalidEntry(f"{label}: usage belongs on assistant entries only")
    for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        value = getattr(usage, name)
        if value < 0:
            raise InvalidEntry(f"{label}: usage.{name} is {value}; token counts are never negative")


def usage_total(total: Usage, usage: Usage, label: str) -> Usage:
    """The session's running total with ``usage`` added, refused when it leaves int64."""
    added = total + usage
    for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        if getattr(added, name) > INT64_MAX:
            raise InvalidEntry(
                f"{label}: usage.{name} {getattr(usage, name):,} would take the session's total "
                f"past {INT64_MAX:,}, the most a count can hold; send the real figure"
            )
    return added


def _validate_block(label: str, block: Block) -> None:
    if isinstance(block, ToolCall):
        if not block.id:
            raise InvalidEntry(f"{label}: a tool call needs an id")
        if not block.name:
            raise InvalidEntry(f"{label}: tool call {quoted(block.id)} needs a name")
        try:
            arguments = renderable_json(block.arguments_json)
        except ValueError as e:
            raise InvalidEntry(
                f"{label}: tool call {quoted(block.id)} arguments are not valid JSON "
                f"({quoted(str(e), 300)})"
            ) from None
        if not isinstance(arguments, dict):
            raise InvalidEntry(
                f"{label}: tool call {quoted(block.id)} arguments must be a JSON object"
            )
    elif isinstance(block, ToolResult) and not block.tool_call_id:
        raise InvalidEntry(f"{label}: a tool result needs the tool_call_id it answers")
    elif isinstance(block, ImageRef) and not block.uri:
        raise InvalidEntry(f"{label}: an image block needs a uri")
    elif isinstance(block, ProviderItem):
        _validate_provider_item(label, block)


def _validate_provider_item(label: str, item: ProviderItem) -> None:
    if item.provider not in PROVIDERS:
        raise InvalidEntry(
            f"{label}: provider item provider {quoted(item.provider)} is not one this store "
            f"renders; use one of {', '.join(PROVIDERS)}"
        )
    if not item.type or len(item.type) > MAX_PROVIDER_ITEM_TYPE_CHARS:
        raise InvalidEntry(
            f"{label}: a provider item needs its type (e.g. reasoning, redacted_thinking), "
            f"at most {MAX_PROVIDER_ITEM_TYPE_CHARS} characters"
        )
    try:
        value = renderable_json(item.json)
    except ValueError as e:
        raise InvalidEntry(
            f"{label}: provider item {quoted(item.type)} json is not valid JSON "
            f"({quoted(str(e), 300)}); send the provider's object as it came"
        ) from None
    if not isinstance(value, dict):
        raise InvalidEntry(f"{label}: provider item {quoted(item.type)} json must be an object")
    stated = value.get("type")
    if isinstance(stated, str) and stated != item.type:
        raise InvalidEntry(
            f"{label}: provider item type {quoted(item.type)} differs from its object's "
            f"type {quoted(stated)}; give the same"
        )


def _check_stand_ins(entry: Entry, label: str) -> None:
    """A provider item in a tool call's own form needs the call block it stands in for:
    the store pairs results with call blocks, and other providers' views show those."""
    items = [b for b in entry.content if isinstance(b, ProviderItem)]
    for provider in {item.provider for item in items}:
        wanted = [i for i in items if i.provider == provider and stood_in_call(i) is not None]
        if len(stand_ins(entry, provider)) < len(wanted):
            raise InvalidEntry(
                f"{label}: a {provider} provider item is a tool call the entry has no "
                "tool_call block for; add the tool_call block (same id, or same name when "
                "the item has no id) beside it"
            )


def _has_substance(block: Block) -> bool:
    match block:
        case TextBlock(text=text):
            return bool(text.strip())
        case ThinkingBlock(thinking=thinking):
            return bool(thinking.strip())
        case ToolResult():
            # An empty tool output is still an answer to its call.
            return True
    return True


def _block_kind(block_type: type) -> str:
    return {
        TextBlock: "text",
        ThinkingBlock: "thinking",
        ToolCall: "tool_call",
        ToolResult: "tool_result",
        ImageRef: "image",
        ProviderItem: "provider_item",
    }[block_type]
