"""OpenAI Responses input items as entries, and back.

Each item is one entry, but for function calls made together (parallel tool
calls), which are one assistant entry as the store wants them: nothing but their
results may follow a call. An entry's role and content blocks say what the store
needs to manage the context (tokens, tool calls and their results, thinking);
the items themselves, exactly as given, travel in the entry's metadata, so what
goes in comes back equal (ids, statuses, annotations, ``encrypted_content``, item
types the store has no block for). A reasoning item is an OpenAI provider item
too, so the store's own Responses view carries it back byte for byte. The
metadata is sealed with the entry's content, so an erasure takes it too.

Coming back, a tool result shows what the prompt view shows of it (the guard or a
prune may have cut it); entries written by other clients, without an item, are
turned into the plain items their blocks make.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sessionstore_client._call_ids import runtime_call_id
from sessionstore_client.types import (
    ContentBlock,
    Entry,
    ImageBlock,
    ProviderItem,
    Role,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

ITEM_KEY = "openai.responses.item"
_MESSAGE_ROLES = {
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
    "system": Role.SYSTEM,
    "developer": Role.SYSTEM,
}
# What the store keeps of a message that says nothing (as the LangGraph saver does).
EMPTY_MESSAGE = "(empty message)"
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text")

Item = dict[str, Any]


def items_entries(items: Sequence[Mapping[str, Any]]) -> list[Entry]:
    """The entries that keep ``items``, in order."""
    groups: list[list[Mapping[str, Any]]] = []
    for item in items:
        calls = item.get("type") == "function_call"
        if calls and groups and groups[-1][-1].get("type") == "function_call":
            groups[-1].append(item)
        else:
            groups.append([item])
    return [_entry(group) for group in groups]


def _entry(items: Sequence[Mapping[str, Any]]) -> Entry:
    kept = _dumps(list(items))
    if len(items) > 1:  # function calls made together
        calls = [_call(item) for item in items]
        return Entry(role=Role.ASSISTANT, content=list(calls), metadata={ITEM_KEY: kept})
    item = items[0]
    kind = item.get("type") or ("message" if "role" in item else "")
    role, content, custom_type = Role.CUSTOM, [], f"openai.{kind or 'item'}"
    if kind == "message" and item.get("role") in _MESSAGE_ROLES:
        role, content, custom_type = _MESSAGE_ROLES[item["role"]], _said(_blocks(item)), ""
    elif kind == "function_call":
        role, content, custom_type = Role.ASSISTANT, [_call(item)], ""
    elif kind == "function_call_output":
        output = item.get("output")
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        role, content, custom_type = Role.TOOL, [ToolResultBlock(str(item["call_id"]), text)], ""
    elif kind == "reasoning":
        # OpenAI's own item, kept verbatim: the store's Responses view carries it back,
        # the other providers' views leave it out (its encrypted_content is no
        # signature another provider could check).
        reasoning = ProviderItem("openai", "reasoning", _dumps(item))
        role, content, custom_type = Role.ASSISTANT, [reasoning], ""
    else:
        # Any other item (a compaction, a hosted tool's call): a note of the runtime's,
        # its text counted as the store counts any.
        content = [TextBlock(_dumps(item))]
    return Entry(role=role, content=content, custom_type=custom_type, metadata={ITEM_KEY: kept})


def _call(item: Mapping[str, Any]) -> ToolCallBlock:
    arguments = str(item.get("arguments") or "")
    # The store keeps arguments as a JSON object; the item keeps them as they came.
    return ToolCallBlock(
        str(item["call_id"]), str(item["name"]), arguments if _is_object(arguments) else "{}"
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def entry_items(entry: Entry, shown_results: Mapping[str, str]) -> list[Item]:
    """The items of an entry, its tool results as ``shown_results`` (call id -> text as
    the prompt view shows it) has them."""
    kept = entry.metadata.get(ITEM_KEY)
    if kept is None:
        return _plain_items(entry, shown_results)
    items: list[Item] = json.loads(kept)
    # The results the entry holds, by the call id the runtime gave (a late one, kept as a
    # note, holds none: its call shows another answer).
    stored = {
        runtime_call_id(b.tool_call_id): b for b in entry.content if isinstance(b, ToolResultBlock)
    }
    for item in items:
        result = stored.get(str(item.get("call_id", "")))
        if item.get("type") != "function_call_output" or result is None:
            continue
        shown = shown_results.get(result.tool_call_id)
        if shown not in (None, result.content):
            item["output"] = shown  # cut by the guard or a prune
    return items


def _plain_items(entry: Entry, shown_results: Mapping[str, str]) -> list[Item]:
    text = "\n".join(b.text for b in entry.content if isinstance(b, TextBlock))
    match entry.role:
        case Role.USER | Role.SYSTEM:
            return [{"role": entry.role.name.lower(), "content": text}]
        case Role.ASSISTANT:
            items: list[Item] = [{"role": "assistant", "content": text}] if text else []
            items += [
                {
                    "type": "function_call",
                    "call_id": b.id,
                    "name": b.name,
                    "arguments": b.arguments_json,
                }
                for b in entry.content
                if isinstance(b, ToolCallBlock)
            ]
            return items
        case Role.TOOL:
            return [
                {
                    "type": "function_call_output",
                    "call_id": b.tool_call_id,
                    "output": shown_results.get(b.tool_call_id, b.content),
                }
                for b in entry.content
                if isinstance(b, ToolResultBlock)
            ]
    return []  # the runtime's own notes are not sent


def _blocks(item: Mapping[str, Any]) -> list[ContentBlock]:
    content = item.get("content")
    if isinstance(content, str):
        return [TextBlock(content)]
    blocks: list[ContentBlock] = []
    for part in content if isinstance(content, Sequence) else ():
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in _TEXT_PARTS:
            blocks.append(TextBlock(str(part.get("text", ""))))
        elif kind == "refusal":
            blocks.append(TextBlock(str(part.get("refusal", ""))))
        elif kind == "input_image":
            uri = part.get("image_url") or part.get("file_id") or ""
            blocks.append(ImageBlock(str(uri)))
        else:  # a file, audio: counted by its text
            blocks.append(TextBlock(json.dumps(part, ensure_ascii=False)))
    return blocks


def _said(blocks: list[ContentBlock]) -> list[ContentBlock]:
    """The blocks, or a placeholder when they say nothing (an empty input, which the
    runner sends as it was given): the store wants some text, and the item, kept as it
    came, comes back as it was."""
    if any(not isinstance(b, TextBlock) or b.text.strip() for b in blocks):
        return blocks
    return [TextBlock(EMPTY_MESSAGE)]


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False
