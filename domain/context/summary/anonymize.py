"""The identifier policy's ``anonymize``: each identifier replaced by a placeholder derived
from its hash, so the same identifier reads the same in every summary and every roll."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from domain.context.summary.patterns import HEX_ID, PATH


class Identifiers:
    """Keeps identifiers exactly, or replaces them with hash-derived placeholders."""

    def __init__(self, policy: str, known: Iterable[tuple[str, str]]) -> None:
        self.anonymize = policy == "anonymize"
        # Longest first, so a path is replaced before a file name inside it.
        self.known = sorted(set(known), key=lambda kv: (-len(kv[1]), kv))

    def __call__(self, text: str) -> str:
        if not self.anonymize:
            return text
        for kind, value in self.known:
            if value and value in text:
                text = text.replace(value, placeholder(kind, value))
        text = PATH.sub(_path_placeholder, text)
        return HEX_ID.sub(_id_placeholder, text)


def _path_placeholder(match: re.Match[str]) -> str:
    return placeholder("path", match.group(0))


def _id_placeholder(match: re.Match[str]) -> str:
    return placeholder("id", match.group(0))


def placeholder(kind: str, value: str) -> str:
    return f"<{kind}-{hashlib.sha256(value.encode()).hexdigest()[:8]}>"
