"""A summariser backed by a model, through litellm.

Any model litellm can call summarises: hosted (``openai/gpt-4o-mini``,
``anthropic/claude-haiku-4-5``) or local (an OpenAI-compatible server at
``api_base``). Keys come from the environment as litellm reads them
(``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY`` ...) unless one is given. litellm is
imported on the first call, never at start-up.

litellm's exceptions are mapped to the engine's three outcomes: an overflow
(the engine splits the chunk), a retryable failure (the engine backs off and
retries) and anything else (the compaction fails with the provider's word).
The provider SDK's own retries are turned off so the engine's policy is the
only one.
"""

from __future__ import annotations

import time
from typing import Any

from domain.context.summary import SummaryPrompt, prompt_hash, with_required_facts
from services.adapters.litellm_loader import load_litellm
from services.adapters.model_info import ModelMetadata, model_metadata
from services.adapters.overflow import CONTEXT_WINDOW_EXCEEDED, OTHER, kind_of
from services.adapters.summarizers.base import (
    SummarizerError,
    SummarizerOverflow,
    SummarizerUnavailable,
    SummaryRequest,
    SummaryResult,
    with_notes,
)
from services.adapters.tokenizers import CHARS_PER_TOKEN, MESSAGE_OVERHEAD_TOKENS, tokenizer_for

# A model litellm's map does not know (a local one, say) is assumed this small,
# so chunks are sized safely; pass window_tokens to use more of a larger window.
DEFAULT_WINDOW_TOKENS = 32_768


class LiteLLMSummarizer:
    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        window_tokens: int | None = None,
        temperature: float = 0,
        metadata: ModelMetadata = model_metadata,
    ) -> None:
        if not model:
            raise ValueError("a model name is required")
        self.name = model
        self.api_base = api_base or None
        self._api_key = api_key or None
        self.temperature = temperature
        self.window_tokens = (
            window_tokens or metadata.context_window(model) or DEFAULT_WINDOW_TOKENS
        )

    def __repr__(self) -> str:
        return f"LiteLLMSummarizer({self.name!r}, api_base={self.api_base!r})"

    def count_tokens(self, prompt: SummaryPrompt) -> int:
        """The request's tokens, each message's framing included, counted on the text sent:
        the model's tokenizer (o200k for the models it has none of), or characters / 4
        where that is more (a provider's tokenizer may merge far fewer characters than
        o200k does in repetitive output), so a request is never sent too large."""
        tokenizer = tokenizer_for(self.name)
        return sum(
            MESSAGE_OVERHEAD_TOKENS
            + max(tokenizer.count_text(m.content), -(-len(m.content) // CHARS_PER_TOKEN))
            for m in prompt.messages
        )

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        prompt = request.prompt()
        litellm = load_litellm()
        started = time.perf_counter()
        try:
            response: Any = litellm.completion(
                model=self.name,
                messages=prompt.to_list(),
                api_base=self.api_base,
                api_key=self._api_key,
                timeout=request.timeout_seconds,
                max_tokens=request.max_output_tokens,
                temperature=self.temperature,
                max_retries=0,
            )
        except Exception as error:
            raise self._typed(error) from error
        elapsed = round((time.perf_counter() - started) * 1000)
        text = _text(response)
        if not text.strip():
            raise SummarizerError("the summarising model returned no text", model=self.name)
        usage = getattr(response, "usage", None)
        # A model may drop what the user said (an instruction, a ticket id): put it back.
        text = with_required_facts(
            with_notes(text.strip(), request.notes),
            request.entries,
            request.previous_summary,
            identifier_policy=request.identifier_policy,
        )
        return SummaryResult(
            text=text,
            model=str(getattr(response, "model", "") or self.name),
            prompt_hash=prompt_hash(prompt),
            input_tokens=getattr(usage, "prompt_tokens", None),
            output_tokens=getattr(usage, "completion_tokens", None),
            duration_ms=elapsed,
        )

    def _typed(self, error: Exception) -> SummarizerError:
        kind = kind_of(error)
        status = _provider_status(error)
        provider = str(getattr(error, "llm_provider", "") or "")
        message = str(getattr(error, "message", "") or error)
        typed: type[SummarizerError]
        if kind == CONTEXT_WINDOW_EXCEEDED:
            typed = SummarizerOverflow
        elif kind == OTHER:
            typed = SummarizerError
        else:
            typed = SummarizerUnavailable
        return typed(
            message,
            status_code=status,
            provider=provider,
            model=self.name,
        )


def _text(response: Any) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError):
        return ""
    return content if isinstance(content, str) else ""


def _provider_status(error: BaseException) -> int | None:
    """The status the provider sent: litellm's mapped exception may carry its own (an
    Anthropic 529 "overloaded" becomes a 500), the provider's error it was mapped from
    carries the real one."""
    status = None
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = getattr(current, "status_code", None)
        if isinstance(code, int):
            status = code
        current = current.__cause__ or current.__context__
    return status
