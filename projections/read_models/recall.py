"""The recall index's fold: what each event adds to or takes from the index.

Recall searches the whole raw history, what compaction hid included, so
every entry ever appended is indexed, cut into chunks of a bounded number of
tokens (an embedding model takes a bounded input, and a hit should point at
the part of a long tool output that matched, not at all of it). Erasures take
the chunks of what they erase out again. Pure: the tokenizer is passed in,
the tables are services.adapters.recall_index's.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from domain.content import Entry, ImageRef, ProviderItem, block_texts
from domain.erasure import is_erased
from domain.session_events import EntriesAppended, EntriesErased, SessionErased, ToolCallsAbandoned

# Chunks of at most this many tokens, each overlapping the one before by
# CHUNK_OVERLAP_TOKENS, so that a phrase cut at a boundary is whole in one of them.
CHUNK_TOKENS = 256
CHUNK_OVERLAP_TOKENS = 32
# An entry larger than this is indexed up to here: a tool output of megabytes
# would otherwise take thousands of embeddings.
MAX_INDEXED_CHARS = 200_000
_WHITESPACE = re.compile(r"\s+")

# A tokenizer: text to token ids, and token ids back to text.
Encode = Callable[[str], Sequence[int]]
Decode = Callable[[Sequence[int]], str]


@dataclass(frozen=True, slots=True)
class RecallChunk:
    session_id: str
    entry_id: str
    chunk: int  # 0, 1, ... within the entry
    # The entry's place in the session's history (as Session.entry_count counts).
    entry_position: int
    version: int  # of the event that appended the entry
    recorded_at: datetime
    role: str
    text: str
    content_hash: str


@dataclass(frozen=True, slots=True)
class RecallErasure:
    """Chunks to drop: the session's whole index (``entry_ids`` None) or these entries'."""

    session_id: str
    entry_ids: tuple[str, ...] | None


def entry_search_text(entry: Entry) -> str:
    """What a search reads of an entry: its text, thinking, tool calls and results;
    not image references nor provider-opaque items (encrypted, or a provider's
    own JSON), which no search term would match usefully. Whitespace collapsed."""
    blocks = tuple(b for b in entry.content if not isinstance(b, ImageRef | ProviderItem))
    text = " ".join(t for t in block_texts(blocks) if t)
    return _WHITESPACE.sub(" ", text[:MAX_INDEXED_CHARS]).strip()


def chunk_text(text: str, encode: Encode, decode: Decode) -> list[str]:
    """The text cut into overlapping pieces of at most CHUNK_TOKENS tokens."""
    if not text:
        return []
    tokens = encode(text)
    if len(tokens) <= CHUNK_TOKENS:
        return [text]
    step = CHUNK_TOKENS - CHUNK_OVERLAP_TOKENS
    pieces = []
    for start in range(0, len(tokens), step):
        pieces.append(decode(tokens[start : start + CHUNK_TOKENS]).strip())
        if start + CHUNK_TOKENS >= len(tokens):
            break
    return [p for p in pieces if p]


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def entry_chunks(
    session_id: str,
    entries: Sequence[Entry],
    first_position: int,
    version: int,
    recorded_at: datetime,
    encode: Encode,
    decode: Decode,
) -> list[RecallChunk]:
    """The chunks of entries appended together, the first at ``first_position``.
    An entry read back erased (its keys deleted before the index was built) has
    nothing left to index."""
    chunks = []
    for offset, entry in enumerate(entries):
        if is_erased(entry.metadata):
            continue
        pieces = chunk_text(entry_search_text(entry), encode, decode)
        for number, piece in enumerate(pieces):
            chunks.append(
                RecallChunk(
                    session_id=session_id,
                    entry_id=entry.id,
                    chunk=number,
                    entry_position=first_position + offset,
                    version=version,
                    recorded_at=entry.timestamp or recorded_at,
                    role=entry.role.value,
                    text=piece,
                    content_hash=content_hash(piece),
                )
            )
    return chunks


def appended_entries(event: Any) -> Sequence[Entry]:
    """The entries an event adds to the session's history, in order."""
    if isinstance(event, EntriesAppended):
        return event.entries
    if isinstance(event, ToolCallsAbandoned):
        return (event.entry,)
    return ()


def erasure(event: Any) -> RecallErasure | None:
    if isinstance(event, EntriesErased):
        return RecallErasure(str(event.originator_id), tuple(event.entry_ids))
    if isinstance(event, SessionErased):
        return RecallErasure(str(event.originator_id), None)
    return None
