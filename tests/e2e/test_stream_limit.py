"""Followed streams cannot take every worker: past the limit the next is refused."""

from __future__ import annotations

import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from tests.conftest import start_server


def test_followers_past_the_limit_get_resource_exhausted_and_the_server_keeps_answering(
    database_url: str,
) -> None:
    running = start_server(database_url, max_workers=4, max_followers=2)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            store = pb_grpc.SessionStoreStub(channel)
            store.CreateSession(pb.CreateSessionRequest(session_id="s-1"))
            follow = pb.ReadEventsRequest(session_id="s-1", follow=True)
            streams = [store.ReadEvents(follow) for _ in range(2)]
            for stream in streams:
                assert next(stream).version == 1  # both are being served
            refused = store.ReadEvents(follow)
            try:
                next(refused)
                raise AssertionError("a third follower was served")
            except grpc.RpcError as error:
                assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "SESSIONSTORE_MAX_FOLLOWERS" in str(error.details())
            # Health and unary calls still find a worker.
            health = health_pb2_grpc.HealthStub(channel)
            assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == 1
            assert store.GetSession(pb.GetSessionRequest(session_id="s-1"), timeout=5).version == 1
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
            streams[1].cancel()
    finally:
        running.stop(0)
