"""The database goes away and comes back while a server serves.

A PostgreSQL cluster of the test's own (initdb into a temporary folder, on a
free port) is stopped under a running server: every call answers UNAVAILABLE
at once and health says NOT_SERVING; started again, the server serves within
two seconds, and nothing it acknowledged is lost.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
import structlog.testing
from grpc_health.v1 import health_pb2, health_pb2_grpc

from domain.errors import Unavailable
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.adapters.event_store import EventStore
from services.adapters.read_model_db import migrate, open_database
from services.adapters.read_model_queries import CatalogFilter, ReadModelQueries
from services.config import persistence_env
from services.grpc.server import LIVENESS, SERVICE_NAME
from tests.conftest import start_server
from tests.support.fake_provider import FIRST_REQUEST_SECONDS, FakeProvider, delay
from tests.support.grpc_calls import Stub, new_session, user
from tests.support.pg_cluster import Cluster, cluster_for_test
from tests.support.waiting import eventually

OUTAGE_SECONDS = 5
FAST_FAILURE_SECONDS = 1.5
RECOVERY_SECONDS = 2.0
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with cluster_for_test("sessionstore-faults-") as own:
        yield own


def _append(store: Stub, session_id: str, text: str, timeout: float = 10) -> int:
    request = pb.AppendEntriesRequest(session_id=session_id, entries=[user(text)])
    return int(store.AppendEntries(request, timeout=timeout).version)


def _health(channel: grpc.Channel, service: str = "") -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    return int(stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=2).status)


def test_database_outage_answers_unavailable_fast_and_recovers(cluster: Cluster) -> None:
    server = start_server(cluster.url)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        store = Stub(channel)
        session = new_session(store)
        acknowledged = [_append(store, session.id, f"before {i}") for i in range(5)]

        cluster.stop()
        stopped = time.monotonic()
        calls: list[Callable[[], object]] = [
            lambda: _append(store, session.id, "during"),
            lambda: store.GetSession(pb.GetSessionRequest(session_id=session.id), timeout=10),
            lambda: store.GetDurableLog(pb.GetViewRequest(session_id=session.id), timeout=10),
            lambda: list(store.ReadEvents(pb.ReadEventsRequest(session_id=session.id), timeout=10)),
            lambda: new_session(store),
            lambda: store.ListSessions(pb.ListSessionsRequest(), timeout=10),
        ]
        answers: list[tuple[grpc.StatusCode, float, str]] = []
        while time.monotonic() - stopped < OUTAGE_SECONDS:
            for call in calls:
                began = time.monotonic()
                with pytest.raises(grpc.RpcError) as refused:
                    call()
                error = refused.value
                answers.append((error.code(), time.monotonic() - began, error.details() or ""))
            time.sleep(0.1)
        assert {code for code, _, _ in answers} == {grpc.StatusCode.UNAVAILABLE}, answers
        assert max(took for _, took, _ in answers) < FAST_FAILURE_SECONDS, answers
        assert any("database is unreachable" in details for _, _, details in answers)
        # The monitor has had the whole outage to notice.
        assert _health(channel) == NOT_SERVING
        assert _health(channel, SERVICE_NAME) == NOT_SERVING
        # Not ready, yet alive: a liveness probe restarts nothing for an outage.
        assert _health(channel, LIVENESS) == SERVING

        cluster.start()

        def appends() -> bool:
            try:
                acknowledged.append(_append(store, session.id, "after", timeout=1))
                return True
            except grpc.RpcError as error:
                assert error.code() in (
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                ), error
                return False

        assert eventually(appends, RECOVERY_SECONDS)
        assert eventually(lambda: _health(channel) == SERVING, RECOVERY_SECONDS)
        assert _health(channel, SERVICE_NAME) == SERVING

        log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id), timeout=5)
        assert [e.content[0].text.text for e in log.entries] == [
            *(f"before {i}" for i in range(5)),
            "after",
        ]
        assert log.version == acknowledged[-1]
    finally:
        channel.close()
        server.stop(0)


APPENDS_PER_CLIENT = 25
CLIENTS = 6


def test_plain_appends_through_two_servers_all_land(database_url: str) -> None:
    """Appends without expected_version, racing through two servers, all land in order."""
    servers = [start_server(database_url), start_server(database_url)]
    channels = [grpc.insecure_channel(f"127.0.0.1:{s.port}") for s in servers]
    try:
        stores = [Stub(c) for c in channels]
        session = new_session(stores[0])
        versions: list[int] = []
        refusals: list[str] = []
        start = threading.Barrier(CLIENTS)

        def client(store: Stub, n: int) -> None:
            start.wait()
            for i in range(APPENDS_PER_CLIENT):
                try:
                    versions.append(_append(store, session.id, f"{n}.{i}", timeout=30))
                except grpc.RpcError as error:
                    refusals.append(f"{error.code()}: {error.details()}")

        threads = [threading.Thread(target=client, args=(stores[n % 2], n)) for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)

        assert refusals == []
        total = CLIENTS * APPENDS_PER_CLIENT
        assert sorted(versions) == list(range(2, total + 2))  # version 1 created the session
        log = stores[1].GetDurableLog(pb.GetViewRequest(session_id=session.id))
        assert len(log.entries) == total
        assert sorted(e.content[0].text.text for e in log.entries) == sorted(
            f"{n}.{i}" for n in range(CLIENTS) for i in range(APPENDS_PER_CLIENT)
        )
        events = list(stores[0].ReadEvents(pb.ReadEventsRequest(session_id=session.id)))
        assert [e.version for e in events] == list(range(1, total + 2))
    finally:
        for channel in channels:
            channel.close()
        for server in servers:
            server.stop(0)


def _keyed(store: Stub, session_id: str, text: str, key: str) -> pb.AppendEntriesResponse:
    request = pb.AppendEntriesRequest(
        session_id=session_id, entries=[user(text)], idempotency_key=key
    )
    return store.AppendEntries(request, timeout=10)


def test_a_retry_is_recognised_however_many_appends_came_between(database_url: str) -> None:
    server = start_server(database_url)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            session = new_session(store)
            first = _keyed(store, session.id, "turn 0", "key-0")
            for i in range(1, 300):
                _keyed(store, session.id, f"turn {i}", f"key-{i}")

            retry = _keyed(store, session.id, "turn 0", "key-0")
            assert retry.replayed
            assert (retry.version, list(retry.entry_ids)) == (first.version, list(first.entry_ids))
            with pytest.raises(grpc.RpcError) as refused:
                _keyed(store, session.id, "something else", "key-0")
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "key-0" in (refused.value.details() or "")

            log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
            assert [e.content[0].text.text for e in log.entries] == [
                f"turn {i}" for i in range(300)
            ]
    finally:
        server.stop(0)


def test_an_idempotency_key_is_free_again_after_its_ttl(database_url: str) -> None:
    server = start_server(database_url, idempotency_ttl_seconds=1)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            session = new_session(store)
            first = _keyed(store, session.id, "hello", "key")
            assert _keyed(store, session.id, "hello", "key").replayed
            time.sleep(1.5)

            again = _keyed(store, session.id, "hello", "key")
            assert not again.replayed
            assert again.version == first.version + 1
            assert _keyed(store, session.id, "hello", "key").replayed
            # Past the TTL a key may name a different append, too.
            time.sleep(1.5)
            other = _keyed(store, session.id, "something else", "key")
            assert (other.replayed, other.version) == (False, again.version + 1)
            time.sleep(1.5)
            assert server.service.expire_idempotency_keys() == 1  # the one key's row
            assert server.service.expire_idempotency_keys() == 0
    finally:
        server.stop(0)


def test_a_call_past_its_deadline_stops_and_frees_its_worker(tmp_path: Path) -> None:
    """Appends stuck behind a long write to their session give up at their deadline."""
    workers = 2
    server = start_server(f"sqlite:///{tmp_path}/sessions.db", max_workers=workers)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            session = new_session(store)
            refusals: list[grpc.StatusCode] = []

            def impatient() -> None:
                try:
                    _append(store, session.id, "too late", timeout=0.3)
                except grpc.RpcError as error:
                    refusals.append(error.code())

            # Another write holds the session for longer than the clients wait.
            with server.service.write_path.locked(session.id):
                threads = [threading.Thread(target=impatient) for _ in range(workers)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join(timeout=10)
                assert refusals == [grpc.StatusCode.DEADLINE_EXCEEDED] * workers
                # Every worker is free again although the write goes on (it never ends
                # while this block runs, so a worker still waiting would never answer:
                # the deadline only bounds how long a loaded machine may take).
                found = store.GetSession(pb.GetSessionRequest(session_id=session.id), timeout=10)
                assert found.version == 1

            assert _append(store, session.id, "in time") == 2  # nothing of the others landed
    finally:
        server.stop(0)


def test_a_locked_sqlite_file_answers_unavailable(tmp_path: Path) -> None:
    """Another process holding the file's write lock past the lock timeout: retry later."""
    path = tmp_path / "sessions.db"
    server = start_server(f"sqlite:///{path}")
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            session = new_session(store)
            holder.execute("BEGIN EXCLUSIVE")
            with pytest.raises(grpc.RpcError) as refused:
                _append(store, session.id, "blocked", timeout=30)  # the lock timeout is 10 s
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "retry" in (refused.value.details() or "")
            holder.execute("ROLLBACK")
            assert _append(store, session.id, "free again") == 2
    finally:
        holder.close()
        server.stop(0)


def test_losing_the_database_while_events_decode_is_unavailable(cluster: Cluster) -> None:
    """Sealed content's keys are read as its events decode: a database lost between
    reading the events and reading their keys is a fault to retry, not an event that
    cannot be read (which would answer INTERNAL)."""
    server = start_server(cluster.url)
    try:
        store = Stub(grpc.insecure_channel(f"127.0.0.1:{server.port}"))
        session = new_session(store)
        for i in range(3):
            _append(store, session.id, f"sealed {i}")
    finally:
        server.stop(0)
    events = EventStore(persistence_env(cluster.url))
    try:
        stored = events.recorder.select_events(session.id)
        assert len(stored) == 4
        cluster.stop()
        with pytest.raises(Unavailable, match="database is unreachable"):
            for record in stored:
                events.mapper.to_domain_event(record)
    finally:
        cluster.start()
        events.close()


def test_a_read_model_query_that_loses_the_database_is_unavailable(cluster: Cluster) -> None:
    """The catalog and audit queries go through SQLAlchemy, not the event store: a
    database lost under them is UNAVAILABLE too (a request reaches them after the
    store answered, so the loss can fall between)."""
    database = open_database(cluster.url)
    try:
        migrate(database)
        queries = ReadModelQueries(database)
        assert queries.sessions(CatalogFilter(), 10, "") == ([], "")
        cluster.stop()
        with pytest.raises(Unavailable, match="database is unreachable"):
            queries.sessions(CatalogFilter(), 10, "")
    finally:
        cluster.start()
        database.dispose()


def test_losing_the_database_while_a_summariser_writes_is_unavailable(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compaction whose summary is written while the database went away answers
    UNAVAILABLE, to be retried: not a session that moved (its summariser asked again),
    nor a compaction that failed on its own account."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    server = start_server(cluster.url)
    address = f"127.0.0.1:{server.port}"
    try:
        with FakeProvider() as provider, grpc.insecure_channel(address) as channel:
            store = Stub(channel)
            policy = pb.CompactionPolicy(
                summarizers=pb.SummarizerChain(steps=["openai/fake-summarizer", "offline"]),
                summarizer_model="openai/fake-summarizer",
                summarizer_api_base=provider.openai_base,
                summarizer_window_tokens=128_000,  # one call
                mode="manual",
            )
            session = new_session(store, model="gpt-4o", compaction=policy)
            for n in range(6):
                _append(store, session.id, f"step {n}: " + "the module list is in order. " * 200)
            provider.script(delay(3.0))
            outcome: list[BaseException | pb.CompactResponse] = []

            def compact() -> None:
                request = pb.CompactRequest(session_id=session.id, force=True)
                try:
                    outcome.append(store.Compact(request, timeout=60))
                except grpc.RpcError as error:
                    outcome.append(error)

            compacting = threading.Thread(target=compact)
            with structlog.testing.capture_logs() as logs:
                compacting.start()
                assert eventually(lambda: len(provider.requests) == 1, FIRST_REQUEST_SECONDS)
                cluster.stop()
                compacting.join(60)
            cluster.start()
            # Said in the server's log too: a compaction no one waits for fails there alone.
            (said,) = [e for e in logs if e["event"] == "compaction did not land"]
            assert said["session"] == session.id and "unreachable" in said["error"]
            (answered,) = outcome
            assert isinstance(answered, grpc.RpcError), answered
            assert answered.code() == grpc.StatusCode.UNAVAILABLE, answered.details()
            assert len(provider.requests) == 1  # its summary was not asked for again
            # Nothing was written: the session is as it was, and compacts once retried.
            assert eventually(lambda: _health(channel) == SERVING, within=RECOVERY_SECONDS * 5)
            log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
            assert len(log.entries) == 6 and not log.HasField("compaction")
            retried = store.Compact(pb.CompactRequest(session_id=session.id, force=True))
            assert retried.compacted, retried.reason
    finally:
        server.stop(0)


def test_a_compaction_past_its_deadline_stops_and_records_nothing(
    store: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A summariser that never answers: the call's deadline ends the compaction on the
    server, which records neither a failure nor a fallback's summary, so a retry
    compacts once."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    step_timeout = 3
    with FakeProvider() as provider:
        policy = pb.CompactionPolicy(
            summarizers=pb.SummarizerChain(steps=["openai/fake-summarizer", "offline"]),
            summarizer_model="openai/fake-summarizer",
            summarizer_api_base=provider.openai_base,
            summarizer_window_tokens=128_000,
            step_timeout_seconds=step_timeout,
            mode="manual",
        )
        # A first compaction loads the model client, which takes seconds on a busy machine.
        warm = new_session(store, model="gpt-4o", compaction=policy)
        session = new_session(store, model="gpt-4o", compaction=policy)
        for n in range(6):
            for each in (warm, session):
                _append(store, each.id, f"step {n}: " + "the module list is in order. " * 200)
        store.Compact(pb.CompactRequest(session_id=warm.id, force=True), timeout=60)
        before = store.GetSession(pb.GetSessionRequest(session_id=session.id)).version
        asked = len(provider.requests)
        provider.script(delay(60.0))  # longer than anything here waits

        with pytest.raises(grpc.RpcError) as ended:
            store.Compact(pb.CompactRequest(session_id=session.id, force=True), timeout=1)
        assert ended.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # Past the step's own timeout, by when a compaction still running would have
        # recorded its model's failure and the offline summary.
        time.sleep(step_timeout + 2)
        found = store.GetSession(pb.GetSessionRequest(session_id=session.id))
        assert found.version == before, "the compaction went on after its deadline"
        assert len(provider.requests) == asked + 1  # asked once, never answered

        retried = store.Compact(pb.CompactRequest(session_id=session.id, force=True), timeout=30)
        assert retried.compacted, retried.reason
        assert retried.compaction.summarizer_model == "openai/fake-summarizer"
        listed = store.ListCompactions(
            pb.ListCompactionsRequest(session_id=session.id, min_position=retried.position)
        ).compactions
        assert len(listed) == 1
