"""Tool call ids the store has already seen, given again.

The store keeps a tool call id for good, even one whose entry was retracted or
cleared, so a runtime that sends a call again (an item added back after a pop, a
conversation replayed from an earlier checkpoint) has it stored under an id of
its own: the call's id with a suffix. Its result then answers that id, found
among the session's open calls by the id the runtime gives.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace

from sessionstore_client.types import ContentBlock, Entry, ToolCallBlock, ToolResultBlock

# Between the runtime's call id and the suffix that makes the store's unique.
SEPARATOR = "~"


def runtime_call_id(stored: str) -> str:
    """The id the runtime gave a call stored under ``stored``."""
    return stored.split(SEPARATOR, 1)[0]


def with_new_call_ids(entries: Sequence[Entry]) -> list[Entry]:
    """The entries with their tool calls (and the results among them that answer those
    calls) under ids never used."""
    renamed: dict[str, str] = {}
    out = []
    for entry in entries:
        content: list[ContentBlock] = []
        for block in entry.content:
            if isinstance(block, ToolCallBlock):
                renamed[block.id] = f"{block.id}{SEPARATOR}{uuid.uuid4().hex[:12]}"
                block = replace(block, id=renamed[block.id])
            elif isinstance(block, ToolResultBlock) and block.tool_call_id in renamed:
                block = replace(block, tool_call_id=renamed[block.tool_call_id])
            content.append(block)
        out.append(replace(entry, content=content))
    return out


def with_open_call_ids(entries: Sequence[Entry], open_call_ids: Sequence[str]) -> list[Entry]:
    """The entries with each result answering the open call its call id was stored under."""
    by_runtime = {runtime_call_id(c): c for c in open_call_ids if SEPARATOR in c}
    out = []
    for entry in entries:
        content: list[ContentBlock] = [
            replace(b, tool_call_id=by_runtime.get(b.tool_call_id, b.tool_call_id))
            if isinstance(b, ToolResultBlock)
            else b
            for b in entry.content
        ]
        out.append(replace(entry, content=content))
    return out


def needs_new_call_ids(message: str) -> bool:
    """Whether a refusal (ALREADY_EXISTS) is for a tool call id the store has seen."""
    return "tool call id" in message


def needs_open_call_ids(message: str) -> bool:
    """Whether a refusal (FAILED_PRECONDITION) is for a result whose call is not open."""
    return "not open" in message
