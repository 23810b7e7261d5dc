"""A server that keeps the read models itself (``inprocess``, as `make run` starts
it) applies the retention policies on their schedule, on both databases: a session
idle past its policy's limit is erased, the server then answers it as erased over
gRPC, even one it had read before, and its /metrics count what went. Of
two such servers on one PostgreSQL database one applies, and the other takes over
when it stops; so with a worker given the file too. A server that leaves the read
models to a worker applies nothing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.app.sessions import SessionService
from services.bootstrap import build_service
from services.config import Config
from services.grpc.server import RunningServer
from services.readmodels.leadership import TRY_SECONDS
from tests.conftest import start_server
from tests.e2e.test_retention_worker import POLICY, RUN, days_ago
from tests.support.old_sessions import import_old_session
from tests.support.prometheus import scrape, value
from tests.support.worker_process import WorkerProcess

INTERVAL = 0.3
# Long enough for a client to read a session between two runs.
SLOW_INTERVAL = 3.0
CHAT = {"app": "chat"}


def writer(database_url: str) -> Iterator[SessionService]:
    """Another writer on the same database: what the servers find stored."""
    service = build_service(Config(database_url=database_url, projections="off"))
    yield service
    service.close()


@pytest.fixture
def sessions(database_url: str) -> Iterator[SessionService]:
    yield from writer(database_url)


@pytest.fixture
def postgres_sessions(postgres_schema_url: str) -> Iterator[SessionService]:
    yield from writer(postgres_schema_url)


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "retention.toml"
    path.write_text(POLICY)
    return path


def retaining(
    database_url: str, policy_file: Path, interval: float = INTERVAL, **settings: object
) -> RunningServer:
    return start_server(
        database_url,
        projections="inprocess",
        retention_file=policy_file,
        retention_interval_seconds=interval,
        **settings,
    )


def runs(server: RunningServer) -> int:
    assert server.app.retention is not None
    return server.app.retention.scheduler.counters.runs


def wait_until(holds: Callable[[], bool], what: str, within: float = 60) -> None:
    give_up_at = time.monotonic() + within
    while not holds():
        if time.monotonic() > give_up_at:
            raise TimeoutError(f"not within {within} s: {what}")
        time.sleep(0.05)


def erased_over_grpc(server: RunningServer, session_id: str) -> bool:
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        store = pb_grpc.SessionStoreStub(channel)
        return store.GetSession(pb.GetSessionRequest(session_id=session_id)).HasField("erased")


def takes_over(sessions: SessionService, server: RunningServer) -> None:
    """The server, now alone to hold the retention lock, leads and erases a due session."""
    import_old_session(sessions, "acme/idle", [days_ago(100), days_ago(40)], CHAT)
    wait_until(
        lambda: sessions.aggregate("acme/idle").erased,
        "the server taking the lead and erasing",
        within=60 + 10 * TRY_SECONDS,
    )
    # The run is counted once it ends, a moment after its erasures.
    wait_until(lambda: runs(server) >= 1, "the server counting its run")


def test_a_server_keeping_the_read_models_applies_the_policies(
    database_url: str, sessions: SessionService, policy_file: Path
) -> None:
    import_old_session(sessions, "acme/idle", [days_ago(100), days_ago(40)], CHAT)
    import_old_session(sessions, "acme/active", [days_ago(100), days_ago(2)], CHAT)
    import_old_session(sessions, "globex/idle", [days_ago(100), days_ago(40)], CHAT)
    server = retaining(database_url, policy_file, SLOW_INTERVAL, metrics_address="127.0.0.1:0")
    try:
        wait_until(lambda: sessions.aggregate("acme/idle").erased, "acme/idle erased")
        # A session this server has read, due at the next run (seconds on): once
        # erased, the server answers so.
        import_old_session(sessions, "acme/later", [days_ago(100), days_ago(31)], CHAT)
        assert not erased_over_grpc(server, "acme/later")
        wait_until(lambda: erased_over_grpc(server, "acme/later"), "acme/later erased")
        assert sessions.history("acme/later").erasures()[0].erased_by == "retention"
        for kept in ("acme/active", "globex/idle"):
            assert not sessions.aggregate(kept).erased
            assert not erased_over_grpc(server, kept)
        exposition = scrape(server.metrics_port)
        assert value(exposition, "sessionstore_retention_erased_sessions_total") == 2
        assert value(exposition, "sessionstore_retention_failed_sessions_total") == 0
        assert value(exposition, "sessionstore_retention_runs_total") >= 2
    finally:
        server.stop(0)


def test_of_two_servers_one_applies_and_the_other_takes_over(
    postgres_schema_url: str, postgres_sessions: SessionService, policy_file: Path
) -> None:
    sessions = postgres_sessions
    first = retaining(postgres_schema_url, policy_file)
    second = retaining(postgres_schema_url, policy_file)
    servers = [first, second]
    try:
        wait_until(lambda: max(runs(s) for s in servers) >= 3, "three runs")
        leader, other = sorted(servers, key=runs, reverse=True)
        assert runs(other) == 0
        leader.stop(0)
        servers.remove(leader)
        takes_over(sessions, other)
    finally:
        for server in servers:
            server.stop(0)


def test_with_a_worker_given_the_file_too_one_of_them_applies(
    postgres_schema_url: str, postgres_sessions: SessionService, policy_file: Path
) -> None:
    sessions = postgres_sessions
    worker = WorkerProcess(
        postgres_schema_url,
        retention_file=str(policy_file),
        retention_interval_seconds=str(INTERVAL),
    )
    server: RunningServer | None = None
    try:
        worker.wait_for(RUN, 60)  # it holds the retention lock
        server = retaining(postgres_schema_url, policy_file)
        worker_runs = len(worker.logged(RUN))
        wait_until(lambda: len(worker.logged(RUN)) >= worker_runs + 3, "three more runs")
        assert runs(server) == 0
        # The worker gone, the server leads and applies.
        assert worker.stop() == 0
        takes_over(sessions, server)
    finally:
        worker.end()
        if server is not None:
            server.stop(0)


def test_a_server_that_leaves_the_read_models_to_a_worker_applies_nothing(
    database_url: str, sessions: SessionService, policy_file: Path
) -> None:
    import_old_session(sessions, "acme/idle", [days_ago(100), days_ago(40)], CHAT)
    server = start_server(
        database_url,
        projections="worker",
        retention_file=policy_file,
        retention_interval_seconds=INTERVAL,
    )
    try:
        assert server.app.retention is None
        time.sleep(10 * INTERVAL)
        assert not sessions.aggregate("acme/idle").erased
    finally:
        server.stop(0)
