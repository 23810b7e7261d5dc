"""A rendered request checked against the official SDKs' own request types.

``openai`` and ``anthropic`` type their requests as TypedDicts, which pydantic
validates (their ``Iterable`` fields lazily: every one is drained here, so each
element is checked); ``google-genai`` has pydantic models of its own, which
forbid unknown fields.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import TypeAdapter, ValidationError


def sdk_problems(provider_format: str, request: dict[str, Any]) -> list[str]:
    """What the SDK's request types refuse in ``request`` ({"system", "tools", "messages"})."""
    checks = _checks()[provider_format]
    problems = []
    for field, check in checks.items():
        value = request.get(field)
        if value is None:
            continue
        try:
            check(value)
        except ValidationError as error:
            problems.append(f"{field}: {str(error)[:2000]}")
    return problems


def _adapter(kind: Any) -> Any:
    adapter = TypeAdapter(kind)

    def check(value: Any) -> None:
        _drain(adapter.validate_python(value))

    return check


def _drain(value: Any) -> None:
    """Iterates every lazily validated iterable, so its elements are checked."""
    if isinstance(value, dict):
        for item in value.values():
            _drain(item)
    elif isinstance(value, list | tuple) or type(value).__name__ == "ValidatorIterator":
        for item in value:
            _drain(item)


@cache
def _checks() -> dict[str, dict[str, Any]]:
    from anthropic.types.beta import BetaMessageParam, BetaTextBlockParam, BetaToolParam
    from google.genai import types as genai
    from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam
    from openai.types.responses import FunctionToolParam, ResponseInputParam

    def gemini_each(model: Any) -> Any:
        def check(values: Any) -> None:
            for value in values if isinstance(values, list) else [values]:
                model.model_validate(value)

        return check

    return {
        "openai": {
            "messages": _adapter(list[ChatCompletionMessageParam]),
            "tools": _adapter(list[ChatCompletionFunctionToolParam]),
        },
        "openai-responses": {
            "system": _adapter(str),
            "messages": _adapter(ResponseInputParam),
            "tools": _adapter(list[FunctionToolParam]),
        },
        "anthropic": {
            "system": _adapter(list[BetaTextBlockParam]),
            "messages": _adapter(list[BetaMessageParam]),
            "tools": _adapter(list[BetaToolParam]),
        },
        "gemini": {
            "system": gemini_each(genai.Content),
            "messages": gemini_each(genai.Content),
            "tools": gemini_each(genai.Tool),
        },
    }
