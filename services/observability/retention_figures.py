"""What retention removed, on the worker's /metrics: the scheduler's own totals,
read at each scrape (services.app.retention_scheduler keeps them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from services.app.retention_scheduler import RetentionScheduler

# Counter name (without _total) -> the counters' field, and what it counts.
COUNTED = {
    "sessionstore_retention_runs": ("runs", "Retention runs that planned and applied."),
    "sessionstore_retention_erased_sessions": (
        "erased",
        "Sessions retention erased, forks included.",
    ),
    "sessionstore_retention_exported_sessions": (
        "exported",
        "Sessions retention exported before erasing them.",
    ),
    "sessionstore_retention_skipped_sessions": (
        "skipped",
        "Planned sessions left for a later run (written, forked or no longer due).",
    ),
    "sessionstore_retention_failed_sessions": (
        "failed",
        "Removals that failed (an export or an erasure); the session stays.",
    ),
    "sessionstore_retention_failed_runs": (
        "failed_runs",
        "Runs that applied nothing (a broken policy file, the database away).",
    ),
}


class RetentionCollector(Collector):
    def __init__(self, scheduler: RetentionScheduler) -> None:
        self._scheduler = scheduler

    def describe(self) -> list[Any]:
        return []  # collected fresh each scrape

    def collect(self) -> Iterator[Any]:
        counters = self._scheduler.counters
        for name, (field, help_text) in COUNTED.items():
            yield CounterMetricFamily(name, help_text, value=getattr(counters, field))
        last = GaugeMetricFamily(
            "sessionstore_retention_last_run_timestamp_seconds",
            "When the last run that applied ended (Unix time; 0: none yet).",
        )
        last.add_metric([], counters.last_run_unix)
        yield last
