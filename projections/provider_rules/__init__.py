"""Each provider's rules for a request, written once, as explicit validators.

A validator takes a request as its prompt view gives it (``{"system", "tools",
"messages"}``, see projections.prompt_formats.request_of) and answers what in it
the provider would refuse, one line per problem (none: the provider accepts it).
They state the rules the renderer keeps (tool calls paired, turns alternating,
ids in the provider's form, opaque items where the provider takes them); the
tests hold every rendered view to them, beside the official SDKs' request types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from projections.provider_rules import anthropic, gemini, openai_chat, openai_responses

Validator = Callable[[dict[str, Any]], list[str]]

VALIDATORS: dict[str, Validator] = {
    "openai": openai_chat.validate,
    "openai-responses": openai_responses.validate,
    "anthropic": anthropic.validate,
    "gemini": gemini.validate,
}


def problems(provider_format: str, request: dict[str, Any]) -> list[str]:
    """What the provider of ``provider_format`` would refuse in ``request``."""
    return VALIDATORS[provider_format](request)
