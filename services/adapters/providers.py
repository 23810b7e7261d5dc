"""Named credentials for summarising models: the server's providers file.

A session's summariser chain names a provider (``openai/qwen2.5@local``); the
file named by ``SESSIONSTORE_PROVIDERS_FILE`` says where that provider serves
and how to authenticate, so no key is ever written into settings or events::

    [local]                                   # an OpenAI-compatible server
    api_base = "http://127.0.0.1:8000/v1"     # no key: it needs none

    [cheap]
    api_key_env = "OPENAI_API_KEY"            # the key, read from this variable

    [anthropic-prod]
    api_key_file = "/run/secrets/anthropic"   # or from this file
    window_tokens = 200000                    # the models' window, if litellm does not know it

Keys are read when a summariser is built, so a rotated secret file takes
effect at the next compaction.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from domain.errors import InvalidSettings, quoted

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")
_FIELDS = {"api_base", "api_key_env", "api_key_file", "window_tokens"}


class ProvidersFileError(ValueError):
    """The providers file cannot be read as one: the server does not start."""


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    api_base: str = ""
    api_key_env: str = ""
    api_key_file: str = ""
    window_tokens: int = 0

    def api_key(self) -> str | None:
        """The key, read now; None when the provider names none (a local server)."""
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise InvalidSettings(
                    f"provider {quoted(self.name)} reads its key from ${self.api_key_env}, "
                    "which is not set in the server's environment"
                )
            return key
        if self.api_key_file:
            try:
                return Path(self.api_key_file).read_text().strip()
            except OSError as error:
                raise InvalidSettings(
                    f"provider {quoted(self.name)} reads its key from {self.api_key_file}, "
                    f"which cannot be read: {error.strerror}"
                ) from None
        return None


@dataclass(frozen=True)
class Providers:
    by_name: Mapping[str, Provider]

    def get(self, name: str) -> Provider:
        provider = self.by_name.get(name)
        if provider is None:
            raise InvalidSettings(self._unknown(name))
        return provider

    def check(self, names: Iterable[str]) -> None:
        """Refuses settings naming a provider this server does not have."""
        for name in sorted(names):
            if name not in self.by_name:
                raise InvalidSettings(self._unknown(name))

    def _unknown(self, name: str) -> str:
        known = ", ".join(sorted(self.by_name)) or "none (SESSIONSTORE_PROVIDERS_FILE is not set)"
        return (
            f"provider {quoted(name)} is not in this server's providers file; its providers: "
            f"{known}"
        )


NO_PROVIDERS = Providers({})


@lru_cache(maxsize=8)
def load_providers(path: Path | None) -> Providers:
    """The providers of a file (none without one)."""
    if path is None:
        return NO_PROVIDERS
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ProvidersFileError(f"providers file {path}: {error}") from None
    return Providers({name: _provider(name, fields, path) for name, fields in data.items()})


def _provider(name: str, fields: Any, path: Path) -> Provider:
    if not _NAME.fullmatch(name) or not isinstance(fields, dict):
        raise ProvidersFileError(
            f"providers file {path}: [{name}] must be a table named with a letter first, "
            "then letters, digits, _ . -"
        )
    if "api_key" in fields:
        raise ProvidersFileError(
            f"providers file {path}: [{name}] writes its key in the file; name the variable "
            "(api_key_env) or the secret file (api_key_file) that holds it instead"
        )
    unknown = set(fields) - _FIELDS
    if unknown:
        raise ProvidersFileError(
            f"providers file {path}: [{name}] has unknown keys {sorted(unknown)}; "
            f"allowed: {sorted(_FIELDS)}"
        )
    if fields.get("api_key_env") and fields.get("api_key_file"):
        raise ProvidersFileError(
            f"providers file {path}: [{name}] names both api_key_env and api_key_file"
        )
    window_tokens = fields.get("window_tokens", 0)
    # TOML gives the value its own type: a list, a string or a float is a mistake
    # to name, not to convert (bool is an int to Python, not a count).
    if not isinstance(window_tokens, int) or isinstance(window_tokens, bool) or window_tokens < 0:
        raise ProvidersFileError(
            f"providers file {path}: [{name}] window_tokens must be a whole number of tokens "
            f"(0: the model's own window), not {window_tokens!r}"
        )
    return Provider(
        name,
        str(fields.get("api_base", "")),
        str(fields.get("api_key_env", "")),
        str(fields.get("api_key_file", "")),
        window_tokens,
    )
