"""The forms of tool call ids each provider accepts, and the rewriting into them.

A session keeps every tool call under the id it was given, whatever made it:
another provider's model, a runtime that adds a suffix, an import. A prompt
view shows an id its provider would refuse (Anthropic takes only
``^[a-zA-Z0-9_-]+$``; OpenAI chat at most 40 characters) under a rewritten
one, the same in every view, and a result appended for the rewritten id lands
on the original call (``original_call_id``). The log itself never changes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class IdForm:
    """Characters and length a provider accepts in a tool call id."""

    pattern: re.Pattern[str]
    max_chars: int

    def accepts(self, call_id: str) -> bool:
        return len(call_id) <= self.max_chars and self.pattern.fullmatch(call_id) is not None

    def rewrite(self, call_id: str) -> str:
        """``call_id`` if the provider takes it; else its allowed characters (others as
        ``_``), cut to fit, and a hash of the whole id that keeps it unique."""
        if self.accepts(call_id):
            return call_id
        digest = hashlib.sha256(call_id.encode()).hexdigest()[:HASH_CHARS]
        kept = _DISALLOWED.sub("_", call_id)[: self.max_chars - HASH_CHARS - 1]
        return f"{kept}_{digest}" if kept else f"call_{digest}"


HASH_CHARS = 12
_DISALLOWED = re.compile(r"[^A-Za-z0-9_-]")
_SAFE = re.compile(r"[A-Za-z0-9_-]+")

# Per prompt format. OpenAI chat refuses ids over 40 characters; Responses and
# Anthropic are held to the form Anthropic documents. Gemini pairs a response with
# its call by whatever id the call has, and its own calls' ids (kept verbatim with
# their thought signatures) must come back as they are: it keeps every id.
ID_FORMS: dict[str, IdForm] = {
    "openai": IdForm(_SAFE, 40),
    "openai-responses": IdForm(_SAFE, 64),
    "anthropic": IdForm(_SAFE, 64),
    "gemini": IdForm(re.compile(r".+", re.DOTALL), 1 << 20),
}


def view_call_id(call_id: str, provider_format: str) -> str:
    """The id the view in ``provider_format`` shows for ``call_id``."""
    return ID_FORMS[provider_format].rewrite(call_id)


def original_call_id(given: str, open_calls: Iterable[str]) -> str:
    """The open call a result for ``given`` answers: ``given`` itself, or the open call a
    view showed as ``given`` (its id rewritten); ``given`` when none."""
    calls = list(open_calls)
    if given in calls:
        return given
    forms = set(ID_FORMS.values())
    for call_id in calls:
        if any(form.rewrite(call_id) == given for form in forms):
            return call_id
    return given
