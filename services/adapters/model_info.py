"""Model facts (context window, provider) from the model map litellm ships."""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path
from typing import Any, NamedTuple


def litellm_file(relative: str) -> Path | None:
    """A data file litellm ships, found without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / relative
    return path if path.exists() else None


def bare_model_name(model: str) -> str:
    """'openai/gpt-4o' -> 'gpt-4o'; litellm's provider prefix is not part of the name."""
    return model.rsplit("/", 1)[-1]


class ModelFacts(NamedTuple):
    context_window: int | None
    provider: str | None


def _facts(info: Any) -> ModelFacts:
    if not isinstance(info, dict):
        return ModelFacts(None, None)
    window = info.get("max_input_tokens") or info.get("max_tokens")
    provider = info.get("litellm_provider")
    return ModelFacts(
        int(window) if isinstance(window, int | float) and window else None,
        provider if isinstance(provider, str) else None,
    )


class ModelMetadata:
    """Model facts (context window, provider) from litellm's model map.

    The map is the JSON file litellm ships; it is read directly, once, on
    first use (about 10 ms). Importing litellm itself takes seconds of CPU,
    which a server would spend competing with its first requests. Only the
    facts used are kept: the whole map (prices, features of some 2,600
    models) held 2 MB of the server's heap.
    """

    def __init__(self, model_map: Path | None = None) -> None:
        self._path = model_map or litellm_file("model_prices_and_context_window_backup.json")
        self._lock = threading.Lock()
        self._models: dict[str, ModelFacts] | None = None

    def _facts(self, model: str) -> ModelFacts | None:
        with self._lock:
            if self._models is None:
                entries = json.loads(self._path.read_text()) if self._path else {}
                self._models = {name: _facts(info) for name, info in entries.items()}
        return self._models.get(model) or self._models.get(bare_model_name(model))

    def context_window(self, model: str) -> int | None:
        facts = self._facts(model)
        return facts.context_window if facts else None

    def provider(self, model: str) -> str | None:
        facts = self._facts(model)
        return facts.provider if facts else None


model_metadata = ModelMetadata()
