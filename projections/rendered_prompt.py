"""A rendered prompt view, and the canonical request a client can hash to check it.

A rendering that only appends messages to the one before it is kept as that
rendering plus a tail (joined on first use), and its request hash continues
the earlier one's: a long session's next view costs what its new messages do.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from projections.formats.base import Omitted
from projections.view_repair import Repair


@dataclass(frozen=True, eq=False)
class RenderedPrompt:
    # The messages' JSON; empty while this rendering is ``_base``'s with ``_tail``
    # added before its closing bracket, joined on first use (messages_json).
    text: str
    # The system part as its provider takes it (JSON): Anthropic's top-level system
    # blocks, Responses' instructions, Gemini's systemInstruction; "" when none (and
    # always for OpenAI chat, where the system prompt is a message).
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
    # What this view left out because its provider cannot take it, and what it does
    # differently from the log so its provider accepts it.
    omitted: tuple[Omitted, ...] = ()
    repairs: tuple[Repair, ...] = ()
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

    def json_bytes_over(self, limit: int) -> int | None:
        """The UTF-8 bytes of the rendering's JSON (messages, system, tools) when over
        ``limit``; None when within it. Told from the characters alone when even four
        bytes each would be within, so a view far from the limit encodes nothing."""
        if 4 * (self.length + len(self.system_json) + len(self.tools_json)) <= limit:
            return None
        size = self.json_bytes
        return size if size > limit else None

    @property
    def json_bytes(self) -> int:
        """The UTF-8 bytes of the rendering's JSON: messages, system and tools."""
        return sum(len(s.encode()) for s in (self.messages_json, self.system_json, self.tools_json))


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


def open_request_hash(provider_format: str, messages: str, system: str, tools: str) -> Any:
    """sha256 fed with the canonical request up to the end of its last message (without
    the closing "]}"): what the next rendering with messages appended continues."""
    hasher = hashlib.sha256(
        f'{{"format":"{provider_format}","system":{system or "null"},"tools":{tools},'
        '"messages":'.encode()
    )
    hasher.update(messages[:-1].encode())
    return hasher


def closed_request_hash(hasher: Any) -> str:
    final = hasher.copy()
    final.update(b"]}")
    return str(final.hexdigest())
