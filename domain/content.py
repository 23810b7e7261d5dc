"""What a session is made of: entries, their roles and content blocks.

Plain immutable values. They know how to turn into and back from JSON-ready
dicts, which is how events carry them into the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import orjson

from domain.errors import InvalidEntry, InvalidRequest, quoted

# Counts travel as int64: a session's running totals must stay within it.
INT64_MAX = (1 << 63) - 1
# Ids are stored in indexed text columns and quoted in messages.
MAX_ID_CHARS = 512


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
            [_block_record(b) for b in self.content],
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
            tuple(_BLOCK_KINDS[kind](*fields) for kind, *fields in blocks),
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


def _block_record(block: Block) -> list[Any]:
    # The fields in the order the block's constructor takes them.
    return [_KIND_OF_BLOCK[type(block)], *(getattr(block, f) for f in block.__slots__)]


def block_texts(blocks: tuple[Block, ...]) -> list[str]:
    """Every piece of text a model would read in these blocks."""
    texts: list[str] = []
    for block in blocks:
        match block:
            case TextBlock(text=text):
                texts.append(text)
            case ThinkingBlock(thinking=thinking):
                texts.append(thinking)
            case ToolCall(name=name, arguments_json=arguments):
                texts.extend((name, arguments))
            case ToolResult(content=content):
                texts.append(content)
            case ImageRef(uri=uri):
                texts.append(uri)
            case ProviderItem(json=text):
                # Counted from its JSON: opaque or not, the provider reads all of it.
                texts.append(text)
    return texts


# -- validation of one entry on its own (the session checks the rest) ----------


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
