"""Counting tokens once, at ingest, with the session model's tokenizer.

OpenAI models are counted exactly with tiktoken. Other models litellm knows
are counted with o200k_base and recorded as approximate; chars/4 is the last
resort for models nobody knows, and the recorded tokenizer name says so.
Works offline: tiktoken reads the encodings litellm ships with.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from domain.content import Block, Entry, ImageRef, block_texts
from domain.system_prompt import PartTokens, SystemPrompt
from services.adapters.model_info import bare_model_name, litellm_file, model_metadata

# tiktoken downloads encodings on first use unless they are in its cache
# directory; litellm ships cl100k_base, o200k_base and p50k_base there.
_shipped_encodings = litellm_file("litellm_core_utils/tokenizers")
if _shipped_encodings and "TIKTOKEN_CACHE_DIR" not in os.environ:
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_shipped_encodings)

import tiktoken  # noqa: E402  (needs TIKTOKEN_CACHE_DIR first)

# What a provider adds around each message (role markers, separators).
MESSAGE_OVERHEAD_TOKENS = 4
# Providers bill an image by its size, which a reference does not tell.
IMAGE_TOKENS = 1_000
CHARS_PER_TOKEN = 4
# tiktoken's pattern backtracks through a run of whitespace and gives up on
# long ones ("Max stack size exceeded"): such runs are counted in pieces,
# which differs from one whole encoding by a token or so per piece.
_LONG_WHITESPACE_MIN = 1_000
_LONG_WHITESPACE = re.compile(rf"\s{{{_LONG_WHITESPACE_MIN},}}")
_RUN_PIECE_CHARS = 500
_FALLBACK_PIECE_CHARS = 4_096


@dataclass(frozen=True)
class Tokenizer:
    name: str
    encoding: tiktoken.Encoding | None

    def count_text(self, text: str) -> int:
        if self.encoding is None:
            return -(-len(text) // CHARS_PER_TOKEN)
        if len(text) < _LONG_WHITESPACE_MIN or not _may_hold_long_whitespace(text):
            return self._encoded(text)
        count = start = 0
        for run in _LONG_WHITESPACE.finditer(text):
            count += self._encoded(text[start : run.start()])
            count += sum(
                self._encoded(text[i : min(i + _RUN_PIECE_CHARS, run.end())])
                for i in range(run.start(), run.end(), _RUN_PIECE_CHARS)
            )
            start = run.end()
        return count + self._encoded(text[start:])

    def _encoded(self, text: str) -> int:
        assert self.encoding is not None
        try:
            return len(self.encoding.encode(text, disallowed_special=()))
        except ValueError:
            # What the pattern still cannot take is counted in pieces, or estimated.
            if len(text) <= _FALLBACK_PIECE_CHARS:
                return -(-len(text) // CHARS_PER_TOKEN)
            return sum(
                self._encoded(text[i : i + _FALLBACK_PIECE_CHARS])
                for i in range(0, len(text), _FALLBACK_PIECE_CHARS)
            )

    def count_entry(self, entry: Entry) -> int:
        return MESSAGE_OVERHEAD_TOKENS + self.count_blocks(entry.content)

    def count_blocks(self, blocks: Sequence[Block]) -> int:
        """The blocks as a message shows them, without the message's own overhead."""
        images = sum(1 for b in blocks if isinstance(b, ImageRef))
        texts = [t for b in blocks if not isinstance(b, ImageRef) for t in block_texts((b,))]
        return images * IMAGE_TOKENS + sum(self.count_text(text) for text in texts if text)


def _may_hold_long_whitespace(text: str) -> bool:
    """False when ``text`` surely holds no whitespace run of _LONG_WHITESPACE_MIN: such a
    run covers a whole aligned block of half that length. Some ten times faster than
    looking for the runs themselves, which took a third of counting a long text."""
    block = _LONG_WHITESPACE_MIN // 2
    return any(text[i : i + block].isspace() for i in range(0, len(text), block))


def _lean(encoding: tiktoken.Encoding) -> tiktoken.Encoding:
    """The encoding without its Python copy of the merge ranks (200,000 bytes objects
    and a dict: 26 MB of RSS for o200k_base, an eighth of an idle server). tiktoken's
    Rust core keeps a copy of its own and encodes with that; the Python one is read
    only to pickle the encoding, which nothing here does."""
    encoding._mergeable_ranks = {}
    return encoding


@lru_cache(maxsize=256)
def tokenizer_for(model: str) -> Tokenizer:
    bare = bare_model_name(model)
    try:
        encoding = _lean(tiktoken.encoding_for_model(bare))
        return Tokenizer(encoding.name, encoding)
    except KeyError:
        pass
    provider = model_metadata.provider(model)
    if provider:
        return Tokenizer(f"o200k_base~{provider}", _lean(tiktoken.get_encoding("o200k_base")))
    return Tokenizer("chars/4 (unknown model)", None)


def count_system_prompt(prompt: SystemPrompt, tokenizer: Tokenizer) -> PartTokens:
    """Each part's tokens, as seed 004's context report breaks them down."""
    return PartTokens(
        text=tokenizer.count_text(prompt.text),
        files=sum(tokenizer.count_text(f.content) for f in prompt.files),
        skills=sum(tokenizer.count_text(f"{s.name}: {s.description}") for s in prompt.skills),
        tool_list=tokenizer.count_text(prompt.tool_list_text()),
        tool_schemas=sum(
            tokenizer.count_text(t.name + t.description + t.parameters_json) for t in prompt.tools
        ),
        tokenizer=tokenizer.name,
    )
