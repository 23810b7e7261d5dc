"""Tool call ids the store has already seen, given again.

The store keeps a tool call id for good, even one whose entry was retracted or
cleared, so a runtime that sends a call again (an item added back after a pop, a
conversation replayed from an earlier checkpoint, a model reusing ids in a later
turn) has it stored under an id of its own: the call's id with a suffix. Its
result then answers that id, found among the session's open calls by the id the
runtime gives.

A result whose call is no longer open (abandoned when the conversation went on
without it, or answered already: an ADK long-running tool's final response after
its "pending" one) is kept as a note of the runtime's: in the log, with the
runtime's own record in its metadata, but not in the prompt, where its call has
its answer already.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import replace

from sessionstore_client.types import (
    ContentBlock,
    Entry,
    PromptView,
    Role,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

# Between the runtime's call id and the suffix that makes the store's unique.
SEPARATOR = "~"
# The custom type of a result that came after its call was closed.
LATE_RESULT = "late_tool_result"


def runtime_call_id(stored: str) -> str:
    """The id the runtime gave a call stored under ``stored``."""
    return stored.split(SEPARATOR, 1)[0]


def shown_results(view: PromptView) -> dict[str, str]:
    """The tool results of an OpenAI prompt view, as it shows them (the guard or a prune
    may have cut them), by the id of the call they answer as stored: the view shows an
    id OpenAI would refuse rewritten, and its repairs say whose it is."""
    messages = json.loads(view.messages_json)
    stored = {r.view_tool_call_id: r.tool_call_id for r in view.repairs}
    return {
        stored.get(m["tool_call_id"], m["tool_call_id"]): m["content"]
        for m in messages
        if m.get("role") == "tool"
    }


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


def with_late_results_as_notes(
    entries: Sequence[Entry], open_call_ids: Sequence[str]
) -> list[Entry]:
    """The entries with each result answering no open call (nor one made before it among
    the entries) kept as a note instead; a tool entry with other results keeps those."""
    answerable = set(open_call_ids)
    out = []
    for entry in entries:
        answerable |= {b.id for b in entry.content if isinstance(b, ToolCallBlock)}
        late = [
            b
            for b in entry.content
            if isinstance(b, ToolResultBlock) and b.tool_call_id not in answerable
        ]
        answerable -= {b.tool_call_id for b in entry.content if isinstance(b, ToolResultBlock)}
        if late and entry.role is Role.TOOL:
            entry = _without_late(entry, late)
        out.append(entry)
    return out


def _without_late(entry: Entry, late: list[ToolResultBlock]) -> Entry:
    kept = [b for b in entry.content if b not in late]
    if any(isinstance(b, ToolResultBlock) for b in kept):
        return replace(entry, content=kept)
    text = "\n".join(
        f"result of tool call {b.tool_call_id}, which was closed before it came: {b.content}"
        for b in late
    )
    return replace(entry, role=Role.CUSTOM, custom_type=LATE_RESULT, content=[TextBlock(text)])


def blocked_at(entries: Sequence[Entry], open_call_ids: Sequence[str]) -> int:
    """The index of the first entry that calls still open come before (the store takes
    nothing but results, and notes, after a call): len(entries) when none does."""
    waiting = {c: runtime_call_id(c) for c in open_call_ids}
    for index, entry in enumerate(entries):
        if waiting and entry.role not in (Role.TOOL, Role.CUSTOM):
            return index
        for block in entry.content:
            if isinstance(block, ToolCallBlock):
                waiting[block.id] = block.id
            elif isinstance(block, ToolResultBlock):
                answered = block.tool_call_id
                waiting = {c: r for c, r in waiting.items() if answered not in (c, r)}
    return len(entries)


def needs_new_call_ids(message: str) -> bool:
    """Whether a refusal (ALREADY_EXISTS) is for a tool call id the store has seen."""
    return "tool call id" in message


def needs_open_call_ids(message: str) -> bool:
    """Whether a refusal (FAILED_PRECONDITION) is for a result whose call is not open."""
    return "not open" in message
