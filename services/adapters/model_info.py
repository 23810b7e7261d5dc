"""Model facts (context window, provider) from the model map litellm ships."""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path
from typing import Any


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


class ModelMetadata:
    """Model facts (context window, provider) from litellm's model map.

    The map is the JSON file litellm ships; it is read directly, once, on
    first use (about 10 ms). Importing litellm itself takes seconds of CPU,
    which a server would spend competing with its first requests.
    """

    def __init__(self, model_map: Path | None = None) -> None:
        self._path = model_map or litellm_file("model_prices_and_context_window_backup.json")
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
