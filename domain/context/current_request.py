"""The user message of the turn in progress, carried verbatim in a summary.

A cut never goes past the start of the turn in progress, unless nothing else
fits (a turn of many tool calls outgrowing the window). Then the summary that
replaces the turn's beginning carries the user message that began it, word for
word, in a last section of its own, and every later summary carries it on
until a new user message starts a new turn: the model always reads what it
was asked, never a paraphrase.

The message's other blocks (the image the user just sent, a document) cannot go
in a text: the compaction carries them beside its summary (``carried_blocks``),
every view shows them in the summary's own user message, after the text, and
its ``summary_tokens`` counts them. The cut is planned with the whole message
counted, as it is shown; when even that does not fit, nothing is cut inside the
turn (domain.context.fit_planner), as for any message larger than the budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from domain.compaction import Compaction
from domain.content import Block, Entry, TextBlock

HEADING = "## Current Request"
_INTRO = re.compile(
    r"^The user's message that began the turn in progress \(entry (?P<id>[^)]*)\), word for "
    r"word:\n",
)


@dataclass(frozen=True, slots=True)
class CarriedRequest:
    """The user message a summary carries: its entry id, its text (in the summary) and
    its other blocks (beside the summary)."""

    entry_id: str
    text: str
    blocks: tuple[Block, ...] = ()


def request_of(entry: Entry) -> CarriedRequest:
    """What carrying the user message ``entry`` takes: its text, and every other block."""
    texts = [b.text for b in entry.content if isinstance(b, TextBlock)]
    blocks = tuple(b for b in entry.content if not isinstance(b, TextBlock))
    return CarriedRequest(entry.id, "\n".join(texts), blocks)


def carried_by(compaction: Compaction) -> CarriedRequest | None:
    """The user message the compaction's summary carries, if it carries one."""
    found = current_request(compaction.summary)
    if found is None:
        return None
    return CarriedRequest(*found, compaction.carried_blocks)


def with_current_request(summary: str, entry_id: str, text: str) -> str:
    """``summary`` ending with the user message ``text`` of entry ``entry_id``, verbatim."""
    body = without_current_request(summary).rstrip()
    return (
        f"{body}\n\n{HEADING}\nThe user's message that began the turn in progress "
        f"(entry {entry_id}), word for word:\n{text}"
    )


def current_request(summary: str) -> tuple[str, str] | None:
    """The (entry id, text) a summary carries, if it carries one."""
    at = _heading_at(summary)
    if at is None:
        return None
    section = summary[at + len(HEADING) + 1 :]
    match = _INTRO.match(section)
    if match is None:
        return None
    return match.group("id"), section[match.end() :]


def without_current_request(summary: str) -> str:
    at = _heading_at(summary)
    return summary if at is None else summary[:at].rstrip() + "\n"


def _heading_at(summary: str) -> int | None:
    """Where the section starts: the first heading followed by its own introduction
    (the carried text, which comes after, may hold anything)."""
    marker = f"{HEADING}\nThe user's message that began the turn in progress (entry "
    if summary.startswith(marker):
        return 0
    at = summary.find("\n" + marker)
    return None if at < 0 else at + 1
