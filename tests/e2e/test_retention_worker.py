"""The worker applies the retention policies on its schedule, as a deployment runs it
(``python -m services.worker``), on both databases: a session idle past
its policy's limit is erased at the first run, one that becomes due later at a later
run, and sessions no policy makes due stay. Each run logs what went, with the total
so far; on PostgreSQL a worker that waits for the lead applies nothing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from services.app.sessions import SessionService
from services.bootstrap import build_service
from services.config import Config
from tests.support.old_sessions import import_old_session
from tests.support.pg_cluster import free_port
from tests.support.prometheus import ensure_installed, promtool_check, scrape, value
from tests.support.worker_process import LEADING, WAITING, WorkerProcess

RUN = "retention applied"
INTERVAL = "0.3"
POLICY = """
[[retention]]
name = "chat-idle"
tenant = "acme"
labels = { app = "chat" }
idle_days = 30
"""


def days_ago(days: float) -> datetime:
    return datetime.now(UTC).replace(microsecond=0) - timedelta(days=days)


@pytest.fixture
def sessions(database_url: str) -> Iterator[SessionService]:
    service = build_service(Config(database_url=database_url, projections="off"))
    yield service
    service.close()


def runs_after(
    worker: WorkerProcess, count: int, until: Callable[[list[dict[str, Any]]], bool] = bool
) -> list[dict[str, Any]]:
    """The runs the worker logged after its first ``count``, once ``until`` holds of them
    (by default: once there is one); fails after a minute."""
    give_up_at = time.monotonic() + 60
    while not until(later := worker.logged(RUN)[count:]):
        if worker.process.poll() is not None or time.monotonic() > give_up_at:
            raise TimeoutError(worker.log_path.read_text())
        time.sleep(0.05)
    return later


def wait_for_erasure(worker: WorkerProcess, runs_before: int) -> None:
    runs_after(worker, runs_before, lambda runs: any(r["erased"] for r in runs))


def test_the_worker_applies_the_policies_on_its_schedule(
    database_url: str, sessions: SessionService, tmp_path: Path
) -> None:
    import_old_session(sessions, "acme/idle", [days_ago(100), days_ago(40)], {"app": "chat"})
    import_old_session(sessions, "acme/active", [days_ago(100), days_ago(2)], {"app": "chat"})
    import_old_session(sessions, "globex/idle", [days_ago(100), days_ago(40)], {"app": "chat"})
    policy_file = tmp_path / "retention.toml"
    policy_file.write_text(POLICY)
    ensure_installed()
    metrics_port = free_port()
    worker = WorkerProcess(
        database_url,
        retention_file=str(policy_file),
        retention_interval_seconds=INTERVAL,
        metrics_address=f"127.0.0.1:{metrics_port}",
    )
    try:
        wait_for_erasure(worker, 0)
        assert sessions.aggregate("acme/idle").erased
        # Runs go on, on schedule: a session that becomes due is erased by a later one.
        runs = len(worker.logged(RUN))
        import_old_session(sessions, "acme/later", [days_ago(100), days_ago(31)], {"app": "chat"})
        wait_for_erasure(worker, runs)
        assert sessions.aggregate("acme/later").erased
        for kept in ("acme/active", "globex/idle"):
            assert not sessions.aggregate(kept).erased
        # The next run finds nothing left to do, and says so with the total so far.
        last = runs_after(worker, len(worker.logged(RUN)))[0]
        assert (last["erased"], last["erased_total"], last["failed"]) == (0, 2, 0)
        # The worker's /metrics says as much.
        exposition = scrape(metrics_port)
        checked = promtool_check(exposition)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert value(exposition, "sessionstore_retention_erased_sessions_total") == 2
        assert value(exposition, "sessionstore_retention_failed_sessions_total") == 0
        assert value(exposition, "sessionstore_retention_runs_total") >= 3
        assert value(exposition, "sessionstore_retention_last_run_timestamp_seconds") > 0
        assert sessions.history("acme/later").erasures()[0].erased_by == "retention"
    finally:
        assert worker.stop() == 0
        worker.end()


def test_without_a_policy_file_the_worker_removes_nothing(
    database_url: str, sessions: SessionService
) -> None:
    import_old_session(sessions, "acme/ancient", [days_ago(3000), days_ago(2000)])
    worker = WorkerProcess(database_url, retention_interval_seconds=INTERVAL)
    try:
        worker.wait_for("retention: no policy file", 60)
        worker.wait_for(LEADING if database_url.startswith("postgres") else "projecting", 60)
        assert not worker.said(RUN)
        assert not sessions.aggregate("acme/ancient").erased
    finally:
        assert worker.stop() == 0
        worker.end()


def test_a_broken_file_applies_nothing_until_it_is_fixed(
    database_url: str, sessions: SessionService, tmp_path: Path
) -> None:
    import_old_session(sessions, "acme/idle", [days_ago(100), days_ago(40)], {"app": "chat"})
    policy_file = tmp_path / "retention.toml"
    policy_file.write_text(POLICY.replace("idle_days = 30", "idle_days = -30"))
    worker = WorkerProcess(
        database_url, retention_file=str(policy_file), retention_interval_seconds=INTERVAL
    )
    try:
        worker.wait_for("retention: run failed", 60)
        (failed, *_) = worker.logged("retention: run failed")
        assert "idle_days must be from 0 to 36,500 days" in failed["error"]
        assert not sessions.aggregate("acme/idle").erased
        # Read again at every run: once fixed, the next run applies it.
        policy_file.write_text(POLICY)
        wait_for_erasure(worker, 0)
        assert sessions.aggregate("acme/idle").erased
    finally:
        assert worker.stop() == 0
        worker.end()


def test_only_the_leading_worker_applies_them(postgres_schema_url: str, tmp_path: Path) -> None:
    sessions = build_service(Config(database_url=postgres_schema_url, projections="off"))
    policy_file = tmp_path / "retention.toml"
    policy_file.write_text(POLICY)
    settings = {"retention_file": str(policy_file), "retention_interval_seconds": INTERVAL}
    first = WorkerProcess(postgres_schema_url, **settings)
    second: WorkerProcess | None = None
    try:
        first.wait_for(RUN, 60)
        second = WorkerProcess(postgres_schema_url, **settings)
        second.wait_for(WAITING, 60)
        import_old_session(sessions, "acme/idle", [days_ago(100), days_ago(40)], {"app": "chat"})
        wait_for_erasure(first, 0)
        assert sessions.aggregate("acme/idle").erased
        assert not second.said(RUN)
        # The leader gone, the other leads and applies.
        assert first.stop() == 0
        second.wait_for(RUN, 60)
    finally:
        first.end()
        if second is not None:
            second.stop()
            second.end()
        sessions.close()
