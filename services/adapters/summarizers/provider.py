"""The summariser chain's ``provider`` step: the conversation's provider compacts.

Instead of a summary written by a model the store chooses, the provider of the
conversation's own model compacts the part of the history the plan cuts off,
and answers its own compaction item, which the store records as a provider
compaction (that provider's view carries it verbatim in place of a summary):

* OpenAI (and OpenAI-compatible servers): ``POST /responses/compact`` through
  litellm's ``compact_responses``, with the history as Responses input items;
  the answer is the window to send on: the history's user messages, kept
  verbatim, then a ``compaction`` item (``encrypted_content``, opaque) for the
  rest. Both are recorded: the user messages as the items it retained.
* Anthropic: litellm has no call of its own for it, so the Messages API
  directly, compacting on demand (beta ``compact-2026-09-04``, the top-level
  ``compaction`` parameter): the API summarises every message sent and answers a
  signed ``compaction`` block alone, whose ``content`` is a readable summary. The
  block then leads every later request in place of the messages it summarises,
  the kept turns after it word for word, with the same beta header.

Failures are typed as the model summariser's are, so the chain goes on to its
next step on any of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from domain.content import ProviderItem
from services.adapters.litellm_loader import load_litellm
from services.adapters.model_info import bare_model_name
from services.adapters.overflow import CONTEXT_WINDOW_EXCEEDED, OTHER, kind_of
from services.adapters.summarizers.base import (
    SummarizerError,
    SummarizerOverflow,
    SummarizerUnavailable,
)

ANTHROPIC_BASE = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_BETA = "compact-2026-09-04"
# The summarising call's whole budget, thinking included: the API asks for several
# thousand tokens.
ANTHROPIC_MAX_TOKENS = 8_192


@dataclass(frozen=True, slots=True)
class ProviderCompaction:
    item: ProviderItem
    model: str
    prompt_hash: str
    input_tokens: int | None = None
    output_tokens: int | None = None
    duration_ms: int = 0
    # What the provider answered before its item, to be sent before it (OpenAI's).
    retained: tuple[ProviderItem, ...] = ()

    @property
    def items(self) -> tuple[ProviderItem, ...]:
        """What the provider's view carries, in order."""
        return (*self.retained, self.item)


def is_anthropic(model: str) -> bool:
    return model.startswith("anthropic/") or bare_model_name(model).startswith("claude")


class ProviderCompactor:
    """Compacts through the provider of ``model``; ``api_base`` where it is served."""

    name = "provider"
    window_tokens = 0  # the plan is the conversation's own, not a summariser's

    def __init__(self, model: str, api_base: str = "", api_key: str | None = None) -> None:
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        # The format its history is sent in (projections.prompt_formats).
        self.provider_format = "anthropic" if is_anthropic(model) else "openai-responses"

    def compact(
        self,
        messages: list[Any],
        system: Any,
        timeout_seconds: float,
        tools: list[Any] | None = None,
    ) -> ProviderCompaction:
        """The provider's compaction item for the history ``messages`` (in
        ``provider_format``) under ``system`` (None: no system prompt), with the
        conversation's ``tools`` (in that format)."""
        started = time.perf_counter()
        if self.provider_format == "anthropic":
            result = self._anthropic(messages, system, timeout_seconds, tools or [])
        else:
            result = self._openai(messages, system, timeout_seconds)
        elapsed = round((time.perf_counter() - started) * 1000)
        return ProviderCompaction(**{**result, "duration_ms": elapsed})

    def _openai(self, items: list[Any], instructions: Any, timeout: float) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": items}
        if isinstance(instructions, str) and instructions:
            body["instructions"] = instructions
        litellm = load_litellm()
        try:
            response: Any = litellm.compact_responses(
                **body,
                api_base=self.api_base or None,
                api_key=self.api_key,
                timeout=timeout,
                max_retries=0,
            )
        except Exception as error:
            raise _typed(error, self.model) from error
        output = [_as_dict(item) for item in getattr(response, "output", None) or []]
        at = next((i for i, o in enumerate(output) if o.get("type") == "compaction"), None)
        if at is None:
            raise SummarizerError("the provider answered no compaction item", model=self.model)
        usage = _as_dict(getattr(response, "usage", None) or {})
        return {
            "item": ProviderItem("openai", "compaction", _json(output[at])),
            "retained": tuple(
                ProviderItem("openai", str(o.get("type") or "message"), _json(o))
                for o in output[:at]
            ),
            "model": str(getattr(response, "model", "") or self.model),
            "prompt_hash": _hash(body),
            "input_tokens": usage.get("input_tokens"),
            "output_tokens": usage.get("output_tokens"),
        }

    def _anthropic(
        self, messages: list[Any], system: Any, timeout: float, tools: list[Any]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": bare_model_name(self.model),
            "max_tokens": ANTHROPIC_MAX_TOKENS,
            "messages": messages,
            "compaction": {"type": "summarize"},
        }
        if tools:
            # As the conversation sends them: the summariser reads them (it never runs
            # one), and thinking kept after the block stays valid only if they match.
            body["tools"] = tools
        if system:
            body["system"] = system
        key = self.api_key or os.environ.get("ANTHROPIC_API_KEY", "")
        request = urllib.request.Request(
            (self.api_base or ANTHROPIC_BASE).rstrip("/") + "/messages",
            data=json.dumps(body).encode(),
            headers={
                "content-type": "application/json",
                "x-api-key": key,
                "anthropic-version": ANTHROPIC_VERSION,
                "anthropic-beta": ANTHROPIC_BETA,
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                response = json.loads(answer.read())
        except urllib.error.HTTPError as error:
            raise _http_error(error, self.model) from error
        except (OSError, ValueError) as error:
            raise SummarizerUnavailable(str(error), model=self.model) from error
        blocks = response.get("content") or []
        found = next(
            (b for b in blocks if isinstance(b, dict) and b.get("type") == "compaction"), None
        )
        if found is None or not found.get("content"):
            # Answered 200 without a summary: the stop reason says why (max_tokens,
            # refusal, tool_use, model_context_window_exceeded).
            raise SummarizerError(
                "the provider wrote no summary (stop reason "
                f"{response.get('stop_reason') or 'none'})",
                model=self.model,
            )
        # The call is billed as the compaction iteration; the top-level usage is zero.
        usage = next(
            (
                i
                for i in (response.get("usage") or {}).get("iterations") or []
                if isinstance(i, dict) and i.get("type") == "compaction"
            ),
            response.get("usage") or {},
        )
        return {
            "item": ProviderItem("anthropic", "compaction", _json(found)),
            "model": str(response.get("model") or self.model),
            "prompt_hash": _hash(body),
            "input_tokens": usage.get("input_tokens"),
            "output_tokens": usage.get("output_tokens"),
        }


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    dump = getattr(value, "model_dump", None)
    return dump(exclude_none=True) if callable(dump) else dict(value)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _hash(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _typed(error: Exception, model: str) -> SummarizerError:
    kind = kind_of(error)
    status = getattr(error, "status_code", None)
    typed: type[SummarizerError] = SummarizerUnavailable
    if kind == CONTEXT_WINDOW_EXCEEDED:
        typed = SummarizerOverflow
    elif kind == OTHER:
        typed = SummarizerError
    return typed(str(getattr(error, "message", "") or error), status_code=status, model=model)


def _http_error(error: urllib.error.HTTPError, model: str) -> SummarizerError:
    try:
        message = json.loads(error.read()).get("error", {}).get("message", "") or str(error)
    except (ValueError, AttributeError):
        message = str(error)
    if error.code == 429 or error.code >= 500:
        return SummarizerUnavailable(message, status_code=error.code, model=model)
    if "too long" in message or ("context" in message and "exceed" in message):
        return SummarizerOverflow(message, status_code=error.code, model=model)
    return SummarizerError(message, status_code=error.code, model=model)
