"""Retention on a schedule, in the worker, and the operator's dry run and apply.

The leading worker (services.readmodels.leadership) reads the policy file
(``SESSIONSTORE_RETENTION_FILE``), plans and applies it every
``SESSIONSTORE_RETENTION_INTERVAL_SECONDS``, first as soon as it leads; the
file is read again each time, so a changed policy takes effect at the next run
and a broken one applies nothing (logged) until fixed. Workers that wait for
the lead apply nothing. ``RetentionScheduler.counters`` holds what went so
far, for whoever exposes the worker's figures.

``sessionstore retention plan|apply`` run the same use case straight on the
database, as ``migrate`` does; they first bring the session catalog up to the
store's latest event, so the plan sees every session.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import structlog

from services.adapters.retention_file import read_policies
from services.app.retention import RetentionOutcome, RetentionPlan, RetentionService
from services.app.sessions import SessionService
from services.bootstrap import build_event_store, build_retention
from services.config import Config
from services.readmodels.runner import ReadModelRunner
from services.readmodels.service import build_read_models

# How often a worker that does not lead looks whether it has started leading.
LEAD_CHECK_SECONDS = 0.5
CATALOG = "catalog"

log = structlog.get_logger(__name__)


@dataclass
class RetentionCounters:
    """Totals since the worker started: runs, sessions erased (forks included),
    export files written, sessions left for a later run, removals that failed, runs
    that could not apply at all (a broken file, the database away)."""

    runs: int = 0
    erased: int = 0
    exported: int = 0
    skipped: int = 0
    failed: int = 0
    failed_runs: int = 0
    last_run_unix: float = 0.0

    def add(self, outcome: RetentionOutcome) -> None:
        self.runs += 1
        self.erased += len(outcome.erased)
        self.exported += len(outcome.exported)
        self.skipped += len(outcome.skipped)
        self.failed += len(outcome.failed)
        self.last_run_unix = time.time()


class RetentionScheduler:
    def __init__(
        self,
        retention: RetentionService,
        policy_file: Path,
        interval_seconds: float,
        leading: threading.Event,
    ) -> None:
        self.retention = retention
        self.policy_file = policy_file
        self.interval_seconds = interval_seconds
        self.leading = leading
        self.counters = RetentionCounters()
        # Called with each run's outcome (after the counters): for the worker's metrics.
        self.on_run: list[Callable[[RetentionOutcome], None]] = []

    def run_once(self) -> RetentionOutcome | None:
        """Reads the policies, plans and applies them; None when it could not run."""
        try:
            policies = read_policies(self.policy_file)
            plan = self.retention.plan(policies)
            outcome = self.retention.apply(plan, policies)
        except Exception as error:
            self.counters.failed_runs += 1
            log.error("retention: run failed, nothing more applied", error=str(error))
            return None
        self.counters.add(outcome)
        for hook in self.on_run:
            hook(outcome)
        log.info(
            "retention applied",
            policies=len(policies),
            planned=plan.session_count,
            held_back=len(plan.held),
            erased=len(outcome.erased),
            exported=len(outcome.exported),
            skipped=len(outcome.skipped),
            failed=len(outcome.failed),
            erased_total=self.counters.erased,
        )
        return outcome

    def run(self, stopping: threading.Event) -> None:
        """Applies the policies every interval while this worker leads, until ``stopping``."""
        log.info(
            "retention scheduled",
            file=str(self.policy_file),
            every_seconds=self.interval_seconds,
        )
        while not stopping.is_set():
            if not self.leading.is_set():
                stopping.wait(LEAD_CHECK_SECONDS)
                continue
            self.run_once()
            stopping.wait(self.interval_seconds)


@contextmanager
def _retention(database_url: str, at: datetime | None = None) -> Iterator[RetentionService]:
    """Retention on the database, its catalog caught up, no projection left running."""
    config = Config(database_url=database_url)
    events = build_event_store(config)
    try:
        models = build_read_models(
            events,
            database_url,
            run_projection=False,
            migrate_first=config.migrate_at_start,
            poll_seconds=0,
        )
        try:
            runner = ReadModelRunner(events, models.store, poll_seconds=0)
            head = events.recorder.max_notification_id() or 0
            position = models.store.positions([CATALOG])[CATALOG]
            while position < head:
                reached = models.store.catch_up(CATALOG, runner.fetch)[1]
                if reached <= position:
                    break  # another projector holds the model: take the catalog as it is
                position = reached
            sessions = SessionService(config, events)
            yield build_retention(sessions, models, (lambda: at) if at else None)
        finally:
            models.close()
    finally:
        events.close()


def plan_retention(
    database_url: str, policy_file: Path, at: datetime | None = None
) -> RetentionPlan:
    """The dry run: what the policies would remove at ``at`` (now), and why."""
    policies = read_policies(policy_file)
    with _retention(database_url, at) as retention:
        return retention.plan(policies)


def apply_retention(database_url: str, policy_file: Path) -> tuple[RetentionPlan, RetentionOutcome]:
    policies = read_policies(policy_file)
    with _retention(database_url) as retention:
        plan = retention.plan(policies)
        return plan, retention.apply(plan, policies)
