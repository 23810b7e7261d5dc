"""Entries: one item of a session each, with the usage and prompt it answered.

They know how to turn into and back from the positional lists events carry
them in, and which provider items stand in for their tool calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any

from domain.content_blocks import (
    Block,
    ImageRef,
    ProviderItem,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    block_texts,
    stood_in_call,
)

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens the provider reported for one assistant turn: the ground truth."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def prompt_total(self, provider_format: str) -> int:
        """Every prompt token the provider counted. Anthropic reports cached tokens apart
        from ``input_tokens``; OpenAI's ``prompt_tokens`` already holds its cached ones."""
        if provider_format == "anthropic":
            return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
        return self.input_tokens

    def is_empty(self) -> bool:
        return not (
            self.input_tokens
            or self.output_tokens
            or self.cache_read_tokens
            or self.cache_write_tokens
        )


@dataclass(frozen=True, slots=True)
class PromptRef:
    """The prompt view an assistant turn answered: its version, format and request hash."""

    version: int
    format: str
    hash: str


@dataclass(frozen=True, slots=True)
class Entry:
    """One item of a session. Ids and counts are final once the entry is stored."""

    id: str
    parent_id: str | None
    timestamp: datetime | None
    role: Role
    content: tuple[Block, ...]
    usage: Usage | None = None
    custom_type: str = ""
    metadata: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    token_count: int = 0
    tokenizer: str = ""
    prompt_ref: PromptRef | None = None

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolCall))

    @property
    def tool_results(self) -> tuple[ToolResult, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolResult))

    def content_bytes(self) -> int:
        return sum(len(text.encode()) for text in block_texts(self.content))

    # -- the stored form ------------------------------------------------------
    # Positional lists, not dicts: a long session is decoded whole when it is
    # first read, and JSON decoders pay for every object they build.

    def to_record(self) -> list[Any]:
        """[id, parent_id, timestamp, role, blocks, token_count, tokenizer, usage, custom_type,
        metadata(, prompt_ref)], each block [kind, fields...], as stored in events.

        The prompt reference is appended only when there is one, so entries stored
        before it existed decode the same way."""
        usage = self.usage
        record: list[Any] = [
            self.id,
            self.parent_id,
            self.timestamp.isoformat() if self.timestamp else None,
            self.role.value,
            [block_record(b) for b in self.content],
            self.token_count,
            self.tokenizer,
            None
            if usage is None
            else [
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
            ],
            self.custom_type,
            dict(self.metadata) if self.metadata else None,
        ]
        if self.prompt_ref is not None:
            ref = self.prompt_ref
            record.append([ref.version, ref.format, ref.hash])
        return record

    @classmethod
    def from_record(cls, record: list[Any]) -> Entry:
        (entry_id, parent_id, timestamp, role, blocks, tokens, tokenizer, usage, custom, meta) = (
            record[:10]
        )
        return cls(
            entry_id,
            parent_id,
            datetime.fromisoformat(timestamp) if timestamp else None,
            _ROLES[role],
            # A list built, not a generator: this runs for every entry a read decodes.
            tuple([_BLOCK_KINDS[kind](*fields) for kind, *fields in blocks]),
            Usage(*usage) if usage is not None else None,
            custom,
            MappingProxyType(meta) if meta else _EMPTY,
            tokens,
            tokenizer,
            PromptRef(*record[10]) if len(record) > 10 else None,
        )


_ROLES = {role.value: role for role in Role}
_BLOCK_KINDS: dict[str, type] = {
    "text": TextBlock,
    "thinking": ThinkingBlock,
    "tool_call": ToolCall,
    "tool_result": ToolResult,
    "image": ImageRef,
    "provider_item": ProviderItem,
}
_KIND_OF_BLOCK = {block_type: kind for kind, block_type in _BLOCK_KINDS.items()}


def block_record(block: Block) -> list[Any]:
    """[kind, fields...]: the fields in the order the block's constructor takes them."""
    return [_KIND_OF_BLOCK[type(block)], *(getattr(block, f) for f in block.__slots__)]


def block_from_record(record: Sequence[Any]) -> Block:
    kind, *fields = record
    block: Block = _BLOCK_KINDS[kind](*fields)
    return block


def stand_ins(entry: Entry, provider: str) -> dict[str, ProviderItem]:
    """Tool call id -> the provider item of ``provider`` that stands in for that call
    in the entry (see ``stood_in_call``)."""
    found: dict[str, ProviderItem] = {}
    for block in entry.content:  # a loop, not any(): asked of every entry a view shows
        if type(block) is ProviderItem:
            break
    else:
        return found
    calls = entry.tool_calls
    for block in entry.content:
        if not isinstance(block, ProviderItem) or block.provider != provider:
            continue
        named = stood_in_call(block)
        if named is None:
            continue
        call_id, name = named
        match = next(
            (
                c
                for c in calls
                if c.id not in found and (c.id == call_id if call_id else c.name == name)
            ),
            None,
        )
        if match is not None:
            found[match.id] = block
    return found
