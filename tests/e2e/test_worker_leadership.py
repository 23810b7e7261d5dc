"""Two projection workers on one PostgreSQL database, as real processes: one leads
and applies the events, the other waits; when the leader is killed (SIGKILL) the
other takes over within seconds and the read models catch up, every event
applied once."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import grpc
import psycopg
import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.grpc.server import RunningServer
from services.readmodels.admin import rebuild_read_model
from services.readmodels.leadership import TRY_SECONDS
from tests.conftest import start_server
from tests.e2e.test_read_models import TABLES, _caught_up, _history, _models, dump
from tests.support.worker_process import LEADING, WAITING, WorkerProcess

# From SIGKILL to the survivor leading: its next try after PostgreSQL ends the
# dead session (at once on loopback), with room for a busy 2-core machine.
TAKEOVER_WITHIN_SECONDS = 10 * TRY_SECONDS


def lock_holders(database_url: str, workers: list[WorkerProcess]) -> list[int]:
    """The process ids, among ``workers``, whose connection holds an advisory lock."""
    names = [f"{w.process.pid}" for w in workers]
    with psycopg.connect(database_url.split("?")[0]) as connection:
        rows = connection.execute(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
            "WHERE l.locktype = 'advisory' AND l.granted "
            "AND a.application_name LIKE 'sessionstore-worker %'"
        ).fetchall()
    held = [str(row[0]).rpartition(" ")[2] for row in rows]
    return [int(pid) for pid in held if pid in names]


@pytest.fixture
def server(postgres_schema_url: str) -> Iterator[RunningServer]:
    running = start_server(postgres_schema_url, projections="worker")
    yield running
    running.stop(0)


def test_one_worker_leads_the_other_takes_over_when_it_is_killed(
    server: RunningServer, postgres_schema_url: str
) -> None:
    models = _models(server)
    first = WorkerProcess(postgres_schema_url)
    second: WorkerProcess | None = None
    try:
        first.wait_for(LEADING, 60)
        second = WorkerProcess(postgres_schema_url)
        second.wait_for(WAITING, 60)
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = pb_grpc.SessionStoreStub(channel)
            for n in range(6):
                store.CreateSession(pb.CreateSessionRequest(session_id=f"a{n}"))
                _history(store, f"a{n}")
            # The leader applied them; the other still waits, holding no lock.
            listed = store.ListSessions(pb.ListSessionsRequest(page_size=100), timeout=30)
            assert len(listed.sessions) == 6
            assert not second.said(LEADING)
            assert lock_holders(postgres_schema_url, [first, second]) == [first.process.pid]

            first.process.send_signal(signal.SIGKILL)
            first.process.wait()
            # Written while no one leads: the next leader finds them.
            for n in range(6):
                store.CreateSession(pb.CreateSessionRequest(session_id=f"b{n}"))
                _history(store, f"b{n}")
            second.wait_for(LEADING, TAKEOVER_WITHIN_SECONDS)
            assert lock_holders(postgres_schema_url, [first, second]) == [second.process.pid]
            listed = store.ListSessions(pb.ListSessionsRequest(page_size=100), timeout=30)
            assert len(listed.sessions) == 12
        _caught_up(models)
        live = dump(models)
        assert len(live["compaction_audit"]) == 12 and len(live["prune_audit"]) == 12
        assert second.stop() == 0
    finally:
        first.end()
        if second is not None:
            second.end()
    # Nothing lost or applied twice: each model rebuilt from the first event is the same.
    for name in TABLES:
        rebuild_read_model(postgres_schema_url, name)
    assert dump(models) == live
