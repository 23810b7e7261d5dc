"""The identifier policy's ``anonymize``: each identifier replaced by a placeholder derived
from its hash, so the same identifier reads the same in every summary and every roll.

What is replaced: paths, URLs, e-mail addresses, ticket ids, hex ids and hashes,
hosts, and code names (functions, variables, declared classes) - everything that
says who or where. Versions, numbers with units, quoted literals and a
PascalCase word alone (a type or product name: ``ValueError``, ``PostgreSQL``)
stay as written.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from domain.context.summary.identifiers import (
    ANONYMIZED,
    EDGE_AFTER,
    EDGE_BEFORE,
    PLACEHOLDER,
    find_identifiers,
)


def placeholder(kind: str, value: str) -> str:
    return f"<{kind}-{hashlib.sha256(value.encode()).hexdigest()[:8]}>"


def anonymized(text: str) -> str:
    """``text`` with every identifier the patterns find replaced by its placeholder."""
    parts = []
    at = 0
    for found in find_identifiers(text, ANONYMIZED):
        parts.append(text[at : found.start])
        parts.append(placeholder(found.kind, found.value))
        at = found.start + len(found.value)
    parts.append(text[at:])
    return "".join(parts)


class Identifiers:
    """Keeps identifiers exactly, or replaces them with hash-derived placeholders.

    ``known`` (identifier -> kind) are the identifiers gathered from the entries:
    they are replaced wherever they stand, also where the patterns alone would
    not find them (a name seen in ``def check_password(`` is replaced in
    "check_password fails" too).
    """

    def __init__(self, policy: str, known: Mapping[str, str]) -> None:
        self.anonymize = policy == "anonymize"
        self._kinds = {value: kind for value, kind in known.items() if kind in ANONYMIZED}
        # Longest first, so a path is replaced before a file name inside it.
        values = sorted(self._kinds, key=lambda v: (-len(v), v)) if self.anonymize else []
        self._known = (
            re.compile("|".join(EDGE_BEFORE + re.escape(v) + EDGE_AFTER for v in values))
            if values
            else None
        )

    def __call__(self, text: str) -> str:
        if not self.anonymize:
            return text
        if self._known is not None:
            text = self._replace_known(text)
        return anonymized(text)

    def _replace_known(self, text: str) -> str:
        # Placeholders already in the text (from a previous summary) are left whole.
        shielded = [m.span() for m in PLACEHOLDER.finditer(text)]
        parts = []
        at = 0
        for match in self._known.finditer(text) if self._known else ():
            start, end = match.span()
            if any(s < end and start < e for s, e in shielded):
                continue
            value = match.group(0)
            parts.append(text[at:start] + placeholder(self._kinds[value], value))
            at = end
        parts.append(text[at:])
        return "".join(parts)
