"""Anthropic Messages: a top-level ``system`` and alternating user and assistant turns.

System entries join the top-level system blocks. Consecutive turns of one role
merge (the API wants strict alternation), and a view that would open with the
assistant's turn gets a user turn first. Thinking goes back only with its
signature. Anthropic provider items (``thinking``, ``redacted_thinking``,
``compaction``, documents, and images inside tool results) go back byte for
byte; a compaction the provider made is shown as its ``compaction`` block, and
the API reads nothing before it (a signed block, compacted on demand, opens the
messages, with no user turn before it).
"""

from __future__ import annotations

import json
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
    ToolCall,
    ToolResult,
    provider_item_object,
    stand_ins,
)
from domain.system_prompt import SystemPrompt, Tool
from domain.tool_call_ids import view_call_id
from projections.formats.base import (
    LEADING_USER_TEXT,
    Assembled,
    Omitted,
    Piece,
    Shown,
    carrying_summary,
    compaction_item_omitted,
    data_uri,
    dumps,
    json_array,
    omitted,
    summary_text,
)
from projections.session_history import PromptView
from projections.view_repair import NOTHING, Repair, Step

NAME = "anthropic"
# The tag of a signed compaction block: the assistant's, and first in the messages.
_LEADING_BLOCK = "leading_compaction"
_TOOL = Role.TOOL
_ROLES = {
    Role.SYSTEM: "system",
    Role.USER: "user",
    Role.TOOL: "user",
    Role.ASSISTANT: "assistant",
}


class AnthropicMessages:
    name = NAME
    provider = "anthropic"
    joins_entry = True
    names_calls = False

    def entry(self, entry: Entry, view: PromptView, step: Step) -> Shown:
        role = _ROLES.get(entry.role)
        if role is None:
            return Shown()
        is_tool = entry.role is _TOOL
        left_out: list[Omitted] = []
        rewritten: list[Repair] = []
        blocks: list[str] = []  # all of one turn: one piece
        items = stand_ins(entry, NAME)
        for index, block in enumerate(entry.content):
            match block:
                case TextBlock(text=text):
                    if text.strip():
                        blocks.append(dumps(_text(text)))
                case ThinkingBlock(thinking=thinking, signature=signature):
                    if signature and role == "assistant":
                        value = {"type": "thinking", "thinking": thinking, "signature": signature}
                        blocks.append(dumps(value))
                    else:
                        # Unsigned thinking cannot be sent back; it stays in the log.
                        left_out.append(
                            omitted(entry, index, block, NAME, "thinking without a signature")
                        )
                case ToolCall(id=call_id, name=name, arguments_json=arguments):
                    item = items.get(call_id)
                    if item is not None:
                        blocks.append(item.json)
                        continue
                    shown_id = view_call_id(call_id, NAME)
                    if shown_id != call_id:
                        rewritten.append(Repair("call_id_rewritten", entry.id, call_id, shown_id))
                    value = {
                        "type": "tool_use",
                        "id": shown_id,
                        "name": name,
                        "input": json.loads(arguments),
                    }
                    blocks.append(dumps(value))
                case ToolResult():
                    if block.tool_call_id not in step.dropped:
                        blocks.append(_result(entry, view, index))
                case ProviderItem() | ImageRef() if is_tool:
                    continue  # inside its result (see _result)
                case ProviderItem(provider=provider, json=text):
                    if provider != NAME:
                        left_out.append(omitted(entry, index, block, NAME))
                    elif block not in items.values():
                        blocks.append(text)
                case ImageRef(uri=uri, media_type=media_type):
                    if role == "user":
                        image = {"type": "image", "source": _image_source(uri, media_type)}
                        blocks.append(dumps(image))
                    else:
                        left_out.append(omitted(entry, index, block, NAME))
        if is_tool:
            left_out.extend(_left_out_of_results(entry, step))
        pieces = ((role, ",".join(blocks), None),) if blocks else ()
        return Shown(pieces, tuple(left_out), tuple(rewritten))

    def summary(self, compaction: Compaction, view: PromptView) -> Shown:
        item = compaction.provider_item
        if item is not None and item.provider == NAME:
            # The provider's own compaction block, in the assistant's turn as it came. A
            # signed one (compacted on demand) must lead the messages: no turn before it.
            signed = "signature" in provider_item_object(item)
            return Shown(((_LEADING_BLOCK if signed else "assistant", item.json, None),))
        carrying = carrying_summary(compaction)
        if carrying is not None:
            shown = self.entry(carrying, view, NOTHING)
            return shown._replace(
                omitted=(*shown.omitted, *compaction_item_omitted(compaction, NAME))
            )
        return Shown(
            (("user", dumps(_text(summary_text(compaction.summary))), None),),
            compaction_item_omitted(compaction, NAME),
        )

    def assemble(self, system_prompt: SystemPrompt, pieces: Sequence[Piece]) -> Assembled:
        system: list[str] = []
        text = system_prompt.rendered_text()
        if text:
            system.append(dumps(_text(text)))
        turns: list[tuple[str, list[str]]] = []
        led_by_block = False
        for role, fragment, _ in pieces:
            if role == "system":
                system.append(fragment)
                continue
            if role == _LEADING_BLOCK:
                role, led_by_block = "assistant", not turns
            if turns and turns[-1][0] == role:
                turns[-1][1].append(fragment)
            else:
                turns.append((role, [fragment]))
        repairs: tuple[Repair, ...] = ()
        if turns and turns[0][0] == "assistant" and not led_by_block:
            turns.insert(0, ("user", [dumps(_text(LEADING_USER_TEXT))]))
            repairs = (Repair("leading_user_turn", detail="the view opened with the assistant"),)
        messages = ",".join(
            f'{{"role":"{role}","content":[{",".join(blocks)}]}}' for role, blocks in turns
        )
        return Assembled(f"[{messages}]", f"[{','.join(system)}]" if system else "", (), repairs)

    def tool(self, tool: Tool) -> dict[str, Any]:
        return {
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.parameters(),
        }

    def tools(self, tools: Sequence[Tool]) -> str:
        return dumps([self.tool(t) for t in tools])


def _result(entry: Entry, view: PromptView, index: int) -> str:
    """The tool_result block of the result at ``index``, with the images and Anthropic
    items that follow it inside its content."""
    result = entry.content[index]
    assert isinstance(result, ToolResult)
    shown = view.shown_result(entry.id, result)
    inside: list[str] = []
    for block in entry.content[index + 1 :]:
        if isinstance(block, ToolResult):
            break
        if isinstance(block, ImageRef):
            value = {"type": "image", "source": _image_source(block.uri, block.media_type)}
            inside.append(dumps(value))
        elif isinstance(block, ProviderItem) and block.provider == NAME:
            inside.append(block.json)
    # Written out: the keys never change, and this runs for every result first shown.
    call_id = dumps(view_call_id(result.tool_call_id, NAME))
    if inside:
        text = [dumps(_text(shown))] if shown.strip() else []
        content = json_array([*text, *inside])
    else:
        content = dumps(shown)
    error = ',"is_error":true' if result.is_error else ""
    return f'{{"type":"tool_result","tool_use_id":{call_id},"content":{content}{error}}}'


def _left_out_of_results(entry: Entry, step: Step) -> list[Omitted]:
    """Blocks of a tool entry no result of this view carries: other providers' items,
    and whatever belongs to a result the pairing left out."""
    left_out: list[Omitted] = []
    dropping = False
    for index, block in enumerate(entry.content):
        if isinstance(block, ToolResult):
            dropping = block.tool_call_id in step.dropped
        elif dropping:
            left_out.append(omitted(entry, index, block, NAME, "its tool result is left out"))
        elif isinstance(block, ProviderItem) and block.provider != NAME:
            left_out.append(omitted(entry, index, block, NAME))
    return left_out


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _image_source(uri: str, media_type: str) -> dict[str, Any]:
    data = data_uri(uri, media_type)
    if data is not None:
        return {"type": "base64", "media_type": data[0], "data": data[1]}
    return {"type": "url", "url": uri}
