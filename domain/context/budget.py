"""The one token figure every context decision uses, and the budgets the window gives.

Every rule that asks "does the prompt fit?" (the threshold that starts a
compaction, the compaction's plan and its check, the hard drop, the prompt
view's budget, the context report) asks it here, in one unit: the store's own
estimate (entries counted once at ingest) times the session's calibration,
which the provider's usage reports and overflow errors teach. A figure in the
provider's tokens is what the provider will count; :meth:`ContextBudget.in_estimate`
turns one back into the store's estimate, the unit entries are counted in.

The window is the smaller of the one the settings resolve to and the one the
provider's own overflow errors stated (``learned``). Settings left at 0 are
derived from that window, so a 16k window gets room for a summary and a 1M
window is not compacted at a few tens of thousands of tokens:

* ``reserve_tokens`` (room for the answer): min(16,384, window / 8)
* ``reserve_floor_tokens`` (free after a compaction): min(20,000, window / 4)
* ``keep_recent_tokens`` (newest entries a compaction keeps): window / 10
* ``summary_max_tokens`` (what a summary may take): min(4,096, window / 10)

The prompt may hold ``window - reserve`` (the budget); a compaction starts in
the background once it holds more than ``threshold_ratio x window`` (the
threshold), so views rarely wait for one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from domain.settings import CompactionPolicy

MAX_RESERVE_TOKENS = 16_384
MAX_RESERVE_FLOOR_TOKENS = 20_000
MAX_SUMMARY_TOKENS = 4_096


def derived_reserve(window_tokens: int) -> int:
    return min(MAX_RESERVE_TOKENS, window_tokens // 8)


def derived_reserve_floor(window_tokens: int) -> int:
    return min(MAX_RESERVE_FLOOR_TOKENS, window_tokens // 4)


def derived_keep_recent(window_tokens: int) -> int:
    return window_tokens // 10


def derived_summary_max(window_tokens: int) -> int:
    return min(MAX_SUMMARY_TOKENS, window_tokens // 10)


@dataclass(frozen=True, slots=True)
class ContextBudget:
    """What one session's prompt may hold now, in the provider's tokens, and how the
    store's estimate converts to them (``calibration``: provider tokens per estimated
    token)."""

    window_tokens: int
    calibration: float
    # Room kept for the answer: the settings' or derived, or more when the provider
    # said the client asks for more (an overflow naming its max_tokens).
    reserve_tokens: int
    # Over this a compaction starts (in the background); the view may still be served.
    threshold_tokens: int
    # The most a view may hold: the window less the reserve, or less when asked.
    budget_tokens: int
    # A compaction leaves the prompt at or below this: under the threshold and
    # max_history_share of the window, with at least the reserve floor free.
    target_tokens: int
    keep_recent_tokens: int
    summary_max_tokens: int

    def provider_tokens(self, estimate: int) -> int:
        """What the provider will count for ``estimate`` of the store's tokens."""
        return math.ceil(estimate * self.calibration)

    def in_estimate(self, provider_tokens: int) -> int:
        """The store's estimate that the provider counts as at most ``provider_tokens``."""
        return math.floor(provider_tokens / self.calibration)

    def fits(self, estimate: int) -> bool:
        return self.provider_tokens(estimate) <= self.budget_tokens

    def over_threshold(self, estimate: int) -> bool:
        return self.provider_tokens(estimate) > self.threshold_tokens

    @property
    def budget_estimate(self) -> int:
        """The budget in the store's estimate: what compaction plans against."""
        return self.in_estimate(self.budget_tokens)

    @property
    def target_estimate(self) -> int:
        return self.in_estimate(self.target_tokens)

    def describe(self) -> str:
        """The budget's terms, for messages that must say what limits the prompt."""
        calibrated = f" x calibration {self.calibration:g}" if self.calibration != 1 else ""
        return (
            f"{self.budget_tokens:,} tokens (window {self.window_tokens:,} less "
            f"{self.reserve_tokens:,} reserved for the answer; the store's estimate"
            f"{calibrated} is compared with it)"
        )


def context_budget(
    window_tokens: int,
    policy: CompactionPolicy,
    *,
    calibration: float = 1.0,
    learned_reserve_tokens: int = 0,
    asked_tokens: int | None = None,
) -> ContextBudget:
    """The budget of a prompt for a window of ``window_tokens`` (already the smaller of
    the resolved and the learned one), the compaction policy's explicit figures
    winning over the derived ones. ``asked_tokens`` is a client's tighter budget."""
    window = max(1, window_tokens)
    reserve = policy.reserve_tokens or derived_reserve(window)
    reserve = max(reserve, learned_reserve_tokens)
    # A reserve as large as the window leaves nothing: keep at least a tenth for the prompt.
    reserve = min(reserve, window - max(1, window // 10))
    budget = window - reserve
    if asked_tokens is not None:
        budget = max(1, min(budget, asked_tokens))
    threshold = min(math.floor(window * policy.threshold_ratio), budget)
    floor = policy.reserve_floor_tokens or derived_reserve_floor(window)
    history = math.floor(window * policy.max_history_share)
    target = max(1, min(threshold, window - floor, history))
    keep = policy.keep_recent_tokens or derived_keep_recent(window)
    summary = policy.summary_max_tokens or derived_summary_max(window)
    return ContextBudget(
        window_tokens=window,
        calibration=calibration if calibration > 0 else 1.0,
        reserve_tokens=reserve,
        threshold_tokens=threshold,
        budget_tokens=budget,
        target_tokens=target,
        keep_recent_tokens=keep,
        summary_max_tokens=summary,
    )
