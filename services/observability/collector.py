"""Figures of state, read when Prometheus scrapes: nothing is kept between scrapes.

The read models' positions against the store's head (one query each), the
caches' sizes and their hits, misses and evictions so far, and the database
connection pools. A figure that cannot be read now (the database is down) is
left out of that scrape rather than failing it: the scrape itself still
tells that the server is up, and ``sessionstore_read_model_up`` says what
could not be read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import structlog
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from services.app.cache import WeightedLRU
from services.readmodels import ReadModels

log = structlog.get_logger(__name__)


class StateCollector(Collector):
    def __init__(
        self,
        caches: Callable[[], dict[str, WeightedLRU[Any, Any]]] = dict,
        event_store_pool: Any | None = None,
        read_models: ReadModels | None = None,
        lost_races: Callable[[], int] | None = None,
    ) -> None:
        self._caches = caches
        self._pool = event_store_pool
        self._read_models = read_models
        self._lost_races = lost_races
        self._failing = False

    def describe(self) -> list[Any]:
        return []  # families vary with what is set up; collected fresh each scrape

    def collect(self) -> Iterator[Any]:
        yield from self._cache_figures()
        if self._lost_races is not None:
            yield CounterMetricFamily(
                "sessionstore_write_races_lost",
                "Saves that found this server's copy of the session stale (another server "
                "had stored that version), made again on the store's copy.",
                value=self._lost_races(),
            )
        if self._pool is not None:
            yield from _psycopg_pool_figures(self._pool)
        if self._read_models is not None:
            yield from self._read_model_figures(self._read_models)

    def _cache_figures(self) -> Iterator[Any]:
        caches = self._caches()
        families: dict[str, Any] = {
            "bytes": GaugeMetricFamily(
                "sessionstore_cache_bytes",
                "Estimated memory the cache holds, of the cache cap.",
                labels=["cache"],
            ),
            "items": GaugeMetricFamily(
                "sessionstore_cache_items", "Items the cache holds.", labels=["cache"]
            ),
            "hits": CounterMetricFamily(
                "sessionstore_cache_hits", "Lookups the cache answered.", labels=["cache"]
            ),
            "misses": CounterMetricFamily(
                "sessionstore_cache_misses", "Lookups the cache could not answer.", labels=["cache"]
            ),
            "evictions": CounterMetricFamily(
                "sessionstore_cache_evictions",
                "Items the cache dropped to stay within its budget.",
                labels=["cache"],
            ),
        }
        for name, cache in sorted(caches.items()):
            families["bytes"].add_metric([name], cache.weight)
            families["items"].add_metric([name], len(cache))
            families["hits"].add_metric([name], cache.hits)
            families["misses"].add_metric([name], cache.misses)
            families["evictions"].add_metric([name], cache.evictions)
        yield from families.values()

    def _read_model_figures(self, read_models: ReadModels) -> Iterator[Any]:
        # Kept in memory: told even when the database cannot be read.
        yield GaugeMetricFamily(
            "sessionstore_read_model_waiting_queries",
            "Queries of this process waiting now for the read models to reach their position.",
            value=read_models.waiting,
        )
        up = GaugeMetricFamily(
            "sessionstore_read_model_up",
            "1 when the read models' status could be read for this scrape.",
        )
        try:
            statuses = read_models.status()
        except Exception as error:
            if not self._failing:  # once per outage, not once per scrape
                log.warning("cannot read the read models' status for metrics", error=str(error))
            self._failing = True
            up.add_metric([], 0)
            yield up
            return
        self._failing = False
        up.add_metric([], 1)
        yield up
        projecting = GaugeMetricFamily(
            "sessionstore_read_models_projecting",
            "1 while this process keeps the read models (a server with in-process "
            "projections, or the worker that leads).",
        )
        runner = read_models.runner
        projecting.add_metric([], 1 if runner is not None and runner.running else 0)
        yield projecting
        position = GaugeMetricFamily(
            "sessionstore_read_model_position",
            "The store position each read model has applied.",
            labels=["model"],
        )
        lag = GaugeMetricFamily(
            "sessionstore_read_model_lag_events",
            "Events of the store each read model has yet to apply.",
            labels=["model"],
        )
        quarantined = GaugeMetricFamily(
            "sessionstore_read_model_quarantined_events",
            "Events each read model could not apply and went past (see readmodels retry).",
            labels=["model"],
        )
        failing = GaugeMetricFamily(
            "sessionstore_read_model_failing",
            "1 while this process's projection of the model cannot catch up and backs off.",
            labels=["model"],
        )
        head = GaugeMetricFamily(
            "sessionstore_event_store_position", "The store's latest position (notification id)."
        )
        for status in statuses:
            position.add_metric([status.name], status.position)
            lag.add_metric([status.name], status.lag)
            quarantined.add_metric([status.name], status.quarantined)
            failing.add_metric([status.name], 1 if status.failing_since is not None else 0)
        if statuses:
            head.add_metric([], statuses[0].head)
        yield from (position, lag, quarantined, failing, head)


def _psycopg_pool_figures(pool: Any) -> Iterator[Any]:
    stats = pool.get_stats()
    size = stats.get("pool_size", 0)
    available = stats.get("pool_available", 0)
    connections = GaugeMetricFamily(
        "sessionstore_db_pool_connections",
        "The event store's database connections, in use or idle.",
        labels=["state"],
    )
    connections.add_metric(["in_use"], max(0, size - available))
    connections.add_metric(["idle"], available)
    yield connections
    maximum = GaugeMetricFamily(
        "sessionstore_db_pool_max_connections", "The most connections the pool opens."
    )
    maximum.add_metric([], stats.get("pool_max", 0))
    yield maximum
    waiting = GaugeMetricFamily(
        "sessionstore_db_pool_waiting", "Requests waiting now for a connection."
    )
    waiting.add_metric([], stats.get("requests_waiting", 0))
    yield waiting
    waits = CounterMetricFamily(
        "sessionstore_db_pool_waits", "Requests that had to wait for a connection."
    )
    waits.add_metric([], stats.get("requests_queued", 0))
    yield waits
    wait_seconds = CounterMetricFamily(
        "sessionstore_db_pool_wait_seconds", "Time requests spent waiting for a connection."
    )
    wait_seconds.add_metric([], stats.get("requests_wait_ms", 0) / 1000)
    yield wait_seconds
    errors = CounterMetricFamily(
        "sessionstore_db_pool_errors", "Requests for a connection that failed."
    )
    errors.add_metric([], stats.get("requests_errors", 0))
    yield errors
