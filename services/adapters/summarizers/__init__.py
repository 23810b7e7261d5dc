"""Summarisers for compaction: offline (the default) or a model through litellm."""

from __future__ import annotations

import os

from domain.context.chain import SummarizerStep
from services.adapters.providers import NO_PROVIDERS, Providers
from services.adapters.summarizers.base import (
    Summarizer,
    SummarizerError,
    SummarizerOverflow,
    SummarizerUnavailable,
    SummaryResult,
)
from services.adapters.summarizers.llm import LiteLLMSummarizer
from services.adapters.summarizers.offline import OFFLINE, OfflineSummarizer
from services.adapters.summarizers.provider import ProviderCompactor

# What an OpenAI-compatible client is given for a server that takes no key: the
# client insists on one, and a local server ignores it.
NO_KEY = "sessionstore-no-key"


def build_summarizer(
    step: SummarizerStep, providers: Providers = NO_PROVIDERS
) -> Summarizer | ProviderCompactor:
    """The summariser one step of a chain runs (a model step, offline, or the
    conversation's provider compacting on its side)."""
    if not step.is_model:
        return OfflineSummarizer()
    provider = providers.get(step.provider) if step.provider else None
    api_base = step.api_base or (provider.api_base if provider else "")
    api_key = provider.api_key() if provider else None
    if api_key is None and api_base and not _environment_key(step.model):
        api_key = NO_KEY
    if step.remote:
        return ProviderCompactor(step.model, api_base, api_key)
    window = step.window_tokens or (provider.window_tokens if provider else 0)
    return LiteLLMSummarizer(
        step.model, api_base=api_base or None, api_key=api_key, window_tokens=window or None
    )


def _environment_key(model: str) -> bool:
    """Whether litellm finds a key for the model's provider in the environment
    (OPENAI_API_KEY for openai/..., ANTHROPIC_API_KEY for anthropic/...)."""
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    return bool(os.environ.get(f"{provider.upper()}_API_KEY"))


__all__ = [
    "NO_KEY",
    "OFFLINE",
    "LiteLLMSummarizer",
    "OfflineSummarizer",
    "ProviderCompactor",
    "Summarizer",
    "SummarizerError",
    "SummarizerOverflow",
    "SummarizerUnavailable",
    "SummaryResult",
    "build_summarizer",
]
