"""Claude Code project transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

Each line is one record with ``uuid`` and ``parentUuid``. Assistant replies
are streamed: each content block is its own line, all with the same
``message.id``; consecutive lines of one message are merged into one entry
(its id is the first line's uuid). Tool results arrive as user records with
``tool_result`` blocks and become tool entries.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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
    RECORD_TYPE_KEY,
    Record,
    Transcript,
    TranscriptError,
    dumps,
    has_substance,
    json_lines,
    parse_time,
    record_at,
    token_count,
)

_LABELS = ("cwd", "gitBranch", "version")
_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def read(data: bytes) -> Transcript:
    lines = json_lines(data)
    transcript = Transcript(format="claude-code", lines=len(lines))
    transcript.labels["import.format"] = "claude-code"
    aliases: dict[str, str] = {}
    previous: str | None = None
    pending: dict[str, Any] | None = None  # the assistant message being merged

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            with record_at(pending["lines"][0][0]):
                transcript.records.append(_assistant_record(pending))
            pending = None

    for number, record in lines:
        kind = record.get("type")
        if not transcript.session_id and isinstance(record.get("sessionId"), str):
            transcript.session_id = record["sessionId"]
        for key in _LABELS:
            if isinstance(record.get(key), str) and record[key]:
                transcript.labels.setdefault(f"import.{key}", record[key])
        uuid = record.get("uuid")
        if uuid is not None and not isinstance(uuid, str):
            raise TranscriptError(number, f"'uuid' must be a string, not {uuid!r}")
        record_id = uuid or f"line-{number}"
        parent = record.get("parentUuid", previous if not uuid else None)
        if parent is not None and not isinstance(parent, str):
            raise TranscriptError(number, f"'parentUuid' must be a string or null, not {parent!r}")
        parent = aliases.get(parent, parent) if parent else None
        message = record.get("message")
        if kind == "assistant":
            if not isinstance(message, dict):
                raise TranscriptError(number, "an assistant record needs a 'message' object")
            message_id = message.get("id")
            if pending is not None and message_id and pending["message_id"] == message_id:
                pending["lines"].append((number, record))
                aliases[record_id] = pending["id"]
                previous = record_id
                continue
            flush()
            if not transcript.model and isinstance(message.get("model"), str):
                transcript.model = message["model"]
            pending = {
                "id": record_id,
                "parent": parent,
                "message_id": message_id,
                "lines": [(number, record)],
            }
            previous = record_id
            continue
        flush()
        if kind == "user":
            if not isinstance(message, dict):
                raise TranscriptError(number, "a user record needs a 'message' object")
            with record_at(number):
                transcript.records.extend(_user_records(number, record_id, parent, record, message))
        else:
            rest = {k: v for k, v in record.items() if k not in ("uuid", "parentUuid")}
            text = (TextBlock(f"{kind}: {dumps(rest)}"),)
            with record_at(number):
                entry = _entry(number, record_id, record, Role.CUSTOM, text, str(kind or "record"))
            transcript.records.append(Record(number, record_id, parent, entry.timestamp, entry))
        previous = record_id
    flush()
    return transcript


def _entry(
    number: int,
    record_id: str,
    record: Mapping[str, Any],
    role: Role,
    content: tuple[Block, ...],
    custom_type: str = "",
    usage: Usage | None = None,
    metadata: Mapping[str, str] | None = None,
) -> Entry:
    meta = {RECORD_TYPE_KEY: str(record.get("type") or ""), **(metadata or {})}
    if not has_substance(content):
        note = f"[{record.get('type')} record without content]"
        role, content, custom_type, usage = Role.CUSTOM, (TextBlock(note),), "empty_message", None
    return Entry(
        id=record_id,
        parent_id=None,
        timestamp=parse_time(record.get("timestamp"), number),
        role=role,
        content=content,
        usage=usage,
        custom_type=custom_type if role is Role.CUSTOM else "",
        metadata=MappingProxyType(meta),
    )


def _blocks(number: int, content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if content is None:
        return []
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise TranscriptError(number, "message 'content' must be a string or a list of blocks")
    return content


def _user_records(
    number: int,
    record_id: str,
    parent: str | None,
    record: Mapping[str, Any],
    message: Mapping[str, Any],
) -> list[Record]:
    results: list[Block] = []
    others: list[Block] = []
    for block in _blocks(number, message.get("content")):
        kind = block.get("type")
        if kind == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or not call_id:
                raise TranscriptError(number, "a tool_result block needs its 'tool_use_id'")
            results.append(
                ToolResult(call_id, _result_text(block.get("content")), bool(block.get("is_error")))
            )
        elif kind == "text":
            others.append(TextBlock(str(block.get("text", ""))))
        elif kind == "image":
            others.append(_image(block))
        else:
            others.append(TextBlock(f"[{kind} block]"))
    timestamp = parse_time(record.get("timestamp"), number)
    records: list[Record] = []
    if results:
        entry = _entry(number, record_id, record, Role.TOOL, tuple(results))
        records.append(Record(number, record_id, parent, timestamp, entry))
    if others or not results:
        text_id = f"{record_id}.text" if results else record_id
        text_parent = record_id if results else parent
        meta = {"isMeta": "true"} if record.get("isMeta") else {}
        entry = _entry(number, text_id, record, Role.USER, tuple(others), metadata=meta)
        records.append(Record(number, text_id, text_parent, timestamp, entry))
    return records


def _assistant_record(pending: Mapping[str, Any]) -> Record:
    lines: list[tuple[int, Mapping[str, Any]]] = pending["lines"]
    number, first = lines[0]
    content: list[Block] = []
    usage: Usage | None = None
    metadata: dict[str, str] = {}
    for line, record in lines:
        message = record["message"]
        for block in _blocks(line, message.get("content")):
            content.append(_assistant_block(line, block))
        raw_usage = message.get("usage")
        if isinstance(raw_usage, dict):
            usage = Usage(*(token_count(raw_usage.get(k), line, f"usage.{k}") for k in _USAGE_KEYS))
        for key, name in (("model", "model"), ("stop_reason", "stopReason")):
            if isinstance(message.get(key), str) and message[key]:
                metadata[name] = message[key]
    entry = _entry(
        number, pending["id"], first, Role.ASSISTANT, tuple(content), usage=usage, metadata=metadata
    )
    return Record(number, pending["id"], pending["parent"], entry.timestamp, entry)


def _assistant_block(number: int, block: Mapping[str, Any]) -> Block:
    match block.get("type"):
        case "text":
            return TextBlock(str(block.get("text", "")))
        case "thinking":
            return ThinkingBlock(str(block.get("thinking", "")), str(block.get("signature") or ""))
        case "tool_use":
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise TranscriptError(number, "a tool_use block needs an 'id' and a 'name'")
            arguments = block.get("input", {})
            if not isinstance(arguments, dict):
                raise TranscriptError(number, f"tool call {call_id!r}: input must be a JSON object")
            return ToolCall(call_id, name, json.dumps(arguments, ensure_ascii=False))
        case "image":
            return _image(block)
    return TextBlock(f"[{block.get('type')} block]")


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            if isinstance(b, dict) and b.get("type") == "text"
            else f"[{b.get('type') if isinstance(b, dict) else 'value'} omitted]"
            for b in content
        )
    return "" if content is None else dumps(content)


def _image(block: Mapping[str, Any]) -> ImageRef:
    source = block.get("source") or {}
    media_type = str(source.get("media_type", ""))
    if source.get("type") == "base64":
        return ImageRef(f"data:{media_type};base64,{source.get('data', '')}", media_type)
    return ImageRef(str(source.get("url", "")) or "about:blank", media_type)
