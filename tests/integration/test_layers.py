"""The server's layers wrap each method once, and a stopping server's refusals pass
through them: a real asyncio gRPC server on loopback."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from services.grpc.errors import ErrorMapping
from services.grpc.event_loop import EventLoopThread
from services.grpc.layers import LayeredServer
from services.grpc.request_strings import RequestStrings
from services.grpc.server import SERVICE

CALLS = 5


class WrapCount:
    """A layer that counts the handlers it wraps, by method, and tags answers."""

    def __init__(self) -> None:
        self.wrapped: Counter[str] = Counter()

    def __call__(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        self.wrapped[method] += 1
        inner = handler.unary_unary

        async def tagged(request: Any, context: Any) -> Any:
            return b"layered:" + await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(tagged)


async def _echo(request: bytes, _context: Any) -> bytes:
    return request


@pytest.fixture
def served() -> Iterator[tuple[grpc.Channel, LayeredServer, WrapCount]]:
    count = WrapCount()
    loop = EventLoopThread()

    async def serve() -> tuple[grpc.aio.Server, LayeredServer, int]:
        server = grpc.aio.server(migration_thread_pool=futures.ThreadPoolExecutor(2))
        errors = ErrorMapping(SERVICE, RequestStrings(1 << 20), 1 << 20)
        layered = LayeredServer(server, [errors, count], stoppable="test.Stoppable")
        for service in ("test.Open", "test.Stoppable"):
            handlers = {"Echo": grpc.unary_unary_rpc_method_handler(_echo)}
            layered.add_generic_rpc_handlers(
                [grpc.method_handlers_generic_handler(service, handlers)]
            )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, layered, port

    server, layered, port = loop.run(serve())
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield channel, layered, count
    loop.run(server.stop(0))
    loop.close()


def test_each_method_is_wrapped_once_for_all_its_calls(
    served: tuple[grpc.Channel, LayeredServer, WrapCount],
) -> None:
    channel, _, count = served
    for service in ("test.Open", "test.Stoppable"):
        echo = channel.unary_unary(f"/{service}/Echo")
        assert [echo(b"%d" % n) for n in range(CALLS)] == [b"layered:%d" % n for n in range(CALLS)]
    assert count.wrapped == {"/test.Open/Echo": 1, "/test.Stoppable/Echo": 1}


def test_a_method_nobody_serves_is_unimplemented_and_not_kept(
    served: tuple[grpc.Channel, LayeredServer, WrapCount],
) -> None:
    channel, _, count = served
    for n in range(CALLS):
        with pytest.raises(grpc.RpcError) as raised:
            channel.unary_unary(f"/test.Open/Made{n}Up")(b"x")
        assert raised.value.code() is grpc.StatusCode.UNIMPLEMENTED
    assert count.wrapped == {}


def test_a_stopping_server_refuses_the_stoppable_service_through_its_layers(
    served: tuple[grpc.Channel, LayeredServer, WrapCount],
) -> None:
    channel, layered, count = served
    open_echo = channel.unary_unary("/test.Open/Echo")
    stoppable_echo = channel.unary_unary("/test.Stoppable/Echo")
    assert stoppable_echo(b"before") == b"layered:before"
    layered.refuse_all("the server is stopping")
    for _ in range(CALLS):
        with pytest.raises(grpc.RpcError) as raised:
            stoppable_echo(b"after")
        # Answered by the error layer, as a refusal of the store's own.
        assert raised.value.code() is grpc.StatusCode.UNAVAILABLE
        assert raised.value.details() == (
            "the server is stopping; the call was not started: retry it on another server"
        )
    assert open_echo(b"still") == b"layered:still"
    # The refusing handler was wrapped once too, not per refused call.
    assert count.wrapped == {"/test.Open/Echo": 1, "/test.Stoppable/Echo": 2}
