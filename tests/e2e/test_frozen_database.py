"""A PostgreSQL server that freezes under a running server: it takes connections, its
kernel acknowledges every packet, and it answers nothing (its processes stopped, as
on storage that hangs or a paused VM).

The database monitor's probe got no reply and waited for it forever: health said
SERVING, requests were not refused and each blocked a worker thread on the server.
Now a probe unanswered within PROBE_REPLY_SECONDS counts as unreachable: health
says NOT_SERVING and calls are answered UNAVAILABLE at once, saying the database
does not answer; the probe is waited for, never asked again meanwhile; and once the
server answers again the same server serves, nothing lost.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import psycopg
import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.adapters.event_tables import event_tables
from services.adapters.postgres_timeouts import PROBE_REPLY_SECONDS
from services.config import persistence_env
from services.grpc.database_monitor import MONITOR_INTERVAL_SECONDS
from services.grpc.server import LIVENESS, SERVICE_NAME
from tests.conftest import start_server
from tests.e2e.test_faults import (
    FAST_FAILURE_SECONDS,
    NOT_SERVING,
    SERVING,
    _append,
    _health,
)
from tests.support.grpc_calls import Stub, new_session, user
from tests.support.pg_cluster import Cluster, cluster_for_test
from tests.support.waiting import eventually

# The monitor's half-second interval, the probe's wait for its reply, and room for a
# loaded machine.
NOTICED_SECONDS = 10.0
RECOVERY_SECONDS = 5.0
# A write queued on a session's lock looks at the probe's verdict every 0.2 s; the
# rest is room for a loaded machine.
QUEUED_REFUSAL_SECONDS = 3.0
UNANSWERED = (
    f"the database does not answer (no reply to a probe within {PROBE_REPLY_SECONDS:g} s); "
    "retry shortly"
)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with cluster_for_test("sessionstore-frozen-") as own:
        yield own


def _refused(call: Callable[[], object]) -> tuple[grpc.StatusCode, str, float]:
    """The code and message ``call`` was refused with, and how long it took."""
    began = time.monotonic()
    with pytest.raises(grpc.RpcError) as refused:
        call()
    error = refused.value
    return error.code(), error.details() or "", time.monotonic() - began


def _probes() -> int:
    return sum(thread.name == "postgres-probe" for thread in threading.enumerate())


def test_a_frozen_database_turns_health_not_serving_and_recovers(cluster: Cluster) -> None:
    server = start_server(cluster.url)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        store = Stub(channel)
        session = new_session(store)
        acknowledged = [_append(store, session.id, "before")]
        assert _health(channel) == SERVING

        def read() -> pb.Session:
            return store.GetSession(pb.GetSessionRequest(session_id=session.id), timeout=10)

        with cluster.frozen():
            assert eventually(lambda: _health(channel) == NOT_SERVING, NOTICED_SECONDS)
            assert _health(channel, SERVICE_NAME) == NOT_SERVING
            assert _health(channel, LIVENESS) == SERVING  # a restart would not help
            for call in (read, lambda: _append(store, session.id, "during")):
                code, message, took = _refused(call)
                assert (code, message) == (grpc.StatusCode.UNAVAILABLE, UNANSWERED)
                assert took < FAST_FAILURE_SECONDS, took
            # However long it stays frozen, the one probe asked is waited for.
            time.sleep(2 * PROBE_REPLY_SECONDS)
            assert _probes() == 1
            assert _health(channel) == NOT_SERVING

        assert eventually(lambda: _health(channel) == SERVING, RECOVERY_SECONDS)
        acknowledged.append(_append(store, session.id, "after", timeout=5))
        log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id), timeout=5)
        assert [e.content[0].text.text for e in log.entries] == ["before", "after"]
        assert log.version == acknowledged[-1]
        assert read().version == log.version
        assert _probes() == 0
    finally:
        channel.close()
        server.stop(0)


def test_a_freeze_is_told_while_the_monitor_waits_on_its_own_reads(cluster: Cluster) -> None:
    """Besides its probes the monitor reads the store itself: every half second the
    erasures other servers made, now and then the idempotency keys to expire. One of
    those reads caught by the freeze must not keep the monitor from its probes. Here
    the read waits on a lock before the freeze, so that it is sure to be under way."""
    server = start_server(cluster.url)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    events = event_tables(persistence_env(cluster.url))[0]
    try:
        store = Stub(channel)
        session = new_session(store)
        with psycopg.connect(cluster.url) as locker:
            locker.execute(f"LOCK TABLE {events} IN ACCESS EXCLUSIVE MODE")
            time.sleep(3 * MONITOR_INTERVAL_SECONDS)  # the look for erasures waits on it
            assert _health(channel) == SERVING  # the probe reads no table
            with cluster.frozen():
                assert eventually(lambda: _health(channel) == NOT_SERVING, NOTICED_SECONDS)
            locker.rollback()
        assert eventually(lambda: _health(channel) == SERVING, RECOVERY_SECONDS)
        assert _append(store, session.id, "after", timeout=5) == 2
    finally:
        channel.close()
        server.stop(0)


def test_a_write_queued_behind_one_the_frozen_database_holds_is_refused(cluster: Cluster) -> None:
    """A write waits for the session's write lock while the write ahead of it holds it.
    When that one is blocked on a server that froze, the queued one waited out its own
    deadline (DEADLINE_EXCEEDED; without a deadline, for good). Now it is refused as a
    new call is, once the probe finds the database not answering. Here the first write
    waits on a table lock before the freeze, so that it is sure to hold the session's."""
    server = start_server(cluster.url)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    events = event_tables(persistence_env(cluster.url))[0]
    try:
        store = Stub(channel)
        session, other = new_session(store), new_session(store)
        acknowledged = [_append(store, session.id, "before")]

        def held_append() -> int:  # no deadline: it waits as long as the database does
            request = pb.AppendEntriesRequest(session_id=session.id, entries=[user("held")])
            return int(store.AppendEntries(request).version)

        def queued_append() -> tuple[grpc.StatusCode, str, float]:
            return _refused(lambda: _append(store, session.id, "queued", timeout=60))

        # Outermost: its exit waits for both calls, which end once the lock is gone.
        with ThreadPoolExecutor(2) as calls, psycopg.connect(cluster.url) as locker:
            # Reads go on under it (SHARE mode); the append's insert waits.
            locker.execute(f"LOCK TABLE {events} IN SHARE MODE")
            held = calls.submit(held_append)
            assert eventually(lambda: _waiting_on_locks(locker) >= 1, RECOVERY_SECONDS)
            queued = calls.submit(queued_append)
            time.sleep(1.0)  # on the session's write lock, behind the held append
            with cluster.frozen():
                assert eventually(lambda: _health(channel) == NOT_SERVING, NOTICED_SECONDS)
                assert eventually(queued.done, QUEUED_REFUSAL_SECONDS)
                code, message, _ = queued.result()
                assert (code, message) == (grpc.StatusCode.UNAVAILABLE, UNANSWERED)
                assert not held.done()
            locker.rollback()
            acknowledged.append(held.result(timeout=RECOVERY_SECONDS))

        assert eventually(lambda: _health(channel) == SERVING, RECOVERY_SECONDS)
        acknowledged.append(_append(store, session.id, "after", timeout=5))
        assert _append(store, other.id, "after", timeout=5) == 2
        log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id), timeout=5)
        assert [e.content[0].text.text for e in log.entries] == ["before", "held", "after"]
        assert log.version == acknowledged[-1]
        other_log = store.GetDurableLog(pb.GetViewRequest(session_id=other.id), timeout=5)
        assert [e.content[0].text.text for e in other_log.entries] == ["after"]
    finally:
        channel.close()
        server.stop(0)


def _waiting_on_locks(connection: psycopg.Connection[tuple[object, ...]]) -> int:
    """How many of the server's statements wait for a lock (here: the table's)."""
    row = connection.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
    return int(row[0]) if row else 0
