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
    ProviderItem,
    Role,
    TextBlock,
    ThinkingBlock,
)
from domain.system_prompt import SystemPrompt, Tool
from domain.tool_call_ids import view_call_id
from projections.formats.base import (
    Assembled,
    Omitted,
    Piece,
    Shown,
    attached,
    compaction_item_omitted,
    dumps,
    joined_text,
    omitted,
    summary_text,
)
from projections.session_history import PromptView
from projections.view_repair import Repair, Step

NAME = "openai"


class OpenAIChat:
    name = NAME
    provider = ""
    joins_entry = True
    names_calls = False

    def entry(self, entry: Entry, view: PromptView, step: Step) -> Shown:
        messages, left_out, rewritten = _messages(entry, view, step.dropped)
        return Shown(tuple((m["role"], dumps(m), None) for m in messages), left_out, rewritten)

    def summary(self, compaction: Compaction) -> Shown:
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
    left_out = tuple(
        omitted(entry, i, b, NAME)
        for i, b in enumerate(entry.content)
        if isinstance(b, ThinkingBlock | ProviderItem)
        or (isinstance(b, ImageRef) and entry.role is not Role.USER)
    )
    match entry.role:
        case Role.SYSTEM:
            return [{"role": "system", "content": joined_text(entry)}], left_out, ()
        case Role.USER:
            content = _user_content(entry)
            return ([{"role": "user", "content": content}] if content else []), left_out, ()
        case Role.ASSISTANT:
            message: dict[str, Any] = {"role": "assistant", "content": joined_text(entry) or None}
            calls = [
                {
                    "id": view_call_id(call.id, NAME),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                }
                for call in entry.tool_calls
            ]
            rewritten = tuple(
                Repair("call_id_rewritten", entry.id, call.id, str(shown["id"]))
                for call, shown in zip(entry.tool_calls, calls, strict=True)
                if shown["id"] != call.id
            )
            if calls:
                message["tool_calls"] = calls
            elif message["content"] is None:
                return [], left_out, ()  # only what this format cannot carry
            return [message], left_out, rewritten
        case Role.TOOL:
            return (
                [
                    {
                        "role": "tool",
                        "tool_call_id": view_call_id(result.tool_call_id, NAME),
                        "content": view.shown_result(entry.id, result),
                    }
                    for result, _ in attached(entry)
                    if result.tool_call_id not in dropped
                ],
                left_out,
                (),
            )
    return [], (), ()


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
