"""Provider errors classified by litellm's own exception mapping, on real error bodies."""

from __future__ import annotations

import json

import pytest

from services.adapters.overflow import classify_provider_error, stated_limits


def _openai(message: str, code: str | None, kind: str = "invalid_request_error") -> str:
    error = {"message": message, "type": kind, "param": "messages", "code": code}
    return json.dumps({"error": error})


def _anthropic(kind: str, message: str) -> str:
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}})


CASES = [
    # OpenAI
    (
        _openai(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130000 tokens. Please reduce the length of the messages.",
            "context_length_exceeded",
        ),
        400,
        "openai",
        "gpt-4o",
        "context_window_exceeded",
    ),
    (
        _openai(
            "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): "
            "Limit 30000, Used 29000, Requested 2000. Please try again in 2s.",
            "rate_limit_exceeded",
            "tokens",
        ),
        429,
        "openai",
        "gpt-4o",
        "rate_limit",
    ),
    (
        _openai(
            "The server had an error while processing your request. Sorry about that!",
            None,
            "server_error",
        ),
        500,
        "openai",
        "gpt-4o",
        "server_error",
    ),
    (
        _openai("Incorrect API key provided: sk-test.", "invalid_api_key"),
        401,
        "openai",
        "gpt-4o",
        "other",
    ),
    (
        _openai("Invalid value for 'temperature': must be <= 2.", "invalid_value"),
        400,
        "openai",
        "gpt-4o",
        "other",
    ),
    # Anthropic
    (
        _anthropic("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
        400,
        "anthropic",
        "claude-sonnet-4-5",
        "context_window_exceeded",
    ),
    (
        _anthropic(
            "invalid_request_error",
            "input length and `max_tokens` exceed context limit: 197626 + 21333 > 200000, "
            "decrease input length or `max_tokens` and try again",
        ),
        400,
        "anthropic",
        "claude-sonnet-4-5",
        "context_window_exceeded",
    ),
    (
        _anthropic(
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
        ),
        429,
        "anthropic",
        "claude-sonnet-4-5",
        "rate_limit",
    ),
    (
        _anthropic("overloaded_error", "Overloaded"),
        529,
        "anthropic",
        "claude-sonnet-4-5",
        "server_error",
    ),
    (
        _anthropic("invalid_request_error", "messages: text content blocks must be non-empty"),
        400,
        "anthropic",
        "claude-sonnet-4-5",
        "other",
    ),
    # OpenAI-compatible local servers: vLLM, and llama.cpp (which litellm does not know).
    (
        json.dumps(
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens. However, you "
                "requested 5000 tokens (4000 in the messages, 1000 in the completion). "
                "Please reduce the length of the messages or completion.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ),
        400,
        "hosted_vllm",
        "qwen",
        "context_window_exceeded",
    ),
    (
        json.dumps(
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 5000,
                    "n_ctx": 4096,
                }
            }
        ),
        400,
        "llamacpp-server",
        "",
        "context_window_exceeded",
    ),
    ("Internal Server Error", 503, "openai", "", "server_error"),
    # The code context_length_exceeded, at any depth, is an overflow whatever the words:
    # OpenAI's Responses API, its streamed error event (code inside or at the top),
    # and Groq.
    (
        _openai(
            "Your input exceeds the context window of this model. Please adjust your input "
            "and try again.",
            "context_length_exceeded",
        ),
        400,
        "openai",
        "gpt-4o",
        "context_window_exceeded",
    ),
    (
        json.dumps(
            {
                "type": "error",
                "sequence_number": 2,
                "error": {
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                    "message": "Your input exceeds the context window of this model.",
                    "param": "input",
                },
            }
        ),
        400,
        "openai",
        "gpt-4o",
        "context_window_exceeded",
    ),
    (
        json.dumps(
            {
                "type": "error",
                "code": "context_length_exceeded",
                "message": "Your input exceeds the context window of this model.",
                "param": "input",
                "sequence_number": 2,
            }
        ),
        200,
        "openai",
        "gpt-4o",
        "context_window_exceeded",
    ),
    (
        _openai(
            "Please reduce the length of the messages or completion.", "context_length_exceeded"
        ),
        400,
        "groq",
        "llama-3.3-70b-versatile",
        "context_window_exceeded",
    ),
    # xAI, Cohere and Bedrock's words, through an OpenAI-compatible gateway too.
    (
        json.dumps(
            {
                "code": "Client specified an invalid argument",
                "error": "This model's maximum prompt length is 131072 but the request "
                "contains 136973 tokens.",
            }
        ),
        400,
        "xai",
        "grok-3",
        "context_window_exceeded",
    ),
    (
        json.dumps({"message": "too many tokens: size limit exceeded by 1234 tokens."}),
        400,
        "openai",
        "",
        "context_window_exceeded",
    ),
    (
        json.dumps({"message": "Input is too long for requested model."}),
        400,
        "openai",
        "",
        "context_window_exceeded",
    ),
    # Ollama's, which litellm maps to a connection error.
    (
        json.dumps({"error": "the input length exceeds the context length"}),
        400,
        "ollama",
        "llama3.1",
        "context_window_exceeded",
    ),
    # A request over a limit in bytes: Anthropic's 413, and a gateway's before any
    # provider. Shrinking the prompt helps, so it is an overflow, of its own kind.
    (
        _anthropic("request_too_large", "Request exceeds the maximum allowed number of bytes."),
        413,
        "anthropic",
        "claude-sonnet-4-5",
        "request_too_large",
    ),
    (
        "<html><head><title>413 Request Entity Too Large</title></head></html>",
        413,
        "openai",
        "gpt-4o",
        "request_too_large",
    ),
    # Another code is not an overflow.
    (
        _openai("Invalid value for 'temperature': must be <= 2.", "invalid_value"),
        200,
        "openai",
        "gpt-4o",
        "other",
    ),
]


@pytest.mark.parametrize(("text", "status", "provider", "model", "kind"), CASES)
def test_provider_errors_are_classified(
    text: str, status: int, provider: str, model: str, kind: str
) -> None:
    verdict = classify_provider_error(text, status, provider, model)
    assert verdict.kind == kind
    assert verdict.is_overflow == (kind in ("context_window_exceeded", "request_too_large"))
    assert verdict.message


STATED = [
    # OpenAI, as the API words it.
    (
        "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130000 tokens. Please reduce the length of the messages.",
        (128_000, 130_000, 0),
    ),
    # vLLM (and OpenAI's older wording): the messages and the completion apart.
    (
        "This model's maximum context length is 32768 tokens. However, you requested 33000 "
        "tokens (32000 in the messages, 1000 in the completion). Please reduce the length.",
        (32_768, 32_000, 1_000),
    ),
    ("prompt is too long: 208310 tokens > 200000 maximum", (200_000, 208_310, 0)),
    (
        "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease "
        "input length or `max_tokens` and try again",
        (200_000, 188_240, 21_333),
    ),
    (
        "The input token count (1234567) exceeds the maximum number of tokens allowed (1048576).",
        (1_048_576, 1_234_567, 0),
    ),
    (
        json.dumps(
            {
                "error": {
                    "code": 400,
                    "message": "request (40000 tokens) exceeds the available context size "
                    "(32768 tokens), try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 40000,
                    "n_ctx": 32768,
                }
            }
        ),
        (32_768, 40_000, 0),
    ),
    (
        "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 "
        "maximum context length",
        (32_768, 40_000, 0),
    ),
    # xAI: the most the prompt may hold, and the prompt.
    (
        "This model's maximum prompt length is 131072 but the request contains 136973 tokens.",
        (131_072, 136_973, 0),
    ),
    # Cohere: the limit is on the prompt and the answer's room together (the prompt it
    # received is under it): the window, and the prompt.
    (
        "too many tokens: total number of tokens in the prompt cannot exceed 32,768 - "
        "received 31907. Try using a shorter prompt or a smaller max_tokens value.",
        (32_768, 31_907, 0),
    ),
    # litellm passes the provider's words on inside its own.
    (
        "litellm.ContextWindowExceededError: litellm.BadRequestError: AnthropicException - "
        "prompt is too long: 40,000 tokens > 32,768 maximum",
        (32_768, 40_000, 0),
    ),
    ("Input is too long for requested model.", (0, 0, 0)),
    # Figures no model comes near state nothing: one of 5,000 digits is past what
    # int() reads, one of 22 past what a count may be stored as.
    ("This model's maximum context length is " + "9" * 5_000 + " tokens.", (0, 0, 0)),
    (
        "prompt is too long: 9999999999999999999999 tokens > 99999999999999999999 maximum",
        (0, 0, 0),
    ),
    ("prompt is too long: 2000000000000 tokens > 200000 maximum", (200_000, 0, 0)),
]


@pytest.mark.parametrize(("text", "figures"), STATED)
def test_the_figures_an_overflow_error_states_are_read(
    text: str, figures: tuple[int, int, int]
) -> None:
    assert stated_limits(text).as_tuple() == figures
    if any(figures):
        # An overflow in a provider's own words needs no classification by litellm.
        assert classify_provider_error(text, 400, "openai").is_overflow
