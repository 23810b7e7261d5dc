"""Reading pi coding-agent session files (format v3) into domain entries.

A pi v3 session file is JSONL: a ``session`` header, then entries with ``id``
and ``parentId``. Only ``message`` entries become domain entries here; the
others (model and thinking-level changes, ``custom`` runtime records,
``compaction``) are skipped, and a message whose parent is a skipped entry is
re-parented to its nearest converted ancestor. Pi's own compactions are not
imported (the two v3 fixtures' compactions keep everything: their
``firstKeptEntryId`` names a ``model_change`` entry before the first message).

The transcripts' contents (tool outputs above all) are untrusted data: this
module only parses them, it never interprets or sends them anywhere.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
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

TOKENIZER = "chars/4"


@dataclass(frozen=True)
class PiTranscript:
    session_id: str
    # Converted messages, in file order, with pi's ids and resolved parents.
    entries: list[Entry]
    # Ids of messages left out: assistant messages with empty content.
    skipped: list[str]


def read_pi_transcript(path: str | Path) -> PiTranscript:
    lines = [json.loads(line) for line in Path(path).read_text("utf-8").splitlines() if line]
    header, records = lines[0], lines[1:]
    if header.get("type") != "session" or header.get("version") != 3:
        raise ValueError(f"{path}: not a pi v3 session file")
    parents = {r["id"]: r.get("parentId") for r in records}
    entries: list[Entry] = []
    skipped: list[str] = []
    converted: set[str] = set()
    for record in records:
        if record["type"] != "message":
            continue
        message = record["message"]
        if message["role"] == "assistant" and not message.get("content"):
            # Failed provider calls (stopReason "error") are stored by pi with
            # `content: []`. Our store refuses an entry without content, so
            # they are left out.
            skipped.append(record["id"])
            continue
        parent = _nearest_converted(record.get("parentId"), parents, converted)
        entries.append(_entry(record, parent))
        converted.add(record["id"])
    return PiTranscript(header["id"], entries, skipped)


def turns(entries: Iterable[Entry]) -> list[list[Entry]]:
    """The entries grouped into turns: each user message starts a new one."""
    grouped: list[list[Entry]] = []
    for entry in entries:
        if entry.role is Role.USER or not grouped:
            grouped.append([])
        grouped[-1].append(entry)
    return grouped


def _nearest_converted(
    parent: str | None, parents: Mapping[str, str | None], converted: set[str]
) -> str | None:
    while parent is not None and parent not in converted:
        parent = parents.get(parent)
    return parent


def _entry(record: Mapping[str, Any], parent: str | None) -> Entry:
    message = record["message"]
    role = message["role"]
    usage: Usage | None = None
    metadata: dict[str, str] = {}
    if role == "user":
        content = _user_blocks(message["content"])
        entry_role = Role.USER
    elif role == "assistant":
        content = tuple(_assistant_block(b) for b in message["content"])
        entry_role = Role.ASSISTANT
        if "usage" in message:
            u = message["usage"]
            usage = Usage(u["input"], u["output"], u["cacheRead"], u["cacheWrite"])
        metadata = {
            key: str(message[key]) for key in ("provider", "model", "stopReason") if key in message
        }
    elif role == "toolResult":
        content = (
            ToolResult(
                message["toolCallId"],
                _result_text(message["content"]),
                bool(message.get("isError", False)),
            ),
        )
        entry_role = Role.TOOL
        metadata = {"toolName": message.get("toolName", "")}
    else:
        raise ValueError(f"message {record['id']}: role {role!r} is not converted")
    chars = sum(len(_block_text(b)) for b in content)
    return Entry(
        id=record["id"],
        parent_id=parent,
        timestamp=datetime.fromisoformat(record["timestamp"]),
        role=entry_role,
        content=content,
        usage=usage,
        metadata=MappingProxyType(metadata),
        token_count=math.ceil(chars / 4),
        tokenizer=TOKENIZER,
    )


def _user_blocks(content: str | list[Mapping[str, Any]]) -> tuple[Block, ...]:
    if isinstance(content, str):
        return (TextBlock(content),)
    blocks: list[Block] = []
    for block in content:
        if block["type"] == "text":
            blocks.append(TextBlock(block["text"]))
        elif block["type"] == "image":
            blocks.append(_image(block))
        else:
            raise ValueError(f"user block type {block['type']!r} is not converted")
    return tuple(blocks)


def _assistant_block(block: Mapping[str, Any]) -> Block:
    match block["type"]:
        case "text":
            return TextBlock(block["text"])
        case "thinking":
            return ThinkingBlock(block["thinking"], block.get("thinkingSignature") or "")
        case "toolCall":
            return ToolCall(block["id"], block["name"], json.dumps(block.get("arguments", {})))
        case "image":
            return _image(block)
    raise ValueError(f"assistant block type {block['type']!r} is not converted")


def _result_text(content: str | list[Mapping[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if block["type"] == "text":
            parts.append(block["text"])
        else:
            parts.append(f"[{block['type']} omitted]")
    return "\n".join(parts)


def _image(block: Mapping[str, Any]) -> ImageRef:
    media_type = block.get("mimeType", "")
    return ImageRef(f"data:{media_type};base64,{block['data']}", media_type)


def _block_text(block: Block) -> str:
    match block:
        case TextBlock(text=text):
            return text
        case ThinkingBlock(thinking=thinking):
            return thinking
        case ToolCall(name=name, arguments_json=arguments):
            return name + arguments
        case ToolResult(content=content):
            return content
    return ""
