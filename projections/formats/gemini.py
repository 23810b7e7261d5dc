"""Google Gemini ``generateContent`` contents: alternating ``user`` and ``model`` turns.

The stored system prompt and the system entries make the ``systemInstruction``
(the view's system_json). A tool call is a ``functionCall`` part of the model's
turn; its result a ``functionResponse`` part of the next user turn, named after
the call, with its images as the response's own parts. Consecutive turns of one
role merge, and a view that would open with the model's turn gets a user turn
first. Gemini provider items are parts kept verbatim, their ``thoughtSignature``
with them; a ``functionCall`` part among them stands in for the call it is.
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
    attached,
    carrying_summary,
    compaction_item_omitted,
    data_uri,
    dumps,
    json_array,
    json_object,
    omitted,
    summary_text,
)
from projections.session_history import PromptView
from projections.view_repair import NOTHING, Repair, Step

NAME = "gemini"
_ROLES = {Role.SYSTEM: "system", Role.USER: "user", Role.TOOL: "user", Role.ASSISTANT: "model"}


class GeminiContents:
    name = NAME
    provider = "gemini"
    joins_entry = True
    names_calls = True

    def entry(self, entry: Entry, view: PromptView, step: Step) -> Shown:
        role = _ROLES.get(entry.role)
        if role is None:
            return Shown()
        if entry.role is Role.TOOL:
            return _responses(entry, view, step)
        pieces: list[Piece] = []
        left_out: list[Omitted] = []
        rewritten: list[Repair] = []
        items = stand_ins(entry, NAME)
        for index, block in enumerate(entry.content):
            match block:
                case TextBlock(text=text):
                    if text.strip():
                        pieces.append((role, dumps({"text": text}), None))
                case ImageRef() if role == "user":
                    pieces.append((role, dumps(_image(block)), None))
                case ToolCall(id=call_id, name=name, arguments_json=arguments):
                    item = items.get(call_id)
                    if item is not None:
                        pieces.append((role, item.json, None))
                        continue
                    shown_id = view_call_id(call_id, NAME)
                    if shown_id != call_id:
                        rewritten.append(Repair("call_id_rewritten", entry.id, call_id, shown_id))
                    call = {"id": shown_id, "name": name, "args": json.loads(arguments)}
                    pieces.append((role, dumps({"functionCall": call}), None))
                case ProviderItem(provider=provider, json=text) if provider == NAME:
                    if block not in items.values():
                        pieces.append((role, text, None))
                case ThinkingBlock() | ImageRef() | ProviderItem():
                    left_out.append(omitted(entry, index, block, NAME))
        return Shown(tuple(pieces), tuple(left_out), tuple(rewritten))

    def summary(self, compaction: Compaction, view: PromptView) -> Shown:
        carrying = carrying_summary(compaction)
        if carrying is not None:
            shown = self.entry(carrying, view, NOTHING)
            return shown._replace(
                omitted=(*shown.omitted, *compaction_item_omitted(compaction, NAME))
            )
        part = dumps({"text": summary_text(compaction.summary)})
        return Shown((("user", part, None),), compaction_item_omitted(compaction, NAME))

    def assemble(self, system_prompt: SystemPrompt, pieces: Sequence[Piece]) -> Assembled:
        system: list[str] = []
        text = system_prompt.rendered_text()
        if text:
            system.append(dumps({"text": text}))
        turns: list[tuple[str, list[str]]] = []
        for role, fragment, _ in pieces:
            if role == "system":
                system.append(fragment)
            elif turns and turns[-1][0] == role:
                turns[-1][1].append(fragment)
            else:
                turns.append((role, [fragment]))
        repairs: tuple[Repair, ...] = ()
        if turns and turns[0][0] == "model":
            turns.insert(0, ("user", [dumps({"text": LEADING_USER_TEXT})]))
            repairs = (Repair("leading_user_turn", detail="the view opened with the model"),)
        contents = ",".join(
            f'{{"role":"{role}","parts":[{",".join(parts)}]}}' for role, parts in turns
        )
        instruction = json_object([("parts", json_array(system))]) if system else ""
        return Assembled(f"[{contents}]", instruction, (), repairs)

    def tool(self, tool: Tool) -> dict[str, Any]:
        return {
            "name": tool.name,
            "description": tool.description,
            "parametersJsonSchema": tool.parameters(),
        }

    def tools(self, tools: Sequence[Tool]) -> str:
        if not tools:
            return "[]"
        return dumps([{"functionDeclarations": [self.tool(t) for t in tools]}])


def _responses(entry: Entry, view: PromptView, step: Step) -> Shown:
    pieces: list[Piece] = []
    left_out: list[Omitted] = []
    for result, extra in attached(entry):
        if result.tool_call_id in step.dropped:
            left_out.extend(
                omitted(entry, i, b, NAME, "its tool result is left out") for i, b in extra
            )
            continue
        pieces.append(("user", _response(entry, view, result, extra, step, left_out), None))
    return Shown(tuple(pieces), tuple(left_out))


def _response(
    entry: Entry,
    view: PromptView,
    result: ToolResult,
    extra: list[tuple[int, Any]],
    step: Step,
    left_out: list[Omitted],
) -> str:
    shown = view.shown_result(entry.id, result)
    key = "error" if result.is_error else "output"
    fields = [
        ("id", dumps(view_call_id(result.tool_call_id, NAME))),
        ("name", dumps(step.answered.get(result.tool_call_id, ""))),
        ("response", dumps({key: shown})),
    ]
    parts: list[str] = []
    for index, block in extra:
        if isinstance(block, ImageRef):
            parts.append(dumps(_image(block)))
        elif isinstance(block, ProviderItem) and block.provider == NAME:
            parts.append(block.json)
        else:
            left_out.append(omitted(entry, index, block, NAME))
    if parts:
        fields.append(("parts", json_array(parts)))
    return json_object([("functionResponse", json_object(fields))])


def _image(block: ImageRef) -> dict[str, Any]:
    data = data_uri(block.uri, block.media_type)
    if data is not None:
        return {"inlineData": {"mimeType": data[0], "data": data[1]}}
    reference: dict[str, Any] = {"fileUri": block.uri}
    if block.media_type:
        reference["mimeType"] = block.media_type
    return {"fileData": reference}
