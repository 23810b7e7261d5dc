"""OpenAI Responses input items.

The stored system prompt is the request's ``instructions`` (the view's
system_json, a JSON string); system entries are system messages where they
stand. Each tool call is a ``function_call`` item and each result a
``function_call_output``, whose output holds images and files beside the text.
OpenAI provider items (``reasoning`` with its ``encrypted_content``,
``compaction``, hosted tools' calls) go back byte for byte; in a user entry
they are content parts (``input_file``). A reasoning item must be followed by
what it reasoned about: one with nothing of its turn after it in the view is
left out (the API would refuse it) and listed.
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
    ToolCall,
    stand_ins,
)
from domain.system_prompt import SystemPrompt, Tool
from domain.tool_call_ids import view_call_id
from projections.formats.base import (
    Assembled,
    Omitted,
    Piece,
    Shown,
    attached,
    carrying_summary,
    compaction_item_omitted,
    dumps,
    joined_text,
    json_array,
    json_object,
    omitted,
    summary_text,
)
from projections.session_history import PromptView
from projections.view_repair import Repair, Step

NAME = "openai-responses"
PROVIDER = "openai"
# What may follow a reasoning item: the items of the turn it reasoned about.
_TURN_OUTPUT = frozenset({"assistant", "call", "item", "reasoning"})


class OpenAIResponses:
    name = NAME
    provider = PROVIDER
    joins_entry = False
    names_calls = False

    def entry(self, entry: Entry, view: PromptView, step: Step) -> Shown:
        match entry.role:
            case Role.SYSTEM:
                message = {"role": "system", "content": joined_text(entry)}
                return Shown((("system", dumps(message), None),))
            case Role.USER:
                return _user(entry)
            case Role.ASSISTANT:
                return _assistant(entry)
            case Role.TOOL:
                return _results(entry, view, step)
        return Shown()

    def summary(self, compaction: Compaction, view: PromptView) -> Shown:
        item = compaction.provider_item
        if item is not None and item.provider == PROVIDER:
            # The window /responses/compact answered: the user messages it kept, the item.
            kept = [("user", message.json, None) for message in compaction.provider_retained]
            return Shown((*kept, ("compaction", item.json, None)))
        carrying = carrying_summary(compaction)
        if carrying is not None:
            shown = _user(carrying)
            return shown._replace(
                omitted=(*shown.omitted, *compaction_item_omitted(compaction, NAME))
            )
        message = {"role": "user", "content": summary_text(compaction.summary)}
        return Shown((("user", dumps(message), None),), compaction_item_omitted(compaction, NAME))

    def assemble(self, system_prompt: SystemPrompt, pieces: Sequence[Piece]) -> Assembled:
        kept: list[str] = []
        left_out: list[Omitted] = []
        following = ""  # the tag of the next piece kept
        for tag, fragment, origin in reversed(pieces):
            if tag == "reasoning" and following not in _TURN_OUTPUT:
                entry_id, block = origin or ("", -1)
                left_out.append(
                    Omitted(
                        entry_id,
                        block,
                        "provider_item",
                        PROVIDER,
                        "reasoning",
                        "nothing of the turn it reasoned about follows it in the view; the API "
                        "refuses a reasoning item without its following item",
                    )
                )
                continue
            kept.append(fragment)
            following = tag
        kept.reverse()
        left_out.reverse()
        text = system_prompt.rendered_text()
        return Assembled(json_array(kept), dumps(text) if text else "", tuple(left_out))

    def tool(self, tool: Tool) -> dict[str, Any]:
        return {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters(),
            "strict": False,
        }

    def tools(self, tools: Sequence[Tool]) -> str:
        return dumps([self.tool(t) for t in tools])


def _user(entry: Entry) -> Shown:
    if all(isinstance(b, TextBlock) for b in entry.content):
        message = {"role": "user", "content": joined_text(entry)}
        return Shown((("user", dumps(message), None),))
    parts: list[str] = []
    left_out: list[Omitted] = []
    for index, block in enumerate(entry.content):
        if isinstance(block, TextBlock):
            parts.append(dumps({"type": "input_text", "text": block.text}))
        elif isinstance(block, ImageRef):
            parts.append(dumps(_image(block)))
        elif isinstance(block, ProviderItem) and block.provider == PROVIDER:
            parts.append(block.json)
        else:
            left_out.append(omitted(entry, index, block, NAME))
    if not parts:
        return Shown((), tuple(left_out))
    content = json_object([("role", '"user"'), ("content", json_array(parts))])
    return Shown((("user", content, None),), tuple(left_out))


def _assistant(entry: Entry) -> Shown:
    pieces: list[Piece] = []
    left_out: list[Omitted] = []
    rewritten: list[Repair] = []
    texts: list[str] = []
    items = stand_ins(entry, PROVIDER)

    def flush() -> None:
        if texts:
            message = {"role": "assistant", "content": "\n".join(texts)}
            pieces.append(("assistant", dumps(message), None))
            texts.clear()

    for index, block in enumerate(entry.content):
        match block:
            case TextBlock(text=text):
                if text.strip():
                    texts.append(text)
            case ToolCall(id=call_id, name=name, arguments_json=arguments):
                flush()
                item = items.get(call_id)
                if item is not None:
                    pieces.append(("call", item.json, None))
                    continue
                shown_id = view_call_id(call_id, NAME)
                if shown_id != call_id:
                    rewritten.append(Repair("call_id_rewritten", entry.id, call_id, shown_id))
                value = {
                    "type": "function_call",
                    "call_id": shown_id,
                    "name": name,
                    "arguments": arguments,
                }
                pieces.append(("call", dumps(value), None))
            case ProviderItem(provider=provider, type=kind, json=text) if provider == PROVIDER:
                if block in items.values():
                    continue
                flush()
                tag = "reasoning" if kind == "reasoning" else "item"
                pieces.append((tag, text, (entry.id, index)))
            case ThinkingBlock() | ImageRef() | ProviderItem():
                left_out.append(omitted(entry, index, block, NAME))
    flush()
    return Shown(tuple(pieces), tuple(left_out), tuple(rewritten))


def _results(entry: Entry, view: PromptView, step: Step) -> Shown:
    pieces: list[Piece] = []
    left_out: list[Omitted] = []
    for result, extra in attached(entry):
        if result.tool_call_id in step.dropped:
            left_out.extend(
                omitted(entry, i, b, NAME, "its tool result is left out") for i, b in extra
            )
            continue
        shown = view.shown_result(entry.id, result)
        parts: list[str] = []
        for index, block in extra:
            if isinstance(block, ImageRef):
                parts.append(dumps(_image(block)))
            elif isinstance(block, ProviderItem) and block.provider == PROVIDER:
                parts.append(block.json)
            else:
                left_out.append(omitted(entry, index, block, NAME))
        output = (
            json_array([dumps({"type": "input_text", "text": shown}), *parts])
            if parts
            else dumps(shown)
        )
        fields = [
            ("type", '"function_call_output"'),
            ("call_id", dumps(view_call_id(result.tool_call_id, NAME))),
            ("output", output),
        ]
        pieces.append(("tool", json_object(fields), None))
    return Shown(tuple(pieces), tuple(left_out))


def _image(block: ImageRef) -> dict[str, Any]:
    return {"type": "input_image", "image_url": block.uri, "detail": "auto"}
