"""The shared real transcripts as domain entries, for the context policy tests.

pi v3 files are read by ``tests.unit.pi_transcript``. Here: pi v1 files (no ids:
each message gets ``m<line>``) and Claude Code project transcripts (one record
per content block; tool results arrive as user records). Contents are data
only: parsed, never interpreted or sent anywhere.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from domain.content import Block, Entry, Role, TextBlock, ThinkingBlock, ToolCall, ToolResult
from tests.unit import pi_transcript
from tests.unit.test_fixtures_import import FIXTURES

OPENCLAW = FIXTURES / "openclaw" / "8555a0a4-0b79-459d-939c-e17cdbbf4fe2.jsonl"
PI_LARGE = FIXTURES / "pi-mono" / "large-session.jsonl"
PI_BEFORE_COMPACTION = FIXTURES / "pi-mono" / "before-compaction.jsonl"
CLAUDE_CODE = FIXTURES / "claude-code-viewer" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"


def read_pi_v3(path: Path) -> list[Entry]:
    return pi_transcript.read_pi_transcript(path).entries


def read_pi_v1(path: Path) -> list[Entry]:
    """Messages in file order; empty assistant turns and bash executions left out."""
    entries: list[Entry] = []
    for number, line in enumerate(Path(path).read_text("utf-8").splitlines()):
        record = json.loads(line)
        if record.get("type") != "message":
            continue
        message = record["message"]
        if message["role"] not in ("user", "assistant", "toolResult"):
            continue
        if message["role"] == "assistant" and not message.get("content"):
            continue
        parent = entries[-1].id if entries else None
        entries.append(pi_transcript._entry({**record, "id": f"m{number}"}, parent))
    return entries


def close_open_calls(entries: list[Entry]) -> list[Entry]:
    """The entries with an error result added for each call that was never answered
    (aborted turns), right after its call's results, as the store requires."""
    answered = {r.tool_call_id for e in entries for r in e.tool_results}
    closed: list[Entry] = []
    pending: list[Entry] = []
    for entry in entries:
        if pending and entry.role is not Role.TOOL:
            closed.extend(pending)
            pending = []
        closed.append(entry)
        pending.extend(
            Entry(
                f"{c.id}-aborted",
                entry.id,
                entry.timestamp,
                Role.TOOL,
                (ToolResult(c.id, "aborted", True),),
                token_count=2,
            )
            for c in entry.tool_calls
            if c.id not in answered
        )
    return closed + pending


def read_claude_code(path: Path) -> list[Entry]:
    entries: list[Entry] = []
    for line in Path(path).read_text("utf-8").splitlines():
        record = json.loads(line)
        if record.get("type") not in ("user", "assistant"):
            continue
        content = record["message"]["content"]
        blocks: list[Block] = []
        role = Role.ASSISTANT if record["type"] == "assistant" else Role.USER
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            blocks.append(_claude_block(block))
        if any(isinstance(b, ToolResult) for b in blocks):
            role = Role.TOOL
        chars = sum(len(_text(b)) for b in blocks)
        entries.append(
            Entry(
                record["uuid"],
                record.get("parentUuid"),
                datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00")),
                role,
                tuple(blocks),
                metadata=MappingProxyType({}),
                token_count=math.ceil(chars / 4),
                tokenizer="chars/4",
            )
        )
    return entries


def _claude_block(block: dict[str, Any]) -> Block:
    match block["type"]:
        case "text":
            return TextBlock(block["text"])
        case "thinking":
            return ThinkingBlock(block["thinking"], block.get("signature", ""))
        case "tool_use":
            return ToolCall(block["id"], block["name"], json.dumps(block.get("input", {})))
        case "tool_result":
            content = block.get("content", "")
            if not isinstance(content, str):
                content = "\n".join(c.get("text", "") for c in content)
            return ToolResult(block["tool_use_id"], content, bool(block.get("is_error")))
    raise ValueError(f"block type {block['type']!r} is not converted")


def _text(block: Block) -> str:
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
