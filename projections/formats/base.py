"""What every prompt format is made of: the pieces an entry renders to, what a view
leaves out, and JSON written piece by piece so provider items go in verbatim.

A format renders each entry on its own into *pieces*: (tag, JSON text). Chat-like
formats (OpenAI chat, Responses) make a piece per message or item; turn-based ones
(Anthropic, Gemini) a piece per content block or part, tagged with the role whose
turn it joins, and consecutive pieces of one role make one turn. Pieces are
cached per entry and joined per view, so a view of a long session costs little
more than a join.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import orjson

from domain.compaction import Compaction
from domain.content import (
    Entry,
    ImageRef,
    ProviderItem,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResult,
)
from domain.context.current_request import carried_by
from domain.system_prompt import SystemPrompt, Tool
from projections.session_history import PromptView
from projections.view_repair import Repair, Step

SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
)
# What a view that would open with the assistant's turn gets first, where the
# provider wants the user's turn first.
LEADING_USER_TEXT = "[The conversation continues from an earlier point.]"


@dataclass(frozen=True, slots=True)
class Omitted:
    """A block a view leaves out because its provider cannot take it."""

    entry_id: str
    # Its place in the entry's content (-1: the compaction's item, not an entry's block).
    # A block the summary carries: its place in the summary's message, the summary's
    # text first (see ``carrying_summary``).
    block_index: int
    # "thinking", "image", "provider_item" or "compaction_item".
    kind: str
    provider: str = ""
    type: str = ""
    reason: str = ""


# (tag, JSON text, where it came from: (entry id, block index) or None).
Piece = tuple[str, str, tuple[str, int] | None]


class Shown(NamedTuple):
    """An entry as one format shows it. (A named tuple: one is made for every entry
    rendered, and a frozen dataclass costs several times more to make.)"""

    pieces: tuple[Piece, ...] = ()
    omitted: tuple[Omitted, ...] = ()
    repairs: tuple[Repair, ...] = ()


@dataclass(frozen=True, slots=True)
class Assembled:
    messages_json: str
    system_json: str
    omitted: tuple[Omitted, ...] = ()
    repairs: tuple[Repair, ...] = ()


class Format(Protocol):
    """One provider's request format."""

    name: str
    # The provider whose items this format carries verbatim ("" for none).
    provider: str
    # Whether an entry's pieces may be joined into one (all of one turn, or whole
    # messages no rule looks into across entries).
    joins_entry: bool
    # Whether a result must name the call it answers (Gemini's function responses).
    names_calls: bool

    def entry(self, entry: Entry, view: PromptView, step: Step) -> Shown:
        """The entry's pieces; ``step`` says which of its results the pairing left out."""

    def summary(self, compaction: Compaction, view: PromptView) -> Shown:
        """The compaction in force: its summary (with the blocks of the user message
        it carries), or the provider's own item."""

    def assemble(self, system_prompt: SystemPrompt, pieces: Sequence[Piece]) -> Assembled:
        """The messages and the system part (JSON, or "" for none) from the pieces."""

    def tool(self, tool: Tool) -> dict[str, Any]:
        """One stored tool in the provider's form."""

    def tools(self, tools: Sequence[Tool]) -> str:
        """The tools as the request's tools field (JSON)."""


def dumps(value: Any) -> str:
    # orjson: several times faster than json on the first render of a long session.
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        # What orjson cannot write (deep nesting, integers beyond 64 bits, lone
        # surrogates) is refused at ingest now; entries stored before still render.
        return json.dumps(value, separators=(",", ":"))


def json_object(fields: Sequence[tuple[str, str]]) -> str:
    """An object from keys and values that are JSON text already (verbatim items)."""
    return "{" + ",".join(f"{dumps(key)}:{value}" for key, value in fields) + "}"


def json_array(values: Sequence[str]) -> str:
    return "[" + ",".join(values) + "]"


def summary_text(summary: str) -> str:
    return f"{SUMMARY_PREFIX}\n\n<summary>\n{summary}\n</summary>"


def carrying_summary(compaction: Compaction) -> Entry | None:
    """The summary as the user message a view shows, when it carries the blocks of the
    turn's user message beside its text (domain.context.current_request): its text,
    then those blocks, under that message's id. None when it carries none."""
    if not compaction.carried_blocks:
        return None
    carried = carried_by(compaction)
    content = (TextBlock(summary_text(compaction.summary)), *compaction.carried_blocks)
    return Entry(carried.entry_id if carried else "", None, None, Role.USER, content)


def joined_text(entry: Entry) -> str:
    return "\n".join(b.text for b in entry.content if isinstance(b, TextBlock))


def omitted(entry: Entry, index: int, block: Any, format_name: str, reason: str = "") -> Omitted:
    """A block of ``entry`` left out of a view in ``format_name``, and why."""
    if isinstance(block, ProviderItem):
        return Omitted(
            entry.id,
            index,
            "provider_item",
            block.provider,
            block.type,
            reason or f"a {block.provider} item; the {format_name} format cannot carry it",
        )
    if isinstance(block, ThinkingBlock):
        return Omitted(
            entry.id,
            index,
            "thinking",
            reason=reason or f"the {format_name} format cannot carry this thinking back",
        )
    return Omitted(
        entry.id,
        index,
        "image",
        reason=reason or f"the {format_name} format cannot carry an image here",
    )


def compaction_item_omitted(compaction: Compaction, format_name: str) -> tuple[Omitted, ...]:
    """The provider's compaction item, left out of another provider's view (its summary
    text stands in)."""
    item = compaction.provider_item
    if item is None:
        return ()
    return (
        Omitted(
            "",
            -1,
            "compaction_item",
            item.provider,
            item.type,
            f"the {item.provider} provider's compaction item; the {format_name} format "
            "shows its summary text instead",
        ),
    )


def attached(entry: Entry) -> list[tuple[ToolResult, list[tuple[int, Any]]]]:
    """The entry's tool results, each with the (index, block) images and provider items
    that follow it (and belong to it). An erased entry's placeholders stand in text
    blocks, and are not shown twice."""
    groups: list[tuple[ToolResult, list[tuple[int, Any]]]] = []
    for index, block in enumerate(entry.content):
        if isinstance(block, ToolResult):
            groups.append((block, []))
        elif groups and isinstance(block, ImageRef | ProviderItem):
            groups[-1][1].append((index, block))
    return groups


def data_uri(uri: str, media_type: str) -> tuple[str, str] | None:
    """(media type, base64 data) of a ``data:`` URI, else None."""
    if uri.startswith("data:") and ";base64," in uri:
        header, data = uri[5:].split(";base64,", 1)
        return media_type or header, data
    return None
