"""Bounded label values, for metrics and spans alike (no Prometheus client needed)."""

from __future__ import annotations

import threading


class BoundedLabels:
    """Label values as they come, up to ``limit`` distinct ones, then ``other``: what a
    client chooses (a model's name) must not grow the number of series without bound."""

    def __init__(self, limit: int = 100) -> None:
        self._limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        value = value or "none"
        if value in self._seen:
            return value
        with self._lock:
            if len(self._seen) >= self._limit:
                return "other"
            self._seen.add(value)
        return value
