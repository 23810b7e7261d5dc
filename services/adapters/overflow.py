"""Whether a provider's error means "the prompt was too long", as litellm reads it.

A client reporting a failed model call gives the store the provider's error
text and status; the store compacts and retries only when that error is a
context-window overflow (SPEC 3.3, trigger (a)). Rather than keep its own
list of providers' phrasings, the store asks litellm, which maintains one:
the error is built the way litellm's HTTP handler builds it from a response
(the provider config's ``get_error_class``) and run through litellm's
``exception_type`` mapping, exactly as a failed ``litellm.completion`` would.

litellm only looks for some phrasings under some providers (Anthropic's
"input length and `max_tokens` exceed context limit" is checked under OpenAI
only, Bedrock's "Input is too long" under Bedrock only), so a 400 that litellm
left unmapped is also checked against litellm's own list of overflow phrasings,
the ones it checks under one provider only, and those of providers it does not
know (llama.cpp, xAI, OpenAI's Responses API). An error whose JSON carries the
code ``context_length_exceeded`` (OpenAI's, Groq's, the Responses API's, in a
response or a streamed error event) is an overflow whatever its words.

A request refused for its size in bytes (HTTP 413 "Content Too Large", Anthropic's
``request_too_large``, a gateway's body limit) is one too, of its own kind
(``request_too_large``): shrinking the prompt is what helps, but the error bounds
the request's bytes, not the model's window in tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from domain.context.overflow import CONTEXT_WINDOW_EXCEEDED, REQUEST_TOO_LARGE
from services.adapters.litellm_loader import load_litellm

RATE_LIMIT = "rate_limit"
SERVER_ERROR = "server_error"
OTHER = "other"

# Overflow phrasings litellm checks under one provider only, or not at all
# (lowercase). A 400 whose text holds one is an overflow under any provider: an
# OpenAI-compatible gateway passes on the words of the provider behind it.
_OTHER_OVERFLOW_PHRASES = (
    "exceed_context_size_error",  # llama.cpp server's error type
    "exceeds the available context size",  # llama.cpp server's message
    "exceeds the context window",  # OpenAI Responses API: "Your input exceeds the ..."
    "maximum prompt length is",  # xAI: "This model's maximum prompt length is 131072 ..."
    "reduce the length of the messages",  # Groq, and OpenAI's older wording
    "input is too long",  # Bedrock, Replicate (litellm: under those only)
    "too many input tokens",  # Bedrock (litellm: under Bedrock only)
    "too many tokens:",  # Cohere: "too many tokens: total number of tokens in the ..."
    "prompt has too many tokens",  # AI21 (litellm: under AI21 only)
    "exceeds the context length",  # Ollama: "the input length exceeds the context length"
)
# The error code OpenAI, Groq and the Responses API give an overflow, as a JSON "code"
# (or "type") at any depth of the body or of a streamed error event, quotes escaped
# or not (an error body quoted inside another error's message).
_OVERFLOW_CODE = re.compile(r'\\?"(?:code|type)\\?"\s*:\s*\\?"context_length_exceeded\\?"', re.I)
# Anthropic's error type for a request over its limit in bytes (answered with 413).
_TOO_LARGE_TYPE = re.compile(r'\\?"type\\?"\s*:\s*\\?"request_too_large\\?"', re.I)


@dataclass(frozen=True, slots=True)
class OverflowVerdict:
    is_overflow: bool
    # "context_window_exceeded", "request_too_large" (over a limit in bytes: an
    # overflow too), "rate_limit", "server_error" or "other".
    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class StatedLimits:
    """The figures an overflow error states, 0 where it states none: the provider's
    window, its count of the refused prompt, and the answer's room the request asked."""

    window_tokens: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0

    def as_tuple(self) -> tuple[int, int, int]:
        return self.window_tokens, self.prompt_tokens, self.output_tokens


_N = r"(\d[\d,]*)"
# A trillion tokens: beyond any window or prompt, so a larger figure states nothing.
MAX_STATED_TOKENS = 10**12
# Each provider's phrasing, as its API words it (and litellm passes it on), with the
# figure each group holds. The first match of each figure wins.
_STATED = (
    # OpenAI, vLLM, LM Studio: "This model's maximum context length is 32768 tokens.
    # However, you requested 33000 tokens (32000 in the messages, 1000 in the
    # completion)" / "...your messages resulted in 130000 tokens" / "...your request
    # has 5000 input tokens".
    (re.compile(rf"maximum context length is {_N} tokens", re.I), ("window",)),
    (re.compile(rf"{_N} in the messages, {_N} in the completion", re.I), ("prompt", "output")),
    (re.compile(rf"messages resulted in {_N} tokens", re.I), ("prompt",)),
    (re.compile(rf"request has {_N} input tokens", re.I), ("prompt",)),
    (re.compile(rf"configured limit of {_N} tokens", re.I), ("window",)),
    # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum" and "input length
    # and `max_tokens` exceed context limit: 188240 + 21333 > 200000".
    (re.compile(rf"prompt is too long: {_N} tokens > {_N} maximum", re.I), ("prompt", "window")),
    (
        re.compile(rf"exceed context limit: {_N} \+ {_N} > {_N}", re.I),
        ("prompt", "output", "window"),
    ),
    # Gemini: "The input token count (1234567) exceeds the maximum number of tokens
    # allowed (1048576)."
    (
        re.compile(
            rf"input token count \({_N}\) exceeds the maximum number of tokens allowed \({_N}\)",
            re.I,
        ),
        ("prompt", "window"),
    ),
    # llama.cpp server: "request (40000 tokens) exceeds the available context size
    # (32768 tokens)", and its body's n_prompt_tokens / n_ctx.
    (
        re.compile(
            rf"request \({_N} tokens\) exceeds the available context size \({_N} tokens\)", re.I
        ),
        ("prompt", "window"),
    ),
    (re.compile(rf'"n_prompt_tokens"\s*:\s*{_N}'), ("prompt",)),
    (re.compile(rf'"n_ctx"\s*:\s*{_N}'), ("window",)),
    # xAI: "This model's maximum prompt length is 131072 but the request contains
    # 136973 tokens."
    (
        re.compile(rf"maximum prompt length is {_N} but the request contains {_N} tokens", re.I),
        ("window", "prompt"),
    ),
    # Cohere: "too many tokens: total number of tokens in the prompt cannot exceed 32768 -
    # received 31907": the limit is on the prompt and the answer's room together (the
    # prompt it received is under it), so it is the window, and what it received the
    # prompt.
    (
        re.compile(
            rf"total number of tokens in the prompt cannot exceed {_N}\s*-\s*received {_N}",
            re.I,
        ),
        ("window", "prompt"),
    ),
    # Mistral: "Prompt contains 40000 tokens and 0 draft tokens, too large for model
    # with 32768 maximum context length".
    (
        re.compile(rf"prompt contains {_N} tokens.*?model with {_N} maximum context length", re.I),
        ("prompt", "window"),
    ),
)


def stated_limits(error_text: str) -> StatedLimits:
    """The window, prompt count and answer's room an overflow error states."""
    found: dict[str, int] = {}
    for pattern, names in _STATED:
        match = pattern.search(error_text)
        if match is None:
            continue
        for name, value in zip(names, match.groups(), strict=True):
            figure = _figure(value)
            if figure is not None:
                found.setdefault(name, figure)
    return StatedLimits(found.get("window", 0), found.get("prompt", 0), found.get("output", 0))


def _figure(text: str) -> int | None:
    """A stated count of tokens, or None for a figure no model's window or prompt comes
    near: an error text is the client's to send, and a count stored from it must stay
    within 64 bits (and int() refuses strings of over 4,300 digits)."""
    digits = text.replace(",", "")
    if len(digits) > len(str(MAX_STATED_TOKENS)):
        return None
    value = int(digits)
    return value if value <= MAX_STATED_TOKENS else None


def kind_of(error: BaseException) -> str:
    """The kind of a litellm exception (or any exception: "other" when not litellm's)."""
    litellm = load_litellm()
    if isinstance(error, litellm.ContextWindowExceededError):
        return CONTEXT_WINDOW_EXCEEDED
    if isinstance(error, litellm.RateLimitError):
        return RATE_LIMIT
    if isinstance(
        error,
        litellm.InternalServerError
        | litellm.ServiceUnavailableError
        | litellm.BadGatewayError
        | litellm.Timeout
        | litellm.APIConnectionError,
    ):
        return SERVER_ERROR
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and status >= 500:
        return SERVER_ERROR
    message = str(getattr(error, "message", "") or error)
    if isinstance(error, litellm.BadRequestError) and mentions_overflow(message):
        return CONTEXT_WINDOW_EXCEEDED
    return OTHER


def mentions_overflow(text: str) -> bool:
    """litellm's own overflow phrasings, under any provider, and those it lacks."""
    load_litellm()
    from litellm.litellm_core_utils.exception_mapping_utils import ExceptionCheckers

    lowered = text.lower()
    return (
        "prompt is too long" in lowered
        or ExceptionCheckers.is_error_str_context_window_exceeded(text)
        or any(phrase in lowered for phrase in _OTHER_OVERFLOW_PHRASES)
    )


def has_overflow_code(text: str) -> bool:
    """Whether the error's JSON gives the code ``context_length_exceeded``: the provider
    says in so many words that the prompt was too long, however its message reads."""
    return _OVERFLOW_CODE.search(text) is not None


def classify_provider_error(
    error_text: str, status_code: int, provider: str, model: str = ""
) -> OverflowVerdict:
    """Classify a provider's error response (its body text and HTTP status).

    ``provider`` is litellm's provider name ("openai", "anthropic",
    "hosted_vllm", ...); one litellm does not know is treated as
    OpenAI-compatible, which is what local servers speak. An error stating an
    overflow's figures in a provider's own words is one without asking litellm,
    whose import costs seconds the first time.
    """
    stated = stated_limits(error_text)
    if status_code in (400, 413) and (stated.window_tokens or stated.prompt_tokens):
        return OverflowVerdict(True, CONTEXT_WINDOW_EXCEEDED, error_text[:1_000])
    if has_overflow_code(error_text):
        # Whatever the status: a streamed error event arrives in a 200 response.
        return OverflowVerdict(True, CONTEXT_WINDOW_EXCEEDED, error_text[:1_000])
    if status_code == 413 or _TOO_LARGE_TYPE.search(error_text):
        # Too many bytes, whoever refused them (the provider, or a gateway before it):
        # litellm takes a 413 for some other bad request.
        return OverflowVerdict(True, REQUEST_TOO_LARGE, error_text[:1_000])
    mapped = _map(error_text, status_code, provider or "openai", model or "unknown")
    kind = kind_of(mapped)
    # A 400 is the request's fault whatever litellm made of it (it maps every Ollama
    # error to a connection error): one worded as an overflow is one.
    if kind in (OTHER, SERVER_ERROR) and status_code == 400 and mentions_overflow(error_text):
        kind = CONTEXT_WINDOW_EXCEEDED
    if kind == OTHER and status_code == 429:
        kind = RATE_LIMIT
    message = str(getattr(mapped, "message", "") or mapped)
    return OverflowVerdict(kind == CONTEXT_WINDOW_EXCEEDED, kind, message)


def _map(error_text: str, status_code: int, provider: str, model: str) -> BaseException:
    """The exception litellm would raise for this response."""
    load_litellm()
    from litellm.litellm_core_utils.exception_mapping_utils import exception_type

    raw, mapped_provider = _provider_error(error_text, status_code, provider, model)
    try:
        exception_type(model=model, original_exception=raw, custom_llm_provider=mapped_provider)
    except Exception as mapped:
        return mapped
    return raw  # exception_type always raises; kept for the type checker


def _provider_error(
    error_text: str, status_code: int, provider: str, model: str
) -> tuple[Exception, str]:
    from litellm.llms.openai.common_utils import OpenAIError
    from litellm.types.utils import LlmProviders
    from litellm.utils import ProviderConfigManager

    try:
        config: Any = ProviderConfigManager.get_provider_chat_config(model, LlmProviders(provider))
    except ValueError:
        config = None
    if config is None:
        body = _json_body(error_text)
        return OpenAIError(status_code, error_text, body=body), "openai"
    error = config.get_error_class(error_text, status_code, {})
    if isinstance(error, OpenAIError):
        # The OpenAI client hands litellm the parsed body too; litellm reads its message.
        error.body = _json_body(error_text)
    return error, provider


def _json_body(text: str) -> dict[str, Any] | None:
    import json

    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        inner: dict[str, Any] = data["error"]
        return inner
    return data if isinstance(data, dict) else None
