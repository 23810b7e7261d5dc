"""How one read model's projection fares in this process: healthy, or failing since
when, why, and when it is tried again (exponential backoff with jitter)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from domain.errors import Unavailable

FIRST_BACKOFF_SECONDS = 0.1
MAX_BACKOFF_SECONDS = 5.0


@dataclass
class ModelState:
    failing_since: float | None = None  # time.time() of the first failure in a row
    error: str = ""
    # What a query needing the model answers while it fails for a state of the
    # database only an operator ends (tables missing, a grant lacking); None while
    # it fails for one that passes by itself (an outage) or for no such state.
    refusal: Unavailable | None = None
    attempts: int = 0  # failures in a row
    retry_at: float = 0.0  # time.monotonic()

    def retry_in(self) -> float:
        return max(0.0, self.retry_at - time.monotonic()) if self.failing_since else 0.0

    def failed(self, error: str, refusal: Unavailable | None) -> bool:
        """Counts one more failure and sets when to try again; True for the first of
        a row (the one worth a log line)."""
        first = self.failing_since is None
        if first:
            self.failing_since = time.time()
        self.error = error
        self.refusal = refusal
        self.attempts += 1
        delay = min(MAX_BACKOFF_SECONDS, FIRST_BACKOFF_SECONDS * 2 ** (self.attempts - 1))
        self.retry_at = time.monotonic() + random.uniform(delay / 2, delay)
        return first
