"""Retention on a schedule, in whichever process holds the retention lock: a
worker, or a server that keeps the read models itself (``inprocess``).

The process that leads (``LeadingRetention``; the lock is
services.readmodels.leadership's ``RETENTION_LOCK``, apart from the workers'
projection lock) reads the policy file (``SESSIONSTORE_RETENTION_FILE``),
plans and applies it every ``SESSIONSTORE_RETENTION_INTERVAL_SECONDS``, first
as soon as it leads; the file is read again each time, so a changed policy
takes effect at the next run and a broken one applies nothing (logged) until
fixed. Processes that wait for the lead apply nothing, so of workers and
servers given the file on one PostgreSQL database exactly one applies it.
``RetentionScheduler.counters`` holds what went so far, for the process's
/metrics.

``sessionstore retention plan|apply`` run the same use case straight on the
database (services.bootstrap.retention_on_database).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from services.adapters.retention_file import read_policies
from services.app.retention import RetentionOutcome, RetentionService

# How often a process that does not lead looks whether it has started leading.
LEAD_CHECK_SECONDS = 0.5

log = structlog.get_logger(__name__)


@dataclass
class RetentionCounters:
    """Totals since the process started: runs, sessions erased (forks included),
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
        # Called with each run's outcome, after the counters.
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
        """Applies the policies every interval while this process leads, until ``stopping``."""
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


# Runs until its first event is set, keeping the second set while this process leads.
Lead = Callable[[threading.Event, threading.Event], None]


class LeadingRetention:
    """Retention in a worker or a server: the scheduler runs while ``lead`` says this
    process leads, in two threads from ``start`` until ``close``."""

    def __init__(self, scheduler: RetentionScheduler, lead: Lead) -> None:
        self.scheduler = scheduler
        self._lead = lead
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        leading = self.scheduler.leading
        self._threads = [
            threading.Thread(
                target=self._lead, args=(self._stopping, leading), name="retention-lead"
            ),
            threading.Thread(target=self.scheduler.run, args=(self._stopping,), name="retention"),
        ]
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        """Stops them; a run under way ends first (its erasures are each whole)."""
        self._stopping.set()
        for thread in self._threads:
            thread.join()
