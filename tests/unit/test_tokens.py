"""Token counting at ingest: the right tokenizer per model, offline, named honestly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tiktoken

from domain.content import Entry, ImageRef, Role, TextBlock, ToolCall
from services.adapters.model_info import ModelMetadata, model_metadata
from services.adapters.tokenizers import (
    _LONG_WHITESPACE_MIN as LONG_RUN,
)
from services.adapters.tokenizers import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    _may_hold_long_whitespace,
    tokenizer_for,
)

CJK = "上下文窗口的管理需要精确地计算词元数量否则压缩会来得太晚"


def entry(*blocks: object) -> Entry:
    return Entry("e", None, None, Role.ASSISTANT, tuple(blocks))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("gpt-4o", "o200k_base"),
        ("openai/gpt-4o-mini", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("claude-sonnet-4-5", "o200k_base~anthropic"),
        ("anthropic/claude-sonnet-4-5", "o200k_base~anthropic"),
        ("gemini/gemini-2.0-flash", "o200k_base~gemini"),
        ("my-own-finetune-xyz", "chars/4 (unknown model)"),
    ],
)
def test_each_model_gets_a_tokenizer_named_for_what_it_is(model: str, name: str) -> None:
    assert tokenizer_for(model).name == name


def test_openai_models_are_counted_exactly() -> None:
    counted = tokenizer_for("gpt-4o").count_entry(entry(TextBlock(CJK)))
    assert counted == len(tiktoken.get_encoding("o200k_base").encode(CJK)) + MESSAGE_OVERHEAD_TOKENS


def test_chars_over_four_undercounts_cjk_and_is_only_the_last_resort() -> None:
    exact = tokenizer_for("gpt-4o").count_text(CJK)
    estimate = tokenizer_for("my-own-finetune-xyz").count_text(CJK)
    assert estimate == -(-len(CJK) // 4)
    assert exact > 1.5 * estimate  # the complaint users have about chars/4 and CJK


def test_tool_calls_and_images_count_too() -> None:
    tokenizer = tokenizer_for("gpt-4o")
    call = ToolCall("c1", "read_file", '{"path": "/etc/hosts"}')
    assert tokenizer.count_entry(entry(call)) == MESSAGE_OVERHEAD_TOKENS + tokenizer.count_text(
        "read_file"
    ) + tokenizer.count_text('{"path": "/etc/hosts"}')
    image = entry(TextBlock("look"), ImageRef("https://example.com/a.png"))
    assert tokenizer.count_entry(image) == (
        MESSAGE_OVERHEAD_TOKENS + IMAGE_TOKENS + tokenizer.count_text("look")
    )


def test_encodings_are_read_from_disk_not_downloaded() -> None:
    cache = Path(os.environ["TIKTOKEN_CACHE_DIR"])
    assert cache.is_dir()
    assert len([p for p in cache.iterdir() if p.is_file() and len(p.name) == 40]) >= 2


def test_context_windows_come_from_litellms_model_map() -> None:
    assert model_metadata.context_window("gpt-4o") == 128_000
    assert model_metadata.context_window("anthropic/claude-sonnet-4-5") == 200_000
    assert model_metadata.context_window("my-own-finetune-xyz") is None
    assert ModelMetadata(model_map=None).provider("gpt-4o") == "openai"


def test_a_whitespace_run_long_enough_to_split_is_found_wherever_it_lies() -> None:
    """The quick look that lets a long text be counted whole, without searching it for
    whitespace runs, misses none the count must take in pieces."""
    for length in (LONG_RUN - 1, LONG_RUN, LONG_RUN + 1, 3 * LONG_RUN):
        for offset in range(0, LONG_RUN, 97):
            text = "x" * offset + (" \n\t" * length)[:length] + "y" * 50
            assert _may_hold_long_whitespace(text), (length, offset)
    assert not _may_hold_long_whitespace(("word" + " " * (LONG_RUN // 2 - 100)) * 100 + "end")


def test_a_run_tiktoken_gives_up_on_is_counted_in_pieces() -> None:
    tokenizer = tokenizer_for("gpt-4o")
    prose = "The quick brown fox jumps over the lazy dog. " * 2_000
    spaced = prose + " " * 200_000 + prose
    assert tokenizer.count_text(spaced) > 2 * tokenizer.count_text(prose)


def test_a_tokenizer_holds_no_python_copy_of_its_ranks_and_counts_alike() -> None:
    """The ranks live in tiktoken's Rust core; the Python dict of them (26 MB for
    o200k_base) is dropped, and counting, encoding and decoding are unchanged."""
    tokenizer = tokenizer_for("gpt-4o")
    assert tokenizer.encoding is not None
    assert not tokenizer.encoding._mergeable_ranks
    tokens = tokenizer.encoding.encode("Hello, world! " + CJK)
    assert tokens[:4] == [13225, 11, 2375, 0]
    assert tokenizer.encoding.decode(tokens) == "Hello, world! " + CJK
    assert tokenizer.encoding.n_vocab == 200_019
