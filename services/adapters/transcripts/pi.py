"""pi coding-agent session files: v1 (linear, no ids), v2 and v3 (a tree of
entries with ``id`` and ``parentId``), and OpenClaw's transcripts (pi v3 with
its own custom entries).

v1 files are migrated as pi migrates them: entries get ids and each one's
parent is the entry before it, in file order; a compaction's
``firstKeptEntryIndex`` (an index into the file's entries, the header being
index 0) becomes the ``firstKeptEntryId`` of the entry at that index. v2's
``hookMessage`` role is v3's ``custom``.

Each record keeps what the store has no field for in its entry's metadata
(``import.original``), so ``pi_export`` writes the same records back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from domain.content import (
    Block,
    Entry,
    ImageRef,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    Usage,
)
from services.adapters.transcripts.ir import (
    ORIGINAL_KEY,
    RECORD_TYPE_KEY,
    ImportedCompaction,
    Record,
    Transcript,
    TranscriptError,
    dumps,
    format_time,
    has_substance,
    json_lines,
    parse_time,
    record_at,
    require,
    token_count,
)
from services.adapters.transcripts.pi_content import SYNTHETIC, pi_content

EMPTY_TURN = "empty_assistant_turn"
_RECORD_FIELDS = ("type", "id", "parentId", "timestamp")
_PLACED = ("id", "parentId", "message")


def read(data: bytes) -> Transcript:
    return _read(data, "pi")


def read_openclaw(data: bytes) -> Transcript:
    return _read(data, "openclaw")


def _read(data: bytes, file_format: str) -> Transcript:
    lines = json_lines(data)
    header_line, header = lines[0]
    if header.get("type") != "session":
        raise TranscriptError(
            header_line,
            f"a pi session file starts with a 'session' header, not {header.get('type')!r}",
        )
    version = header.get("version", 1)
    if version not in (1, 2, 3):
        raise TranscriptError(header_line, f"session format version {version!r} is not 1, 2 or 3")
    transcript = Transcript(
        format=file_format,
        session_id=str(header.get("id") or ""),
        started_at=parse_time(header.get("timestamp"), header_line),
        model=str(header.get("modelId") or ""),
        title=str(header.get("cwd") or ""),
        lines=len(lines),
    )
    transcript.labels["import.format"] = file_format
    transcript.labels["import.header"] = dumps(header)
    body = lines[1:]
    if version == 1:
        body = _migrate_v1(lines, transcript.session_id)
    for number, record in body:
        with record_at(number):
            transcript.records.append(_record(number, record))
            if not transcript.model:
                transcript.model = _model_of(record)
    return transcript


def _migrate_v1(
    lines: list[tuple[int, dict[str, Any]]], session_id: str
) -> list[tuple[int, dict[str, Any]]]:
    """Ids and parents in file order; compaction indexes become entry ids."""
    migrated: list[tuple[int, dict[str, Any]]] = []
    ids: list[str | None] = [None]  # index 0: the header
    previous: str | None = None
    for number, record in lines[1:]:
        entry_id = hashlib.sha256(f"{session_id}:{number}".encode()).hexdigest()[:8]
        record = {"type": record.get("type"), "id": entry_id, "parentId": previous, **record}
        if record.get("type") == "compaction" and "firstKeptEntryIndex" in record:
            index = record.pop("firstKeptEntryIndex")
            if not isinstance(index, int) or not 0 <= index < len(ids):
                raise TranscriptError(
                    number,
                    f"firstKeptEntryIndex {index!r} is not the index of an entry before this "
                    "compaction",
                )
            # The header (index 0) keeps everything: the first entry.
            target = ids[index] if index else (ids[1] if len(ids) > 1 else None)
            if target is None:
                raise TranscriptError(number, "a compaction before any entry")
            record["firstKeptEntryId"] = target
        ids.append(entry_id)
        previous = entry_id
        migrated.append((number, record))
    return migrated


def _model_of(record: Mapping[str, Any]) -> str:
    if record.get("type") == "model_change":
        return str(record.get("modelId") or "")
    message = record.get("message")
    if isinstance(message, dict) and message.get("role") == "assistant":
        return str(message.get("model") or "")
    return ""


def _record(number: int, record: dict[str, Any]) -> Record:
    kind = require(record, "type", str, number)
    record_id = require(record, "id", str, number)
    if not record_id:
        raise TranscriptError(number, "'id' is empty")
    parent = record.get("parentId")
    if parent is not None and not isinstance(parent, str):
        raise TranscriptError(number, f"'parentId' must be a string or null, not {parent!r}")
    timestamp = parse_time(record.get("timestamp"), number)
    base = Record(number, record_id, parent or None, timestamp)
    if kind == "compaction":
        summary = require(record, "summary", str, number)
        first_kept = require(record, "firstKeptEntryId", str, number)
        tokens = token_count(record.get("tokensBefore"), number, "tokensBefore")
        rest = {
            k: v
            for k, v in record.items()
            if k not in (*_RECORD_FIELDS, "summary", "firstKeptEntryId", "tokensBefore")
        }
        details = {"import.id": record_id}
        if rest:
            details[ORIGINAL_KEY] = dumps(rest)
        if _time_differs(record, timestamp):
            details["import.timestamp"] = str(record["timestamp"])
        return replace(base, compaction=ImportedCompaction(summary, first_kept, tokens, details))
    if kind == "message":
        message = require(record, "message", dict, number)
        entry, abandoned = _message_entry(number, record, message)
        return replace(base, entry=entry, abandoned_reason=abandoned)
    return replace(base, entry=_custom_entry(number, kind, record))


def _time_differs(record: Mapping[str, Any], timestamp: Any) -> bool:
    return timestamp is not None and format_time(timestamp) != record.get("timestamp")


def _original(
    record: Mapping[str, Any], message: Mapping[str, Any] | None, content: Any = None
) -> str:
    # The record's fields in their order; id, parentId and message are written
    # from the entry, in their places.
    original: dict[str, Any] = {
        "record": {k: None if k in _PLACED else v for k, v in record.items()}
    }
    if message is not None:
        # The content's place is kept (null): it is written from the entry.
        original["message"] = {k: None if k == "content" else v for k, v in message.items()}
        if content is not _EXACT:
            # What the blocks cannot say (signatures of text, partial JSON, ...);
            # null when the message had no content at all.
            original["content"] = content
    return dumps(original)


_EXACT = object()


def _entry(
    number: int,
    record: Mapping[str, Any],
    role: Role,
    content: tuple[Block, ...],
    metadata: dict[str, str],
    **fields: Any,
) -> Entry:
    return Entry(
        id=record["id"],
        parent_id=None,
        timestamp=parse_time(record.get("timestamp"), number),
        role=role,
        content=content,
        metadata=MappingProxyType(metadata),
        **fields,
    )


def _custom_entry(number: int, kind: str, record: Mapping[str, Any]) -> Entry:
    """A record the store has no entry kind for, kept whole as a custom entry."""
    if kind == "model_change":
        text = f"model changed to {record.get('provider', '')}/{record.get('modelId', '')}"
    elif kind == "thinking_level_change":
        text = f"thinking level set to {record.get('thinkingLevel', '')}"
    elif kind == "custom":
        text = f"{record.get('customType', 'custom')}: {dumps(record.get('data'))}"
    else:
        rest = {k: v for k, v in record.items() if k not in _RECORD_FIELDS}
        text = f"{kind}: {dumps(rest)}"
    metadata = {RECORD_TYPE_KEY: kind, ORIGINAL_KEY: _original(record, None, None)}
    for key in ("provider", "modelId", "thinkingLevel"):
        if isinstance(record.get(key), str):
            metadata[key] = record[key]
    custom_type = str(record.get("customType") or kind) if kind == "custom" else kind
    return _entry(
        number, record, Role.CUSTOM, (TextBlock(text),), metadata, custom_type=custom_type
    )


def _message_entry(
    number: int, record: Mapping[str, Any], message: Mapping[str, Any]
) -> tuple[Entry, str | None]:
    role = require(message, "role", str, number)
    raw = message.get("content")
    metadata: dict[str, str] = {RECORD_TYPE_KEY: "message"}
    for key in ("provider", "model", "stopReason", "errorMessage", "toolName", "customType"):
        if isinstance(message.get(key), str) and message[key]:
            metadata[key] = message[key]
    usage: Usage | None = None
    abandoned: str | None = None
    if role == "user":
        content = _user_blocks(number, raw)
        entry_role = Role.USER
    elif role == "assistant":
        content = tuple(_assistant_block(number, b) for b in _block_list(number, raw))
        entry_role = Role.ASSISTANT
        usage = _usage(number, message.get("usage"))
    elif role == "toolResult":
        call_id = require(message, "toolCallId", str, number)
        content = (ToolResult(call_id, _text_of(number, raw), bool(message.get("isError"))),)
        entry_role = Role.TOOL
        details = message.get("details")
        if isinstance(details, dict) and details.get("synthetic") == SYNTHETIC:
            abandoned = str(details.get("reason") or "")
    elif role == "bashExecution":
        output = message.get("output") or ""
        content = (TextBlock(f"Ran `{message.get('command', '')}`\n```\n{output}\n```"),)
        entry_role = Role.USER
    else:  # custom (v3), hookMessage (v2), branchSummary, compactionSummary, ...
        text = _text_of(number, raw) if raw is not None else str(message.get("summary") or "")
        content = (TextBlock(text or f"[{role} message]"),)
        entry_role = Role.CUSTOM
    custom_type = ""
    if entry_role is Role.CUSTOM:
        custom_type = str(message.get("customType") or role)
    if not has_substance(content):
        # A turn that produced nothing (aborted, or a failed provider call): kept
        # as a note the prompt leaves out, never dropped.
        stop = message.get("stopReason") or "unknown"
        error = message.get("errorMessage")
        note = (
            f"[{role} turn without content: stopReason {stop}"
            + (f", {error}" if error else "")
            + "]"
        )
        content, entry_role, custom_type, usage = (TextBlock(note),), Role.CUSTOM, EMPTY_TURN, None
    entry = _entry(
        number, record, entry_role, content, metadata, usage=usage, custom_type=custom_type
    )
    exact = custom_type != EMPTY_TURN and _content_round_trips(entry, role, raw)
    metadata[ORIGINAL_KEY] = _original(record, message, _EXACT if exact else raw)
    return entry, abandoned


def _content_round_trips(entry: Entry, role: str, raw: Any) -> bool:
    try:
        return bool(pi_content(entry, role) == raw)
    except (TypeError, ValueError):
        return False


def _block_list(number: int, raw: Any) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(b, dict) for b in raw):
        raise TranscriptError(number, "message 'content' must be a list of blocks")
    return raw


def _user_blocks(number: int, raw: Any) -> tuple[Block, ...]:
    if isinstance(raw, str):
        return (TextBlock(raw),)
    blocks: list[Block] = []
    for block in _block_list(number, raw):
        if block.get("type") == "text":
            blocks.append(TextBlock(str(block.get("text", ""))))
        elif block.get("type") == "image":
            blocks.append(_image(block))
        else:
            blocks.append(TextBlock(f"[{block.get('type')} block]"))
    return tuple(blocks)


def _assistant_block(number: int, block: Mapping[str, Any]) -> Block:
    match block.get("type"):
        case "text":
            return TextBlock(str(block.get("text", "")))
        case "thinking":
            return ThinkingBlock(
                str(block.get("thinking", "")), str(block.get("thinkingSignature") or "")
            )
        case "toolCall":
            call_id = require(block, "id", str, number)
            name = require(block, "name", str, number)
            arguments = block.get("arguments", {})
            if not isinstance(arguments, dict):
                raise TranscriptError(
                    number, f"tool call {call_id!r}: arguments must be a JSON object"
                )
            return ToolCall(call_id, name, dumps(arguments))
        case "image":
            return _image(block)
    raise TranscriptError(
        number, f"assistant content block type {block.get('type')!r} is not known"
    )


def _text_of(number: int, raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    parts = []
    for block in _block_list(number, raw):
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        else:
            parts.append(f"[{block.get('type')} omitted]")
    return "\n".join(parts)


_USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite")


def _usage(number: int, raw: Any) -> Usage | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TranscriptError(number, "'usage' must be an object")
    return Usage(
        *(token_count(raw.get(k), number, f"usage.{k}") for k in _USAGE_KEYS),
    )


def _image(block: Mapping[str, Any]) -> ImageRef:
    media_type = str(block.get("mimeType", ""))
    return ImageRef(f"data:{media_type};base64,{block.get('data', '')}", media_type)
