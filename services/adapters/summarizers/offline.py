"""The summariser that needs no model, no key and no network: the default.

It wraps the domain's :func:`summarize_offline`, so a store with no model
configured (or none reachable) still compacts with a structured summary. Its
window is effectively unlimited: it reads entries, it does not tokenise a
prompt, so the engine never has to split its chunks. A smaller
``window_tokens`` makes the engine plan its calls as it would for a model of
that window (a dry run of a model's compaction, with no model).
"""

from __future__ import annotations

import math
import time

from domain.context.summary import SummaryPrompt, prompt_hash, summarize_offline
from services.adapters.summarizers.base import (
    SummaryRequest,
    SummaryResult,
)
from services.adapters.tokenizers import tokenizer_for

OFFLINE = "offline"
# The summary is bounded in the tokenizer the store counts most models with (o200k),
# so its count matches the one the compaction checks it against (characters / 4
# would let a Chinese summary grow to several times its room).
BOUNDING_MODEL = "gpt-4o"
UNLIMITED_WINDOW_TOKENS = 10**9


def _chars_over_four(text: str) -> int:
    return math.ceil(len(text) / 4)


class OfflineSummarizer:
    def __init__(self, window_tokens: int = UNLIMITED_WINDOW_TOKENS) -> None:
        self.name = OFFLINE
        self.window_tokens = window_tokens

    def count_tokens(self, prompt: SummaryPrompt) -> int:
        """What a model of this window would count, at 4 characters a token: for planning
        calls as a model would be called (a dry run); the writer itself sends nothing."""
        return sum(_chars_over_four(m.content) for m in prompt.messages)

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        started = time.perf_counter()
        # The hash of the prompt a model would have been sent, so receipts compare.
        fingerprint = prompt_hash(request.prompt())
        text = summarize_offline(
            request.entries,
            previous_summary=request.previous_summary,
            instructions=request.instructions,
            identifier_policy=request.identifier_policy,
            notes=request.notes,
            count=tokenizer_for(BOUNDING_MODEL).count_text,
            max_tokens=request.max_output_tokens,
        )
        elapsed = round((time.perf_counter() - started) * 1000)
        return SummaryResult(text, OFFLINE, fingerprint, duration_ms=elapsed)
