"""Counting tokens once, at ingest, with the session model's tokenizer.

OpenAI models are counted exactly with tiktoken. Other models litellm knows
are counted with o200k_base and recorded as approximate; chars/4 is the last
resort for models nobody knows, and the recorded tokenizer name says so.
Works offline: tiktoken reads the encodings litellm ships with.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from domain.content import Entry, ImageRef, block_texts


def _point_tiktoken_at_shipped_encodings() -> None:
    # tiktoken downloads encodings on first use unless they are in its cache
    # directory; litellm ships cl100k_base, o200k_base and p50k_base there.
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return
    spec = importlib.util.find_spec("litellm")
    if spec and spec.submodule_search_locations:
        shipped = Path(spec.submodule_search_locations[0]) / "litellm_core_utils" / "tokenizers"
        if shipped.is_dir():
            os.environ["TIKTOKEN_CACHE_DIR"] = str(shipped)


_point_tiktoken_at_shipped_encodings()
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

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
    """litellm's model facts (context window, provider), loaded once, lazily.

    litellm takes seconds to import, so it is never imported at start-up on the
    request path; ``warm_up`` loads it in the background instead.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._get_model_info: Callable[[str], Any] | None = None

    def warm_up(self) -> None:
        threading.Thread(target=self._load, name="litellm-warm-up", daemon=True).start()

    def _load(self) -> Callable[[str], Any]:
        with self._lock:
            if self._get_model_info is None:
                import litellm

                self._get_model_info = litellm.get_model_info
            return self._get_model_info

    def _info(self, model: str) -> dict[str, Any] | None:
        try:
            return dict(self._load()(model))
        except Exception:
            # litellm raises a bare Exception for models it does not know.
            return None

    def context_window(self, model: str) -> int | None:
        info = self._info(model)
        if not info:
            return None
        return info.get("max_input_tokens") or info.get("max_tokens")

    def provider(self, model: str) -> str | None:
        info = self._info(model)
        return info.get("litellm_provider") if info else None


model_metadata = ModelMetadata()
