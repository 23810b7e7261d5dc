"""Translation of entries, their blocks and usage, times and prompt formats, between
the v1 protobuf messages and the domain's values."""

from __future__ import annotations

from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from domain.content import (
    Block,
    Entry,
    ImageRef,
    PromptRef,
    ProviderItem,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    Usage,
)
from domain.errors import InvalidRequest
from domain.pruning import PruneAction
from proto.sessionstore.v1 import session_store_pb2 as pb

_ROLES = {
    pb.ROLE_USER: Role.USER,
    pb.ROLE_ASSISTANT: Role.ASSISTANT,
    pb.ROLE_TOOL: Role.TOOL,
    pb.ROLE_SYSTEM: Role.SYSTEM,
    pb.ROLE_CUSTOM: Role.CUSTOM,
}
_ROLE_NUMBERS = {role: number for number, role in _ROLES.items()}
_ACTIONS = {
    pb.PRUNE_ACTION_SOFT_TRIM: PruneAction.SOFT_TRIM,
    pb.PRUNE_ACTION_HARD_CLEAR: PruneAction.HARD_CLEAR,
}
_ACTION_NUMBERS = {action: number for number, action in _ACTIONS.items()}
_FORMATS = {
    pb.PROMPT_FORMAT_UNSPECIFIED: "openai",
    pb.PROMPT_FORMAT_OPENAI: "openai",
    pb.PROMPT_FORMAT_ANTHROPIC: "anthropic",
    pb.PROMPT_FORMAT_OPENAI_RESPONSES: "openai-responses",
    pb.PROMPT_FORMAT_GEMINI: "gemini",
}
_FORMAT_NUMBERS = {name: number for number, name in _FORMATS.items() if number}


def _unknown(field: str, value: int, enum: Any, allowed: Any) -> InvalidRequest:
    names = ", ".join(enum.Name(number) for number in allowed)
    return InvalidRequest(f"{field} {value} is not a value this server knows; use one of {names}")


def prompt_format(value: pb.PromptFormat.ValueType) -> str:
    return _known_format(value, "format")


def _known_format(value: pb.PromptFormat.ValueType, field: str) -> str:
    if value not in _FORMATS:
        raise _unknown(field, value, pb.PromptFormat, _FORMATS)
    return _FORMATS[value]


def format_to_pb(provider_format: str) -> pb.PromptFormat.ValueType:
    return _FORMAT_NUMBERS.get(provider_format, pb.PROMPT_FORMAT_OPENAI)


# -- time ---------------------------------------------------------------------------


def to_datetime(timestamp: Timestamp, field: str = "timestamp") -> datetime:
    try:
        return timestamp.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError):
        raise InvalidRequest(
            f"{field} (seconds={timestamp.seconds}, nanos={timestamp.nanos}) is not a valid "
            "time; use 0001-01-01 to 9999-12-31 with nanos in 0..999,999,999"
        ) from None


def to_timestamp(moment: datetime) -> Timestamp:
    timestamp = Timestamp()
    timestamp.FromDatetime(moment)
    return timestamp


# -- entries ------------------------------------------------------------------------


def entry_from_pb(message: pb.Entry, index: int) -> Entry:
    if message.role == pb.ROLE_UNSPECIFIED:
        raise InvalidRequest(
            f"entries[{index}]: role is missing; set ROLE_USER, ROLE_ASSISTANT, ROLE_TOOL, "
            "ROLE_SYSTEM or ROLE_CUSTOM"
        )
    if message.role not in _ROLES:
        raise _unknown(f"entries[{index}].role", message.role, pb.Role, _ROLES)
    return Entry(
        id=message.id,
        parent_id=message.parent_id or None,
        timestamp=to_datetime(message.timestamp, f"entries[{index}].timestamp")
        if message.HasField("timestamp")
        else None,
        role=_ROLES[message.role],
        content=tuple(_block_from_pb(b, index, i) for i, b in enumerate(message.content)),
        usage=_usage_from_pb(message.usage) if message.HasField("usage") else None,
        custom_type=message.custom_type,
        metadata=MappingProxyType(dict(message.metadata)),
        prompt_ref=_prompt_ref_from_pb(message.prompt_ref, index)
        if message.HasField("prompt_ref")
        else None,
    )


def _prompt_ref_from_pb(ref: pb.PromptRef, index: int) -> PromptRef:
    field = f"entries[{index}].prompt_ref.format"
    return PromptRef(ref.version, _known_format(ref.format, field), ref.hash)


def _block_from_pb(block: pb.ContentBlock, entry_index: int, index: int) -> Block:
    kind = block.WhichOneof("block")
    if kind == "text":
        return TextBlock(block.text.text)
    if kind == "thinking":
        return ThinkingBlock(block.thinking.thinking, block.thinking.signature)
    if kind == "tool_call":
        call = block.tool_call
        return ToolCall(call.id, call.name, call.arguments_json or "{}")
    if kind == "tool_result":
        result = block.tool_result
        return ToolResult(result.tool_call_id, result.content, result.is_error)
    if kind == "image":
        return ImageRef(block.image.uri, block.image.media_type)
    if kind == "provider_item":
        return provider_item_from_pb(block.provider_item)
    raise InvalidRequest(f"entries[{entry_index}].content[{index}] is empty; set one block kind")


def provider_item_from_pb(item: pb.ProviderItem) -> ProviderItem:
    return ProviderItem(item.provider, item.type, item.json)


def provider_item_to_pb(item: ProviderItem) -> pb.ProviderItem:
    return pb.ProviderItem(provider=item.provider, type=item.type, json=item.json)


def _usage_from_pb(usage: pb.Usage) -> Usage:
    return Usage(
        usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens
    )


def usage_to_pb(usage: Usage) -> pb.Usage:
    return pb.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )


def entry_to_pb(entry: Entry, version: int = 0) -> pb.Entry:
    message = pb.Entry(
        id=entry.id,
        parent_id=entry.parent_id or "",
        role=_ROLE_NUMBERS[entry.role],
        content=[_block_to_pb(b) for b in entry.content],
        custom_type=entry.custom_type,
        metadata=dict(entry.metadata),
        token_count=entry.token_count,
        tokenizer=entry.tokenizer,
        version=version,
    )
    if entry.timestamp:
        message.timestamp.CopyFrom(to_timestamp(entry.timestamp))
    if entry.usage is not None:
        message.usage.CopyFrom(usage_to_pb(entry.usage))
    if entry.prompt_ref is not None:
        ref = entry.prompt_ref
        message.prompt_ref.CopyFrom(
            pb.PromptRef(version=ref.version, format=format_to_pb(ref.format), hash=ref.hash)
        )
    return message


def _block_to_pb(block: Block) -> pb.ContentBlock:
    match block:
        case TextBlock(text=text):
            return pb.ContentBlock(text=pb.TextBlock(text=text))
        case ThinkingBlock(thinking=thinking, signature=signature):
            return pb.ContentBlock(
                thinking=pb.ThinkingBlock(thinking=thinking, signature=signature)
            )
        case ToolCall(id=call_id, name=name, arguments_json=arguments):
            return pb.ContentBlock(
                tool_call=pb.ToolCallBlock(id=call_id, name=name, arguments_json=arguments)
            )
        case ToolResult(tool_call_id=call_id, content=content, is_error=is_error):
            return pb.ContentBlock(
                tool_result=pb.ToolResultBlock(
                    tool_call_id=call_id, content=content, is_error=is_error
                )
            )
        case ImageRef(uri=uri, media_type=media_type):
            return pb.ContentBlock(image=pb.ImageBlock(uri=uri, media_type=media_type))
        case ProviderItem():
            return pb.ContentBlock(provider_item=provider_item_to_pb(block))
    raise TypeError(f"not a content block: {block!r}")
