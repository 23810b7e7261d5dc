"""Logs as a log collector gets them from a server process: JSON lines carrying the
call's request id, session id and trace id; and a database outage logged once when it
starts and once when it ends, however many calls and retries it refuses meanwhile."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from tests.support.grpc_calls import refused, user
from tests.support.pg_cluster import Cluster, cluster_for_test
from tests.support.server_process import ServerProcess
from tests.support.waiting import eventually

CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{CALLER_TRACE}-b7ad6b7169203331-01"
OUTAGE_SECONDS = 3


def records(log: Path) -> list[dict[str, Any]]:
    """The log's JSON lines (the console span exporter's indented output is left out)."""
    found = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "event" in record:
            found.append(record)
    return found


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with cluster_for_test("sessionstore-logs-") as own:
        yield own


def test_json_lines_carry_the_request_the_session_and_the_trace(tmp_path: Path) -> None:
    server = ServerProcess(f"sqlite:///{tmp_path}/s.db", log_format="json", log_level="info")
    server.env["OTEL_TRACES_EXPORTER"] = "console"
    server.start()
    try:
        with grpc.insecure_channel(server.address) as channel:
            store = pb_grpc.SessionStoreStub(channel)
            refused(
                lambda: store.GetSession(
                    pb.GetSessionRequest(session_id="no-such-session"),
                    metadata=[("x-request-id", "req-7"), ("traceparent", TRACEPARENT)],
                ),
                grpc.StatusCode.NOT_FOUND,
            )
        server.stop()
        found = records(server.log_path)
        (refusal,) = [r for r in found if r["event"] == "request refused"]
        assert refusal["level"] == "info" and refusal["code"] == "NOT_FOUND"
        assert refusal["request_id"] == "req-7"
        assert refusal["session_id"] == "no-such-session"
        assert refusal["trace_id"] == CALLER_TRACE
        assert len(refusal["span_id"]) == 16 and refusal["timestamp"]
        # Every line of the server's own is JSON, start to stop.
        assert {"serving", "shutting down", "stopped"} <= {r["event"] for r in found}
    finally:
        server.kill()
        server.remove_log()


def test_an_outage_is_logged_when_it_starts_and_when_it_ends(cluster: Cluster) -> None:
    server = ServerProcess(cluster.url, log_format="json")
    server.start()
    try:
        with grpc.insecure_channel(server.address) as channel:
            store = pb_grpc.SessionStoreStub(channel)
            session = store.CreateSession(pb.CreateSessionRequest())

            def append(text: str) -> None:
                store.AppendEntries(
                    pb.AppendEntriesRequest(session_id=session.id, entries=[user(text)]),
                    timeout=5,
                )

            append("before")
            cluster.stop()
            refusals = 0
            stopped = time.monotonic()
            while time.monotonic() - stopped < OUTAGE_SECONDS:
                refused(lambda: append("during"), grpc.StatusCode.UNAVAILABLE)
                refusals += 1
                time.sleep(0.05)
            assert refusals > 10
            cluster.start()

            def works() -> bool:
                try:
                    append("after")
                    return True
                except grpc.RpcError:
                    return False

            assert eventually(works)

            def recovered() -> bool:
                events = Counter(r["event"] for r in records(server.log_path))
                return bool(events["database reachable again; serving"]) and (
                    events["read model caught up again"]
                    == events["read model cannot catch up; retrying with backoff"]
                )

            assert eventually(recovered)
        server.stop()
        found = records(server.log_path)
        events = Counter(r["event"] for r in found)
        assert events["database unreachable; answering UNAVAILABLE"] == 1, events
        assert events["database reachable again; serving"] == 1, events
        # Each read model: once failing, once caught up again, whatever it retried.
        failing = Counter(
            r["model"] for r in found if r["event"].startswith("read model cannot catch up")
        )
        caught_up = Counter(r["model"] for r in found if r["event"] == "read model caught up again")
        assert failing and set(failing.values()) == {1} and caught_up == failing, found
        listen_lost = events["cannot listen for the store's notifications; polling until it can"]
        assert listen_lost <= 1
        assert events["listening for the store's notifications again"] == listen_lost
        # The calls refused meanwhile are not one line each.
        assert not [r for r in found if r.get("code") == "UNAVAILABLE"], found
    finally:
        server.kill()
        server.remove_log()
