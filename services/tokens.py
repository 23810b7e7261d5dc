"""Counting tokens once, at ingest, with the session model's tokenizer.

OpenAI models are counted exactly with tiktoken. Other models litellm knows
are counted with o200k_base and recorded as approximate; chars/4 is the last
resort for models nobody knows, and the recorded tokenizer name says so.
Works offline: tiktoken reads the encodings litellm ships with.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from domain.content import Entry, ImageRef, block_texts


def _litellm_file(relative: str) -> Path | None:
    """A data file litellm ships, found without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / relative
    return path if path.exists() else None


# tiktoken downloads encodings on first use unless they are in its cache
# directory; litellm ships cl100k_base, o200k_base and p50k_base there.
_shipped_encodings = _litellm_file("litellm_core_utils/tokenizers")
if _shipped_encodings and "TIKTOKEN_CACHE_DIR" not in os.environ:
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_shipped_encodings)

import tiktoken  # noqa: E402  (needs TIKTOKEN_CACHE_DIR first)

# What a provider adds around each message (role markers, separators).
MESSAGE_OVERHEAD_TOKENS = 4
# Providers bill an image by its size, which a reference does not tell.
IMAGE_TOKENS = 1_000
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Tokenizer:
    name: str
    encoding: tiktoken.Encoding | None

    def count_text(self, text: str) -> int:
        if self.encoding is None:
            return -(-len(text) // CHARS_PER_TOKEN)
        return len(self.encoding.encode(text, disallowed_special=()))

    def count_entry(self, entry: Entry) -> int:
        images = sum(1 for b in entry.content if isinstance(b, ImageRef))
        texts = [t for b in entry.content if not isinstance(b, ImageRef) for t in block_texts((b,))]
        return (
            MESSAGE_OVERHEAD_TOKENS
            + images * IMAGE_TOKENS
            + sum(self.count_text(text) for text in texts if text)
        )


def bare_model_name(model: str) -> str:
    """'openai/gpt-4o' -> 'gpt-4o'; litellm's provider prefix is not part of the name."""
    return model.rsplit("/", 1)[-1]


@lru_cache(maxsize=256)
def tokenizer_for(model: str) -> Tokenizer:
    bare = bare_model_name(model)
    try:
        encoding = tiktoken.encoding_for_model(bare)
        return Tokenizer(encoding.name, encoding)
    except KeyError:
        pass
    provider = model_metadata.provider(model)
    if provider:
        return Tokenizer(f"o200k_base~{provider}", tiktoken.get_encoding("o200k_base"))
    return Tokenizer("chars/4 (unknown model)", None)


class ModelMetadata:
    """Model facts (context window, provider) from litellm's model map.

    The map is the JSON file litellm ships; it is read directly, once, on
    first use (about 10 ms). Importing litellm itself takes seconds of CPU,
    which a server would spend competing with its first requests.
    """

    def __init__(self, model_map: Path | None = None) -> None:
        self._path = model_map or _litellm_file("model_prices_and_context_window_backup.json")
        self._lock = threading.Lock()
        self._models: dict[str, dict[str, Any]] | None = None

    def _info(self, model: str) -> dict[str, Any] | None:
        with self._lock:
            if self._models is None:
                self._models = json.loads(self._path.read_text()) if self._path else {}
        return self._models.get(model) or self._models.get(bare_model_name(model))

    def context_window(self, model: str) -> int | None:
        info = self._info(model)
        if not info:
            return None
        window = info.get("max_input_tokens") or info.get("max_tokens")
        return int(window) if window else None

    def provider(self, model: str) -> str | None:
        info = self._info(model)
        return info.get("litellm_provider") if info else None


model_metadata = ModelMetadata()
