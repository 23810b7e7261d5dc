"""Small checks the providers' validators share."""

from __future__ import annotations

from typing import Any

from domain.tool_call_ids import ID_FORMS


def call_id_problem(where: str, call_id: Any, provider_format: str) -> str | None:
    """Why ``call_id`` is no tool call id the provider of ``provider_format`` takes."""
    form = ID_FORMS[provider_format]
    if not isinstance(call_id, str) or not form.accepts(call_id):
        return (
            f"{where}: tool call id {call_id!r} is not {form.pattern.pattern} of at most "
            f"{form.max_chars} characters"
        )
    return None


def text_problem(where: str, value: Any, *, blank_ok: bool = False) -> str | None:
    if not isinstance(value, str):
        return f"{where}: text must be a string, not {type(value).__name__}"
    if not blank_ok and not value.strip():
        return f"{where}: text must not be blank"
    return None
