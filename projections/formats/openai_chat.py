"""OpenAI chat completions messages (which litellm takes as they are).

The stored system prompt is the first message; system entries are system
messages where they stand. Tool calls ride on the assistant message and each
result is a ``tool`` message. The format carries no thinking and no provider
items, and a ``tool`` message holds text only: those are left out and listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from domain.compaction import Compaction
from domain.content import (
    Entry,
    ImageRef,
    Role,
    TextBlock,
    ToolCall,
    ToolResult,
)
from domain.system_prompt import SystemPrompt, Tool
from domain.tool_call_ids import view_call_id
from projections.formats.base import (
    Assembled,
    Omitted,
    Piece,
    Shown,
    carrying_summary,
    compaction_item_omitted,
    dumps,
    joined_text,
    omitted,
    summary_text,
)
from projections.session_history import PromptView
from projections.view_repair import Repair, Step

NAME = "openai"
# Read from module names: enum members looked up on their class cost more, per entry.
_USER, _ASSISTANT, _TOOL, _SYSTEM = Role.USER, Role.ASSISTANT, Role.TOOL, Role.SYSTEM


class OpenAIChat:
    name = NAME
    provider = ""
    joins_entry = True
    names_calls = False

    def entry(self, entry: Entry, view: PromptView, step: Step) -> Shown:
        messages, left_out, rewritten = _messages(entry, view, step.dropped)
        if len(messages) == 1:  # most entries: one message
            return Shown((("", dumps(messages[0]), None),), left_out, rewritten)
        return Shown(tuple(("", dumps(m), None) for m in messages), left_out, rewritten)

    def summary(self, compaction: Compaction, view: PromptView) -> Shown:
        carrying = carrying_summary(compaction)
        if carrying is not None:
            messages, left_out, _ = _messages(carrying, view, frozenset())
            left_out += compaction_item_omitted(compaction, NAME)
            return Shown(tuple(("user", dumps(m), None) for m in messages), left_out)
        message = {"role": "user", "content": summary_text(compaction.summary)}
        return Shown((("user", dumps(message), None),), compaction_item_omitted(compaction, NAME))

    def assemble(self, system_prompt: SystemPrompt, pieces: Sequence[Piece]) -> Assembled:
        parts = [piece[1] for piece in pieces]
        text = system_prompt.rendered_text()
        if text:
            parts.insert(0, dumps({"role": "system", "content": text}))
        return Assembled(f"[{','.join(parts)}]", "")

    def tool(self, tool: Tool) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters(),
            },
        }

    def tools(self, tools: Sequence[Tool]) -> str:
        return dumps([self.tool(t) for t in tools])


def _messages(
    entry: Entry, view: PromptView, dropped: frozenset[str]
) -> tuple[list[dict[str, Any]], tuple[Omitted, ...], tuple[Repair, ...]]:
    # One pass over the blocks: this runs for every entry a view first shows.
    role = entry.role
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    left_out: list[Omitted] = []
    images = False
    for index, block in enumerate(entry.content):
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolCall):
            calls.append(block)
        elif isinstance(block, ToolResult):
            results.append(block)
        elif isinstance(block, ImageRef) and role is _USER:
            images = True
        else:  # thinking, provider items, images where a message holds text only
            left_out.append(omitted(entry, index, block, NAME))
    text = "\n".join(texts)
    messages: list[dict[str, Any]] = []
    rewritten: list[Repair] = []
    if role is _USER:
        content = _user_content(entry) if images or left_out else text
        if content:
            messages.append({"role": "user", "content": content})
    elif role is _ASSISTANT:
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            shown = [view_call_id(call.id, NAME) for call in calls]
            message["tool_calls"] = [
                {
                    "id": shown_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                }
                for call, shown_id in zip(calls, shown, strict=True)
            ]
            rewritten = [
                Repair("call_id_rewritten", entry.id, call.id, shown_id)
                for call, shown_id in zip(calls, shown, strict=True)
                if shown_id != call.id
            ]
        if calls or text:
            messages.append(message)  # else only what this format cannot carry
    elif role is _TOOL:
        messages = [
            {
                "role": "tool",
                "tool_call_id": view_call_id(result.tool_call_id, NAME),
                "content": view.shown_result(entry.id, result),
            }
            for result in results
            if result.tool_call_id not in dropped
        ]
    elif role is _SYSTEM:
        messages.append({"role": "system", "content": text})
    return messages, tuple(left_out), tuple(rewritten)


def _user_content(entry: Entry) -> str | list[dict[str, Any]]:
    if all(isinstance(b, TextBlock) for b in entry.content):
        return joined_text(entry)
    parts: list[dict[str, Any]] = []
    for block in entry.content:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageRef):
            parts.append({"type": "image_url", "image_url": {"url": block.uri}})
    return parts
