"""Rendering a prompt view in the providers' own message formats.

OpenAI chat completions (which litellm takes as it is) and Anthropic Messages.
The stored system prompt leads, with the tools in the provider's format.
Pruned and guarded tool results are shown as their decisions say; everything else is
shown as stored. Custom entries are the runtime's own notes and are not sent.
Tool calls that were abandoned are answered by the synthetic tool entry their
``ToolCallsAbandoned`` event holds (metadata ``synthetic``; its text says it is
synthetic): an OpenAI ``tool`` message, an Anthropic ``tool_result`` with
``is_error``, like any error result.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
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
from domain.system_prompt import Tool
from projections.session_history import PromptView

# Renderings that extend one another are joined at most this many deep.
MAX_UNJOINED = 64
SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
)


@dataclass(frozen=True, eq=False)
class RenderedPrompt:
    # The messages' JSON; empty while this rendering is ``_base``'s with ``_tail``
    # added before its closing bracket, joined on first use (messages_json).
    text: str
    # Anthropic only: the top-level system blocks.
    system_json: str
    estimated_tokens: int
    # The tools in the provider's format ("[]" when the client stored none).
    tools_json: str = "[]"
    # sha256 of the request's canonical JSON (see request_json).
    request_hash: str = ""
    provider_format: str = "openai"
    # Set when this rendering is the one with hash ``base_hash`` plus messages
    # appended at its end: those messages, as a JSON array.
    base_hash: str = ""
    appended_json: str = ""
    # Characters of messages_json, known without joining it.
    messages_chars: int = -1
    _base: RenderedPrompt | None = field(default=None, repr=False)
    _tail: str = ""
    _depth: int = 0

    @cached_property
    def messages_json(self) -> str:
        """The messages as a JSON array (joined from the renderings this one extends,
        once: a client that holds the view it extends is sent only what it appends)."""
        if self._base is None:
            return self.text
        tails: list[str] = []
        node: RenderedPrompt = self
        while node._base is not None and "messages_json" not in node.__dict__:
            tails.append(node._tail)
            node = node._base
        head = node.messages_json
        joined = head[:-1] + "".join(reversed(tails)) + "]"
        # Joined: the renderings it came from may go.
        object.__setattr__(self, "_base", None)
        return joined

    @property
    def length(self) -> int:
        return self.messages_chars if self.messages_chars >= 0 else len(self.messages_json)


def request_json(provider_format: str, messages: str, system: str, tools: str) -> str:
    """The whole request as one canonical JSON text, from the rendered parts.

    A client recomputes it from a prompt view's own fields, so it can check that
    what it sends is what the store recorded.
    """
    return (
        f'{{"format":"{provider_format}","system":{system or "null"},'
        f'"tools":{tools},"messages":{messages}}}'
    )


def appended_messages(base: RenderedPrompt, current: RenderedPrompt) -> str | None:
    """The messages ``current`` adds after ``base``, as a JSON array, when ``base`` is
    exactly its beginning (same system prompt and tools, every message unchanged);
    None when anything before the end changed (a compaction, a prune, a guard or
    system prompt change, or a merged Anthropic turn)."""
    if current.base_hash and current.base_hash == base.request_hash:
        return current.appended_json  # rendered as base plus these: nothing to compare
    if (base.system_json, base.tools_json) != (current.system_json, current.tools_json):
        return None
    head = base.messages_json[:-1]  # without the closing bracket
    rest = current.messages_json[len(head) :]
    if not current.messages_json.startswith(head):
        return None
    if head == "[":
        return current.messages_json
    if rest == "]":
        return "[]"
    # The prefix must end at a message boundary: the next message starts there.
    return "[" + rest[1:] if rest.startswith(",{") else None


def request_hash(provider_format: str, messages: str, system: str, tools: str) -> str:
    canonical = request_json(provider_format, messages, system, tools)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _open_request_hash(provider_format: str, messages: str, system: str, tools: str) -> Any:
    """sha256 fed with the canonical request up to the end of its last message (without
    the closing "]}"): what the next rendering with messages appended continues."""
    hasher = hashlib.sha256(
        f'{{"format":"{provider_format}","system":{system or "null"},"tools":{tools},'
        '"messages":'.encode()
    )
    hasher.update(messages[:-1].encode())
    return hasher


def _closed(hasher: Any) -> str:
    final = hasher.copy()
    final.update(b"]}")
    return str(final.hexdigest())


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
        # Format -> the rendering before the latest: what a client most likely holds.
        self._previous: dict[str, RenderedPrompt] = {}
        # OpenAI: the latest view rendered, its rendering and its open request hash
        # (one tuple, replaced whole: renders may run at once), so that a view that
        # only appends to it renders and hashes only what it appends.
        self._open: tuple[PromptView, RenderedPrompt, Any] | None = None

    def render(self, view: PromptView, provider_format: str) -> RenderedPrompt:
        """The view as JSON ready to send: ``provider_format`` is "openai" or "anthropic"."""
        latest = self._latest.get(provider_format)
        if latest is not None and latest[0] == view.log.version:
            return latest[1]
        if provider_format == "openai" and self._open is not None:
            extended = self._extend_openai(self._open, view)
            if extended is not None:
                self._keep(provider_format, view, extended)
                return extended
        if provider_format == "anthropic":
            messages, system = self._render_anthropic(view)
            tools = _dumps([anthropic_tool(t) for t in view.system_prompt.tools])
        else:
            messages, system = self._render_openai(view), ""
            tools = _dumps([openai_tool(t) for t in view.system_prompt.tools])
        if provider_format == "openai":
            opened = _open_request_hash(provider_format, messages, system, tools)
            digest = _closed(opened)
        else:
            digest = request_hash(provider_format, messages, system, tools)
        rendered = RenderedPrompt(
            messages, system, view.estimated_tokens, tools, digest, provider_format
        )
        if provider_format == "openai":
            self._open = (view, rendered, opened)
        self._keep(provider_format, view, rendered)
        return rendered

    def _keep(self, provider_format: str, view: PromptView, rendered: RenderedPrompt) -> None:
        latest = self._latest.get(provider_format)
        if latest is not None:
            previous = self._previous.get(provider_format)
            if previous is not None:
                self.weight -= previous.length
            self._previous[provider_format] = latest[1]
        self._latest[provider_format] = (view.log.version, rendered)
        self.weight += rendered.length

    def _extend_openai(
        self, opened: tuple[PromptView, RenderedPrompt, Any], view: PromptView
    ) -> RenderedPrompt | None:
        """``view`` rendered as an earlier rendering plus the messages of its new
        entries, when it only appends to the view rendered then (same cut, system
        prompt, pinned entries and prunes of the entries both show); else None."""
        before, base, open_hash = opened
        if before.log.version > view.log.version:
            return None
        old, new = before.log, view.log
        kept = len(old.entries)
        if (
            old.first_position != new.first_position
            or old.compaction != new.compaction
            or len(new.entries) < kept
            or (kept and new.entries[kept - 1].id != old.entries[kept - 1].id)
            or [e.id for e in old.pinned] != [e.id for e in new.pinned]
            or before.system_prompt != view.system_prompt
        ):
            return None
        added = new.entries[kept:]
        added_ids = {e.id for e in added}
        if before.pruned != {k: d for k, d in view.pruned.items() if k not in added_ids}:
            return None
        parts: list[str] = []
        for entry in added:
            fragment = ",".join(_dumps(m) for m in openai_messages(entry, view))
            self._openai[entry.id] = (view.pruned.get(entry.id), fragment)
            self.weight += len(fragment)
            if fragment:
                parts.append(fragment)
        appended = ",".join(parts)
        joiner = "," if appended and base.length > 2 else ""
        hasher = open_hash.copy()
        hasher.update((joiner + appended).encode())
        if base._depth >= MAX_UNJOINED:
            base.messages_json  # noqa: B018 - joined now, so the chain stays short
        depth = 0 if "messages_json" in base.__dict__ else base._depth + 1
        rendered = RenderedPrompt(
            "",
            base.system_json,
            view.estimated_tokens,
            base.tools_json,
            _closed(hasher),
            base.provider_format,
            base_hash=base.request_hash,
            appended_json=f"[{appended}]",
            messages_chars=base.length + len(joiner) + len(appended),
            _base=base,
            _tail=joiner + appended,
            _depth=depth,
        )
        self._open = (view, rendered, hasher)
        return rendered

    def remembered(self, provider_format: str, request_hash: str) -> RenderedPrompt | None:
        """A recent rendering with this hash, if this renderer still holds it."""
        latest = self._latest.get(provider_format)
        for candidate in (latest[1] if latest else None, self._previous.get(provider_format)):
            if candidate is not None and candidate.request_hash == request_hash:
                return candidate
        return None

    def _render_openai(self, view: PromptView) -> str:
        parts: list[str] = []
        system_text = view.system_prompt.rendered_text()
        if system_text:
            parts.append(_dumps({"role": "system", "content": system_text}))
        for entry in view.log.pinned:
            parts.extend(_dumps(m) for m in openai_messages(entry, view))
        if view.log.compaction:
            summary = summary_text(view.log.compaction.compaction.summary)
            parts.append(_dumps({"role": "user", "content": summary}))
        for entry in view.log.entries:
            decision = view.pruned.get(entry.id)
            cached = self._openai.get(entry.id)
            if cached is not None and cached[0] == decision:
                fragment = cached[1]
            else:
                fragment = ",".join(_dumps(m) for m in openai_messages(entry, view))
                self._openai[entry.id] = (decision, fragment)
                self.weight += len(fragment)
            if fragment:
                parts.append(fragment)
        return f"[{','.join(parts)}]"

    def _render_anthropic(self, view: PromptView) -> tuple[str, str]:
        """The messages and the top-level system blocks."""
        system: list[str] = []
        system_text = view.system_prompt.rendered_text()
        if system_text:
            system.append(_dumps(_text(system_text)))
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
            ",".join(_dumps(b) for b in anthropic_blocks(entry, view)) for entry in view.log.pinned
        )
        if view.log.compaction:
            summary = summary_text(view.log.compaction.compaction.summary)
            add("user", _dumps(_text(summary)))
        for entry in view.log.entries:
            decision = view.pruned.get(entry.id)
            cached = self._anthropic.get(entry.id)
            if cached is None or cached[0] != decision:
                fragment = ",".join(_dumps(b) for b in anthropic_blocks(entry, view))
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
        return f"[{','.join(messages)}]", system_json


_ANTHROPIC_ROLES = {
    Role.SYSTEM: "system",
    Role.USER: "user",
    Role.TOOL: "user",
    Role.ASSISTANT: "assistant",
}


def _dumps(value: Any) -> str:
    # orjson: several times faster than json on the first render of a long session.
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        # What orjson cannot write (deep nesting, integers beyond 64 bits, lone
        # surrogates) is refused at ingest now; entries stored before still render.
        return json.dumps(value, separators=(",", ":"))


def render(view: PromptView, provider_format: str) -> RenderedPrompt:
    """Renders a view once, without keeping anything for later renders."""
    return PromptRenderer().render(view, provider_format)


def summary_text(summary: str) -> str:
    return f"{SUMMARY_PREFIX}\n\n<summary>\n{summary}\n</summary>"


def openai_tool(tool: Tool) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters(),
        },
    }


def anthropic_tool(tool: Tool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters()}


# -- OpenAI chat completions --------------------------------------------------------


def to_openai(view: PromptView) -> list[dict[str, Any]]:
    """The OpenAI messages as Python values, for inspection."""
    messages: list[dict[str, Any]] = json.loads(render(view, "openai").messages_json)
    return messages


def openai_messages(entry: Entry, view: PromptView) -> list[dict[str, Any]]:
    """The entry's OpenAI messages, its tool results as ``view`` shows them."""
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
                    "content": view.shown_result(entry.id, result),
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


def anthropic_blocks(entry: Entry, view: PromptView) -> list[dict[str, Any]]:
    """The entry's Anthropic content blocks, its tool results as ``view`` shows them."""
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
                    "content": view.shown_result(entry.id, block),
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
