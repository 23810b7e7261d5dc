"""Followed streams hold no worker thread, and past their limit the next is refused."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from tests.conftest import start_server
from tests.support.server_process import REPO_ROOT

WORKERS = 2
FOLLOWERS = 24  # far more than the worker threads


def _user_entry(text: str) -> pb.Entry:
    return pb.Entry(role=pb.ROLE_USER, content=[pb.ContentBlock(text=pb.TextBlock(text=text))])


def test_followers_wait_without_workers_and_past_the_limit_get_resource_exhausted(
    database_url: str,
) -> None:
    running = start_server(database_url, max_workers=WORKERS, max_followers=FOLLOWERS)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            store = pb_grpc.SessionStoreStub(channel)
            store.CreateSession(pb.CreateSessionRequest(session_id="s-1"))
            follow = pb.ReadEventsRequest(session_id="s-1", follow=True)
            # The timeout ends a test that would otherwise wait for a worker forever.
            streams = [store.ReadEvents(follow, timeout=30) for _ in range(FOLLOWERS)]
            for stream in streams:
                assert next(stream).version == 1  # all are being served, and wait
            refused = store.ReadEvents(follow)
            try:
                next(refused)
                raise AssertionError("a follower past the limit was served")
            except grpc.RpcError as error:
                assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "SESSIONSTORE_MAX_FOLLOWERS" in str(error.details())
            # With every follower waiting, health and unary calls still answer
            # on the two workers, and a write reaches every follower at once.
            health = health_pb2_grpc.HealthStub(channel)
            assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == 1
            assert store.GetSession(pb.GetSessionRequest(session_id="s-1"), timeout=5).version == 1
            store.AppendEntries(
                pb.AppendEntriesRequest(session_id="s-1", entries=[_user_entry("hi")]), timeout=5
            )
            started = time.monotonic()
            for stream in streams:
                assert next(stream).version == 2
            # Woken by the save, not found by the once-a-second poll.
            assert time.monotonic() - started < 0.9
            # A follower that leaves frees its place.
            streams[0].cancel()
            again = store.ReadEvents(follow)
            for _ in range(50):
                try:
                    assert next(again).version == 1
                    break
                except grpc.RpcError:
                    time.sleep(0.1)  # the cancelled stream may not have ended yet
                    again = store.ReadEvents(follow)
            again.cancel()
            for stream in streams[1:]:
                stream.cancel()
    finally:
        running.stop(0)


def test_stopping_the_server_ends_followed_streams(database_url: str) -> None:
    running = start_server(database_url)
    with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        store = pb_grpc.SessionStoreStub(channel)
        store.CreateSession(pb.CreateSessionRequest(session_id="s-1"))
        stream = store.ReadEvents(pb.ReadEventsRequest(session_id="s-1", follow=True))
        assert next(stream).version == 1
        started = time.monotonic()
        running.stop(5)
        assert time.monotonic() - started < 4  # not held for the grace period
        try:
            list(stream)
            raise AssertionError("the stream ended OK, as if there were no more events")
        except grpc.RpcError as error:
            # To be followed again elsewhere, after the last event it gave.
            assert error.code() is grpc.StatusCode.UNAVAILABLE


# Servers stopped while their followers wake and read their next page: each
# read runs in a thread of its own, which may outlive the call it served.
STOP_UNDER_FOLLOWERS = """
import sys, grpc
from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from tests.conftest import start_server
entry = pb.Entry(role=pb.ROLE_USER, content=[pb.ContentBlock(text=pb.TextBlock(text="x"))])
for n in range(int(sys.argv[2])):
    running = start_server(f"sqlite:///{sys.argv[1]}/{n}.db", follow_poll_seconds=0.01)
    with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
        store = pb_grpc.SessionStoreStub(channel)
        store.CreateSession(pb.CreateSessionRequest(session_id="s-1"))
        follow = pb.ReadEventsRequest(session_id="s-1", follow=True)
        streams = [store.ReadEvents(follow, timeout=30) for _ in range(30)]
        for stream in streams:
            next(stream)
        store.AppendEntries(pb.AppendEntriesRequest(session_id="s-1", entries=[entry]))
        running.stop(0)
"""


def test_a_server_stopped_while_its_followers_read_stops_cleanly(
    tmp_path: Path,
) -> None:
    # In a process of its own: closing SQLite under a read crashes the process,
    # which is what the store must wait for.
    done = subprocess.run(
        [sys.executable, "-c", STOP_UNDER_FOLLOWERS, str(tmp_path), "50"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    # Nor does a stream cut short log errors on its way out (its scope undone
    # from another task than the one that set it).
    assert not _store_errors(done.stderr), done.stderr[-4000:]


# grpc.aio polls every loop of a process from one queue: fifty servers one after
# another in this process, an operation of a server stopped and its loop closed
# may complete late, and be handed, from the next server's loop, to the closed one.
# Only a process that runs servers one after another meets it, never a server.
_GRPC_LATE_COMPLETION = "PollerCompletionQueue._handle_events"


def _store_errors(stderr: str) -> list[str]:
    """The error lines logged, but for grpc.aio's late completions (above)."""
    lines = stderr.splitlines()
    return [line for line in lines if "[error" in line and _GRPC_LATE_COMPLETION not in line]
