"""Recall's pure parts: what an entry is indexed as, how it is chunked, which
compaction hid an entry, the snippet a hit shows, and how cached embeddings
are read back (the damaged ones set aside, each logged once)."""

from __future__ import annotations

import math
import struct
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import numpy as np
import structlog.testing

from domain.content import Entry, ProviderItem, Role, TextBlock, ToolCall, ToolResult
from domain.erasure import ERASED_METADATA
from projections.read_models.recall import (
    CHUNK_OVERLAP_TOKENS,
    CHUNK_TOKENS,
    chunk_text,
    entry_chunks,
    entry_search_text,
)
from services.adapters.embedding_rows import DamagedEmbedding, DamageReports, decode_embeddings
from services.adapters.recall_index import _codec
from services.app.recall import SNIPPET_CHARS, hidden_by, snippet

NOW = datetime(2026, 11, 26, tzinfo=UTC)


def _entry(*blocks: Any, role: Role = Role.USER, **fields: Any) -> Entry:
    return Entry("e1", None, NOW, role, tuple(blocks), **fields)


def test_an_entry_is_searched_by_what_a_model_reads_of_it_not_by_opaque_items() -> None:
    entry = _entry(
        TextBlock("Deploy   the\\nservice"),
        ToolCall("c1", "shell", '{"cmd": "make deploy"}'),
        ToolResult("c1", "deployed to kestrel-7"),
        ProviderItem("openai", "reasoning", '{"type":"reasoning","encrypted_content":"gAAA"}'),
        role=Role.ASSISTANT,
    )
    text = entry_search_text(entry)
    assert "make deploy" in text and "kestrel-7" in text and "shell" in text
    assert "gAAA" not in text and "  " not in text


def test_long_texts_are_cut_in_overlapping_chunks_of_bounded_tokens() -> None:
    encode, decode = _codec()
    words = " ".join(f"word{n}" for n in range(2_000))
    chunks = chunk_text(words, encode, decode)
    assert len(chunks) > 1
    assert all(len(encode(c)) <= CHUNK_TOKENS for c in chunks)
    # Every word is in some chunk, and neighbours share their seam.
    joined = " ".join(chunks)
    assert all(f"word{n} " in joined + " " for n in range(0, 2_000, 97))
    tail = encode(chunks[0])[-CHUNK_OVERLAP_TOKENS // 2 :]
    assert decode(tail).strip().split()[-1] in chunks[1]
    assert chunk_text("short", encode, decode) == ["short"]
    assert chunk_text("", encode, decode) == []


def test_erased_entries_yield_no_chunks_and_positions_count_every_entry() -> None:
    encode, decode = _codec()
    kept = Entry("a", None, NOW, Role.USER, (TextBlock("alpha"),))
    erased = Entry("b", None, NOW, Role.USER, (TextBlock("[erased]"),), metadata=ERASED_METADATA)
    last = Entry("c", None, None, Role.ASSISTANT, (TextBlock("gamma"),))
    chunks = entry_chunks("s", [kept, erased, last], 10, 4, NOW, encode, decode)
    assert [(c.entry_id, c.entry_position, c.version) for c in chunks] == [
        ("a", 10, 4),
        ("c", 12, 4),
    ]
    assert chunks[1].recorded_at == NOW  # no timestamp of its own: the event's


def test_the_compaction_that_hid_an_entry_is_the_first_in_force_whose_cut_lies_past_it() -> None:
    # cuts: (version, first kept position, ...), oldest first.
    session: Any = SimpleNamespace(
        cuts=((7, 10, 3, 1, 0), (15, 25, 9, 1, 0)), first_kept_position=25
    )
    assert hidden_by(session, 3) == 7
    assert hidden_by(session, 10) == 15
    assert hidden_by(session, 25) == 0
    cleared: Any = SimpleNamespace(cuts=((7, 10, 3, 1, 0),), first_kept_position=40)
    assert hidden_by(cleared, 30) == 0  # hidden by a clear, not by a compaction


def test_a_snippet_shows_the_words_found_within_its_size() -> None:
    text = "x" * 1_000 + " the vault path secret/zebra-7731 " + "y" * 1_000
    shown = snippet(text, ["zebra"])
    assert "zebra-7731" in shown and len(shown) <= SNIPPET_CHARS + 6
    assert shown.startswith("...") and shown.endswith("...")
    assert snippet("short text", ["absent"]) == "short text"


def _stored(*values: float) -> tuple[bytes, int]:
    return struct.pack(f"<{len(values)}f", *values), len(values)


def test_cached_embeddings_that_are_no_vectors_of_the_models_are_set_aside() -> None:
    first, second = _stored(0.6, 0.8, 0.0, 0.0), _stored(0.0, 0.0, 1.0, 0.0)
    rows: list[tuple[Any, Any]] = [
        first,
        (b"\x00\x01\x02", 4),  # cut short
        (first[0] + b"\x00\x00\x00\x00", 4),  # longer than its stated dimensions
        (first[0], 0),
        (first[0], "4"),
        ("0.6,0.8,0,0", 4),  # text where bytes belong
        _stored(math.nan, 0.0, 0.0, 0.0),
        _stored(math.inf, 0.0, 0.0, 0.0),
        second,
        _stored(1.0, 0.0),  # sound, of another size than most
    ]
    decoded = decode_embeddings(rows)
    assert decoded.size == 4 and decoded.kept == [0, 8]
    assert decoded.matrix.tolist() == [
        list(np.frombuffer(first[0], "<f4")),
        list(np.frombuffer(second[0], "<f4")),
    ]
    assert sorted(decoded.damaged) == [1, 2, 3, 4, 5, 6, 7, 9]
    assert "3 bytes, where 4 float32 values take 16" in decoded.damaged[1]
    assert "20 bytes" in decoded.damaged[2]
    assert "stated dimensions" in decoded.damaged[3] and "stated dimensions" in decoded.damaged[4]
    assert "not bytes" in decoded.damaged[5]
    assert "not finite" in decoded.damaged[6] and "not finite" in decoded.damaged[7]
    assert decoded.damaged[9] == "2 dimensions, where the model's vectors have 4"


def test_a_size_asked_for_sets_aside_vectors_of_every_other_size() -> None:
    rows = [_stored(1.0, 0.0), _stored(0.0, 1.0), _stored(1.0, 0.0, 0.0)]
    assert decode_embeddings(rows).kept == [0, 1]  # the size most have
    at_three = decode_embeddings(rows, 3)
    assert at_three.kept == [2] and at_three.matrix.shape == (1, 3)
    assert sorted(at_three.damaged) == [0, 1]
    assert decode_embeddings([]).matrix.shape == (0, 0)
    assert decode_embeddings([], 3).matrix.shape == (0, 3)
    assert decode_embeddings([(b"\x00", 1)], 3).matrix.shape == (0, 3)


def test_each_damaged_embedding_is_logged_once_until_it_is_stored_again() -> None:
    reports = DamageReports()
    damaged = DamagedEmbedding("h1", "3 bytes, where 4 float32 values take 16", "s-1", "e-1")
    with structlog.testing.capture_logs() as logs:
        reports.report("openai", "m", [damaged])
        reports.report("openai", "m", [damaged])  # read again, not embedded again yet
        reports.report("openai", "other-model", [damaged])
        reports.replaced("openai", "m", ["h1"])
        reports.report("openai", "m", [damaged])  # damaged again after it was replaced
    assert [(e["log_level"], e["model"], e["damaged"]) for e in logs] == [
        ("warning", "m", 1),
        ("warning", "other-model", 1),
        ("warning", "m", 1),
    ]
    assert logs[0]["rows"] == [
        {
            "content_hash": "h1",
            "reason": "3 bytes, where 4 float32 values take 16",
            "session_id": "s-1",
            "entry_id": "e-1",
        }
    ]
