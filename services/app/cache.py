"""A least-recently-used cache bounded by the estimated bytes of what it holds.

Session histories grow while cached, so each is weighed again whenever it is
touched; the cache evicts the coldest until it fits.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

# Resident memory per byte of cached objects: the allocator keeps freed
# memory of evicted sessions in partly used arenas.
RSS_PER_LIVE_BYTE = 1.4

# What one entry of a per-session map (a session's tenant, its latest saved
# version) keeps alive: the session id, a small value and the map's slot
# (live bytes, tracemalloc over 100,000 entries), scaled like the rest.
SESSION_ENTRY_BYTES = 260 * RSS_PER_LIVE_BYTE


def per_session_entry(_: object) -> float:
    """The weight of any entry of a per-session map."""
    return SESSION_ENTRY_BYTES


K = TypeVar("K")
V = TypeVar("V")


class WeightedLRU(Generic[K, V]):
    def __init__(self, max_weight: int, weigh: Callable[[V], float]) -> None:
        self.max_weight = max_weight
        self._weigh = weigh
        self._items: OrderedDict[K, tuple[V, float]] = OrderedDict()
        self._total = 0.0
        self._lock = threading.Lock()
        # Since start, for the metrics (read without the lock: a scrape may be a
        # lookup behind).
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    @property
    def weight(self) -> float:
        return self._total

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self.hits += 1
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: K, value: V) -> None:
        """Adds or re-weighs ``value`` (call again after it has grown)."""
        weight = self._weigh(value)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._total -= old[1]
            self._items[key] = (value, weight)
            self._total += weight
            # Keep the newest even when it alone is over the cap: it is in use.
            while self._total > self.max_weight and len(self._items) > 1:
                _, (_, evicted) = self._items.popitem(last=False)
                self._total -= evicted
                self.evictions += 1

    def discard(self, key: K) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._total -= old[1]
