"""Rendering a prompt view in the providers' own message formats.

OpenAI chat completions (which litellm takes as it is) and Anthropic Messages.
Pruned tool results are shown as their decision says; everything else is
shown as stored. Custom entries are the runtime's own notes and are not sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

from domain.content import (
    Entry,
    ImageRef,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
)
from domain.pruning import PruneDecision
from projections.session_history import PromptView

SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
)


@dataclass(frozen=True)
class RenderedPrompt:
    messages_json: str
    # Anthropic only: the top-level system blocks.
    system_json: str
    estimated_tokens: int


class PromptRenderer:
    """Renders one session's prompt views, reusing each entry's JSON between renders.

    An entry never changes; only the prune decision it is shown under can. So
    its JSON is made once per format and decision, and a render is a join:
    the warm prompt view of a long session, and a replay at any version, cost
    little more than copying the text.
    """

    def __init__(self) -> None:
        # Entry id -> (decision it was rendered under, JSON of its messages).
        self._openai: dict[str, tuple[PruneDecision | None, str]] = {}
        # Entry id -> (decision, role it joins, JSON of its content blocks).
        self._anthropic: dict[str, tuple[PruneDecision | None, str, str]] = {}
        # Characters held, for the cache that keeps renderers.
        self.weight = 0
        # Format -> (version, rendering): a version's view never changes.
        self._latest: dict[str, tuple[int, RenderedPrompt]] = {}

    def render(self, view: PromptView, provider_format: str) -> RenderedPrompt:
        """The view as JSON ready to send: ``provider_format`` is "openai" or "anthropic"."""
        latest = self._latest.get(provider_format)
        if latest is not None and latest[0] == view.log.version:
            return latest[1]
        if provider_format == "anthropic":
            rendered = self._render_anthropic(view)
        else:
            rendered = self._render_openai(view)
        if latest is not None:
            self.weight -= len(latest[1].messages_json)
        self._latest[provider_format] = (view.log.version, rendered)
        self.weight += len(rendered.messages_json)
        return rendered

    def _render_openai(self, view: PromptView) -> RenderedPrompt:
        parts: list[str] = []
        for entry in view.log.pinned:
            parts.extend(_dumps(m) for m in openai_messages(entry, None))
        if view.log.compaction:
            summary = summary_text(view.log.compaction.compaction.summary)
            parts.append(_dumps({"role": "user", "content": summary}))
        for entry in view.log.entries:
            decision = view.pruned.get(entry.id)
            cached = self._openai.get(entry.id)
            if cached is not None and cached[0] == decision:
                fragment = cached[1]
            else:
                fragment = ",".join(_dumps(m) for m in openai_messages(entry, decision))
                self._openai[entry.id] = (decision, fragment)
                self.weight += len(fragment)
            if fragment:
                parts.append(fragment)
        return RenderedPrompt(f"[{','.join(parts)}]", "", view.estimated_tokens)

    def _render_anthropic(self, view: PromptView) -> RenderedPrompt:
        system: list[str] = []
        messages: list[str] = []
        role, blocks = "", list[str]()

        def add(next_role: str, fragment: str) -> None:
            nonlocal role, blocks
            if next_role != role:
                # The API wants strict alternation: consecutive turns of one role merge.
                if blocks:
                    messages.append(f'{{"role":"{role}","content":[{",".join(blocks)}]}}')
                role, blocks = next_role, []
            blocks.append(fragment)

        system.extend(
            ",".join(_dumps(b) for b in anthropic_blocks(entry, None)) for entry in view.log.pinned
        )
        if view.log.compaction:
            summary = summary_text(view.log.compaction.compaction.summary)
            add("user", _dumps(_text(summary)))
        for entry in view.log.entries:
            decision = view.pruned.get(entry.id)
            cached = self._anthropic.get(entry.id)
            if cached is None or cached[0] != decision:
                fragment = ",".join(_dumps(b) for b in anthropic_blocks(entry, decision))
                cached = (decision, _ANTHROPIC_ROLES.get(entry.role, ""), fragment)
                self._anthropic[entry.id] = cached
                self.weight += len(fragment)
            _, entry_role, fragment = cached
            if not fragment or not entry_role:
                continue
            if entry_role == "system":
                system.append(fragment)
            else:
                add(entry_role, fragment)
        add("", "")  # flush the last message
        system_json = f"[{','.join(system)}]" if system else ""
        return RenderedPrompt(f"[{','.join(messages)}]", system_json, view.estimated_tokens)


_ANTHROPIC_ROLES = {
    Role.SYSTEM: "system",
    Role.USER: "user",
    Role.TOOL: "user",
    Role.ASSISTANT: "assistant",
}


def _dumps(value: Any) -> str:
    # orjson: several times faster than json on the first render of a long session.
    return orjson.dumps(value).decode()


def render(view: PromptView, provider_format: str) -> RenderedPrompt:
    """Renders a view once, without keeping anything for later renders."""
    return PromptRenderer().render(view, provider_format)


def summary_text(summary: str) -> str:
    return f"{SUMMARY_PREFIX}\n\n<summary>\n{summary}\n</summary>"


def shown_result(result: ToolResult, decision: PruneDecision | None) -> str:
    return decision.apply(result.content) if decision else result.content


# -- OpenAI chat completions --------------------------------------------------------


def to_openai(view: PromptView) -> list[dict[str, Any]]:
    """The OpenAI messages as Python values, for inspection."""
    messages: list[dict[str, Any]] = json.loads(render(view, "openai").messages_json)
    return messages


def openai_messages(entry: Entry, decision: PruneDecision | None) -> list[dict[str, Any]]:
    match entry.role:
        case Role.SYSTEM:
            return [{"role": "system", "content": _joined_text(entry)}]
        case Role.USER:
            return [{"role": "user", "content": _openai_user_content(entry)}]
        case Role.ASSISTANT:
            message: dict[str, Any] = {"role": "assistant", "content": _joined_text(entry) or None}
            calls = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                }
                for call in entry.tool_calls
            ]
            if calls:
                message["tool_calls"] = calls
            elif message["content"] is None:
                return []  # only thinking, which this format cannot carry
            return [message]
        case Role.TOOL:
            return [
                {
                    "role": "tool",
                    "tool_call_id": result.tool_call_id,
                    "content": shown_result(result, decision),
                }
                for result in entry.tool_results
            ]
    return []


def _openai_user_content(entry: Entry) -> str | list[dict[str, Any]]:
    if all(isinstance(b, TextBlock) for b in entry.content):
        return _joined_text(entry)
    parts: list[dict[str, Any]] = []
    for block in entry.content:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageRef):
            parts.append({"type": "image_url", "image_url": {"url": block.uri}})
    return parts


def _joined_text(entry: Entry) -> str:
    return "\n".join(b.text for b in entry.content if isinstance(b, TextBlock))


# -- Anthropic Messages ---------------------------------------------------------------


def to_anthropic(view: PromptView) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The top-level system blocks and the alternating messages, for inspection."""
    rendered = render(view, "anthropic")
    system = json.loads(rendered.system_json) if rendered.system_json else []
    return system, json.loads(rendered.messages_json)


def anthropic_blocks(entry: Entry, decision: PruneDecision | None) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in entry.content:
        match block:
            case TextBlock(text=text) if text.strip():
                blocks.append(_text(text))
            case ThinkingBlock(thinking=thinking, signature=signature) if signature:
                # Unsigned thinking cannot be sent back to the API; it stays in the log.
                blocks.append({"type": "thinking", "thinking": thinking, "signature": signature})
            case ToolCall(id=call_id, name=name, arguments_json=arguments):
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call_id,
                        "name": name,
                        "input": json.loads(arguments),
                    }
                )
            case ToolResult(tool_call_id=call_id, is_error=is_error):
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": shown_result(block, decision),
                }
                if is_error:
                    result["is_error"] = True
                blocks.append(result)
            case ImageRef(uri=uri, media_type=media_type):
                blocks.append({"type": "image", "source": _image_source(uri, media_type)})
    return blocks


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _image_source(uri: str, media_type: str) -> dict[str, Any]:
    if uri.startswith("data:") and ";base64," in uri:
        header, data = uri[5:].split(";base64,", 1)
        return {"type": "base64", "media_type": media_type or header, "data": data}
    return {"type": "url", "url": uri}
