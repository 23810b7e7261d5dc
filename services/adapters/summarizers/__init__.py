"""Summarisers for compaction: offline (the default) or a model through litellm."""

from __future__ import annotations

from services.adapters.summarizers.base import (
    Summarizer,
    SummarizerError,
    SummarizerOverflow,
    SummarizerUnavailable,
    SummaryResult,
)
from services.adapters.summarizers.llm import LiteLLMSummarizer
from services.adapters.summarizers.offline import OFFLINE, OfflineSummarizer


def build_summarizer(model: str, api_base: str = "", window_tokens: int = 0) -> Summarizer:
    """The summariser for a configured model name: "" or "offline" needs no model."""
    if model.strip() in ("", OFFLINE):
        return OfflineSummarizer()
    return LiteLLMSummarizer(
        model.strip(), api_base=api_base or None, window_tokens=window_tokens or None
    )


__all__ = [
    "OFFLINE",
    "LiteLLMSummarizer",
    "OfflineSummarizer",
    "Summarizer",
    "SummarizerError",
    "SummarizerOverflow",
    "SummarizerUnavailable",
    "SummaryResult",
    "build_summarizer",
]
