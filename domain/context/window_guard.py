"""The context window guard: refuse a model whose window is too small to work in.

SPEC 3.1 (seed 000, 13.3, OpenClaw's ``context-window-guard.ts``): before every
model call the resolved window is checked. Below a hard minimum (16,000 tokens)
an agent cannot hold a system prompt, tools and one useful turn, so the call is
blocked with an error the client can act on (switch to a model with a larger
window, or correct the configured window). Below a warning threshold (32,000
tokens) the call goes ahead, but the client is told compaction will be
frequent.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

HARD_MIN_CONTEXT_TOKENS = 16_000
WARN_BELOW_CONTEXT_TOKENS = 32_000


class WindowLevel(StrEnum):
    OK = "ok"
    WARN = "warn"
    BLOCK = "block"


@dataclass(frozen=True, slots=True)
class WindowVerdict:
    """What the guard decided about one resolved window, and why, in the client's terms."""

    level: WindowLevel
    window_tokens: int
    # Where the window came from: session, modelsConfig, model or default.
    source: str
    hard_min_tokens: int
    warn_below_tokens: int
    message: str

    @property
    def blocked(self) -> bool:
        return self.level is WindowLevel.BLOCK

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level.value,
            "window_tokens": self.window_tokens,
            "source": self.source,
            "hard_min_tokens": self.hard_min_tokens,
            "warn_below_tokens": self.warn_below_tokens,
            "message": self.message,
        }


def check_context_window(
    window_tokens: int,
    source: str,
    *,
    hard_min_tokens: int = HARD_MIN_CONTEXT_TOKENS,
    warn_below_tokens: int = WARN_BELOW_CONTEXT_TOKENS,
) -> WindowVerdict:
    """Block below ``hard_min_tokens``, warn below ``warn_below_tokens``, else ok."""
    # Settings refuse thresholds out of order (WindowGuardPolicy.validate), but sessions
    # stored before they did may hold them: read in order, their views are served.
    hard_min_tokens = max(1, hard_min_tokens)
    warn_below_tokens = max(hard_min_tokens, warn_below_tokens)
    where = f"the context window of {window_tokens:,} tokens (from {source})"
    if window_tokens < hard_min_tokens:
        level = WindowLevel.BLOCK
        # A window set in context_window_tokens supersedes a learned one (see
        # Session.change_settings), so the remedy holds whatever the source.
        misconfigured = (
            "set context_window_tokens if the provider serves more than its overflow error "
            "stated (the window set supersedes the learned one)"
            if source == "learned"
            else "correct context_window_tokens if the window is misconfigured"
        )
        message = (
            f"{where} is below the hard minimum of {hard_min_tokens:,} tokens; the request "
            f"is blocked. Switch to a model with a larger context window, or {misconfigured}"
        )
    elif window_tokens < warn_below_tokens:
        level = WindowLevel.WARN
        message = (
            f"{where} is below {warn_below_tokens:,} tokens; the request continues, but "
            "the session will be compacted often. Consider a model with a larger context window"
        )
    else:
        level = WindowLevel.OK
        message = f"{where} is large enough"
    return WindowVerdict(level, window_tokens, source, hard_min_tokens, warn_below_tokens, message)
