"""Metrics as an operator gets them: /metrics of a running server, checked by promtool,
and scraped by a real Prometheus server during a workload, the figures moving as the
workload says."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.grpc.server import RunningServer
from tests.conftest import start_server
from tests.support.context_engine import turn
from tests.support.grpc_calls import append, refused, text, user
from tests.support.pg_cluster import free_port
from tests.support.prometheus import (
    PrometheusServer,
    ensure_installed,
    promtool_check,
    samples,
    scrape,
    value,
)
from tests.support.worker_process import LEADING, WAITING, WorkerProcess

STORE = "sessionstore.v1.SessionStore"


@pytest.fixture(scope="module", autouse=True)
def _prometheus_installed() -> None:
    ensure_installed()


@pytest.fixture
def observed(database_url: str) -> Iterator[RunningServer]:
    running = start_server(database_url, metrics_address="127.0.0.1:0")
    yield running
    running.stop(0)


@contextmanager
def _stub(server: RunningServer) -> Iterator[pb_grpc.SessionStoreStub]:
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield pb_grpc.SessionStoreStub(channel)


def test_metrics_are_off_unless_an_address_is_set(tmp_path: Path) -> None:
    server = start_server(f"sqlite:///{tmp_path}/s.db")
    try:
        assert server.metrics_port == 0 and server.app.observability is not None
        assert server.app.observability.metrics is None
    finally:
        server.stop(0)


def test_a_taken_metrics_address_stops_the_start(observed: RunningServer, tmp_path: Path) -> None:
    taken = f"127.0.0.1:{observed.metrics_port}"
    with pytest.raises(OSError, match=f"cannot serve metrics on {taken}"):
        start_server(f"sqlite:///{tmp_path}/other.db", metrics_address=taken)


def test_the_endpoint_passes_promtool_and_counts_what_was_done(
    observed: RunningServer,
) -> None:
    with _stub(observed) as store:
        compacted = _workload(store)
    exposition = scrape(observed.metrics_port)
    checked = promtool_check(exposition)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    def calls(method: str, code: str = "OK") -> float:
        return value(
            exposition,
            "grpc_server_handled_total",
            grpc_service=STORE,
            grpc_method=method,
            grpc_type="unary",
            grpc_code=code,
        )

    assert calls("AppendEntries") == 13
    assert calls("GetSession", "NOT_FOUND") == 1
    assert calls("CreateSession") == 1
    for method, code in (
        ("ReadEvents", "OK"),
        ("ExportSession", "OK"),
        ("ExportSession", "NOT_FOUND"),
    ):
        streamed = value(
            exposition,
            "grpc_server_handled_total",
            grpc_type="server_stream",
            grpc_method=method,
            grpc_code=code,
        )
        assert streamed == 1, (method, code)
    started = value(exposition, "grpc_server_started_total", grpc_method="AppendEntries")
    assert started == 13
    timed = value(exposition, "grpc_server_handling_seconds_count", grpc_method="AppendEntries")
    assert timed == 13
    assert value(exposition, "sessionstore_appends_total") == 13
    assert value(exposition, "sessionstore_entries_appended_total") == 13
    assert value(exposition, "sessionstore_entries_appended_total", role="tool") == 3
    assert value(exposition, "sessionstore_entry_bytes_total") > 9_000
    assert value(exposition, "sessionstore_entry_tokens_total") > 1_000
    assert value(exposition, "sessionstore_prompt_views_total", kind="whole") == 1
    assert value(exposition, "sessionstore_prompt_views_total", kind="delta") == 1
    assert value(exposition, "sessionstore_window_guard_total", level="ok") == 2
    recorded = value(
        exposition, "sessionstore_compactions_total", trigger="manual", outcome="recorded"
    )
    assert recorded == 1
    before = value(exposition, "sessionstore_compaction_tokens_before_sum", trigger="manual")
    after = value(exposition, "sessionstore_compaction_tokens_after_sum", trigger="manual")
    assert before == compacted.tokens_before > after == compacted.tokens_after
    assert value(exposition, "sessionstore_summarizer_seconds_count", outcome="ok") >= 1
    assert value(exposition, "sessionstore_prunes_total") == 1
    assert value(exposition, "sessionstore_pruned_entries_total", action="hard_clear") == 1
    assert value(exposition, "sessionstore_prune_chars_saved_total") > 0
    assert value(exposition, "sessionstore_cache_items", cache="histories") == 1
    assert value(exposition, "sessionstore_cache_hits_total", cache="histories") > 0
    assert value(exposition, "process_resident_memory_bytes") > 0
    # One server alone: none of its saves found its copy stale.
    assert samples(exposition)[("sessionstore_write_races_lost_total", frozenset())] == 0


def test_a_fork_counts_none_of_what_it_copies(observed: RunningServer) -> None:
    """Its parent's appends, compaction and prune were counted when they were made."""
    with _stub(observed) as store:
        _workload(store)
        before = scrape(observed.metrics_port)
        (session,) = store.ListSessions(pb.ListSessionsRequest()).sessions
        store.ForkSession(pb.ForkSessionRequest(session_id=session.id))
    after = scrape(observed.metrics_port)
    for name in (
        "sessionstore_appends_total",
        "sessionstore_entries_appended_total",
        "sessionstore_entry_bytes_total",
        "sessionstore_prunes_total",
        "sessionstore_compactions_total",
    ):
        assert value(after, name) == value(before, name) > 0, name


def _workload(store: pb_grpc.SessionStoreStub) -> pb.Compaction:
    """Three turns, a view whole then as a delta, a compaction, a prune, a refusal."""
    session = store.CreateSession(
        pb.CreateSessionRequest(
            settings=pb.SessionSettings(
                model="gpt-4o", compaction=pb.CompactionPolicy(keep_recent_tokens=1_000)
            )
        )
    )
    for n in range(3):
        turn(store, session.id, n, output_chars=3_000)  # 4 appends of one entry each
    first = store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id))
    append(store, session.id, user("one more question"))
    delta = store.GetPromptView(
        pb.GetPromptViewRequest(
            session_id=session.id, held_version=first.version, held_hash=first.request_hash
        )
    )
    assert delta.appended
    compacted = store.Compact(pb.CompactRequest(session_id=session.id, force=True))
    assert compacted.compacted
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    tool_entry = next(e for e in log.entries if e.role == pb.ROLE_TOOL)
    store.RecordPrune(
        pb.RecordPruneRequest(
            session_id=session.id,
            entries=[pb.PrunedEntry(entry_id=tool_entry.id, action=pb.PRUNE_ACTION_HARD_CLEAR)],
            reason="cache-ttl",
        )
    )
    refused(
        lambda: store.GetSession(pb.GetSessionRequest(session_id="no-such-session")),
        grpc.StatusCode.NOT_FOUND,
    )
    # Streams, served on the event loop (events) and in worker threads (export).
    assert list(store.ReadEvents(pb.ReadEventsRequest(session_id=session.id)))
    assert list(store.ExportSession(pb.ExportSessionRequest(session_id=session.id)))
    refused(
        lambda: list(store.ExportSession(pb.ExportSessionRequest(session_id="no-such"))),
        grpc.StatusCode.NOT_FOUND,
    )
    return compacted.compaction


def test_a_prometheus_server_scrapes_the_figures_as_the_workload_moves_them(
    postgres_schema_url: str,
) -> None:
    server = start_server(postgres_schema_url, metrics_address="127.0.0.1:0")
    prometheus = PrometheusServer(server.metrics_port)
    try:
        with _stub(server) as store:
            _scraped_workload(store, prometheus)
    finally:
        prometheus.stop()
        server.stop(0)


def _scraped_workload(store: pb_grpc.SessionStoreStub, prometheus: PrometheusServer) -> None:
    """Appends in two rounds, each awaited in what Prometheus scraped; the read models
    and the pool as they stand."""
    prometheus.wait_for('up{job="sessionstore"}', 1)
    session = store.CreateSession(pb.CreateSessionRequest())
    for n in range(5):
        append(store, session.id, user(f"question {n}"), text(pb.ROLE_ASSISTANT, f"{n}"))
    prometheus.wait_for("sessionstore_appends_total", 5)
    prometheus.wait_for("sum(sessionstore_entries_appended_total)", 10)
    handled = 'sum(grpc_server_handled_total{grpc_method="AppendEntries",grpc_code="OK"})'
    prometheus.wait_for(handled, 5)
    for n in range(7):
        append(store, session.id, user(f"again {n}"))
    prometheus.wait_for("sessionstore_appends_total", 12)
    prometheus.wait_for(handled, 12)
    prometheus.wait_for("increase(sessionstore_appends_total[1m]) > bool 0", 1)
    # The read models catch up with the store: no lag, at the store's position.
    prometheus.wait_for("max(sessionstore_read_model_lag_events)", 0)
    prometheus.wait_for(
        "min(sessionstore_read_model_position) == bool max(sessionstore_event_store_position)",
        1,
    )
    prometheus.wait_for("sessionstore_read_model_up", 1)
    assert (prometheus.scalar("min(sessionstore_read_model_position)") or 0) >= 12
    # The event store's pool on PostgreSQL: connections open, none waited for now.
    prometheus.wait_for("sum(sessionstore_db_pool_connections) > bool 0", 1)
    prometheus.wait_for("sessionstore_db_pool_waiting", 0)


def test_each_worker_serves_the_read_models_progress_and_whether_it_leads(
    postgres_schema_url: str,
) -> None:
    # The server makes the schema and its tables; the workers keep the read models.
    server = start_server(postgres_schema_url, projections="worker")
    ports = [free_port(), free_port()]
    workers: list[WorkerProcess] = []
    try:
        for port, said in zip(ports, (LEADING, WAITING), strict=True):
            workers.append(WorkerProcess(postgres_schema_url, metrics_address=f"127.0.0.1:{port}"))
            workers[-1].wait_for(said, 60)
        leader, waiting = (scrape(port) for port in ports)
        for exposition in (leader, waiting):
            checked = promtool_check(exposition)
            assert checked.returncode == 0, checked.stdout + checked.stderr
            assert value(exposition, "sessionstore_read_model_up") == 1
            assert value(exposition, "sessionstore_read_model_lag_events") == 0
            assert value(exposition, "process_resident_memory_bytes") > 0
        assert value(leader, "sessionstore_read_models_projecting") == 1
        assert value(waiting, "sessionstore_read_models_projecting") == 0
    finally:
        for worker in workers:
            worker.end()
        server.stop(0)
