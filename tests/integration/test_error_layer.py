"""The error layer maps refusals to statuses for every handler kind.

A real gRPC server on loopback (asyncio, as the store's) with one method of
each kind, plain or async, each refusing with a domain error, as the session
store's handlers do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.protobuf import wrappers_pb2

from domain.errors import InvalidRequest, PromptOverBudget, SessionNotFound
from services.grpc.errors import MAX_MESSAGE_BYTES, ErrorMapping
from services.grpc.event_loop import EventLoopThread
from services.grpc.layers import LayeredServer
from services.grpc.request_strings import RequestStrings
from services.grpc.server import SERVICE


def _refuse(*_: Any) -> Any:
    raise SessionNotFound("s-1")


def _refuse_midway(request: Any, context: Any) -> Iterator[bytes]:
    yield b"first"
    raise InvalidRequest("the second message is malformed")


def _consume_then_refuse(requests: Iterator[bytes], context: Any) -> Any:
    for _ in requests:
        pass
    raise InvalidRequest("line 3 is not JSON")


def _echo_then_refuse(requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
    yield from requests
    raise InvalidRequest("the stream ended before the header")


async def _refuse_async(*_: Any) -> Any:
    raise SessionNotFound("s-2")


async def _refuse_midway_async(request: Any, context: Any) -> AsyncIterator[bytes]:
    yield b"first"
    raise InvalidRequest("the second message is late")


def _refuse_at_length(*_: Any) -> Any:
    raise PromptOverBudget("é" * 100_000, estimated_tokens=2, budget_tokens=1)


# The answers this server may send; the oversized ones are over it, not over gRPC's own.
ANSWER_LIMIT = 64 << 10
OVERSIZED = wrappers_pb2.StringValue(value="x" * (100 << 10))


def _oversized(*_: Any) -> Any:
    return OVERSIZED


def _oversized_second(request: Any, context: Any) -> Iterator[Any]:
    yield wrappers_pb2.StringValue(value="fits")
    yield OVERSIZED


def _strict(data: bytes) -> bytes:
    if data == b"bad":
        raise ValueError("not a message")
    return data


@pytest.fixture
def channel() -> Iterator[grpc.Channel]:
    handlers = {
        "UnaryUnary": grpc.unary_unary_rpc_method_handler(_refuse),
        "UnaryStream": grpc.unary_stream_rpc_method_handler(_refuse_midway),
        "StreamUnary": grpc.stream_unary_rpc_method_handler(_consume_then_refuse),
        "StreamStream": grpc.stream_stream_rpc_method_handler(_echo_then_refuse),
        "AsyncUnary": grpc.unary_unary_rpc_method_handler(_refuse_async),
        "AsyncStream": grpc.unary_stream_rpc_method_handler(_refuse_midway_async),
        "Long": grpc.unary_unary_rpc_method_handler(_refuse_at_length),
        "Oversized": grpc.unary_unary_rpc_method_handler(
            _oversized, response_serializer=wrappers_pb2.StringValue.SerializeToString
        ),
        "OversizedStream": grpc.unary_stream_rpc_method_handler(
            _oversized_second, response_serializer=wrappers_pb2.StringValue.SerializeToString
        ),
        "StrictUnary": grpc.unary_unary_rpc_method_handler(
            lambda request, context: request, request_deserializer=_strict
        ),
        "StrictStream": grpc.stream_stream_rpc_method_handler(
            _echo_then_refuse, request_deserializer=_strict
        ),
    }
    loop = EventLoopThread()

    async def serve() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server(
            migration_thread_pool=futures.ThreadPoolExecutor(2),
        )
        errors = ErrorMapping(SERVICE, RequestStrings(1 << 20), ANSWER_LIMIT)
        LayeredServer(server, [errors]).add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("test.Kinds", handlers)]
        )
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    server, port = loop.run(serve())
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield channel
    loop.run(server.stop(0))
    loop.close()


def _status(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as raised:
        call()
    return raised.value.code(), raised.value.details()


def test_unary_refusal(channel: grpc.Channel) -> None:
    call = channel.unary_unary("/test.Kinds/UnaryUnary")
    assert _status(lambda: call(b"x")) == (grpc.StatusCode.NOT_FOUND, "no session with id 's-1'")


def test_async_refusals(channel: grpc.Channel) -> None:
    call = channel.unary_unary("/test.Kinds/AsyncUnary")
    assert _status(lambda: call(b"x")) == (grpc.StatusCode.NOT_FOUND, "no session with id 's-2'")
    stream = channel.unary_stream("/test.Kinds/AsyncStream")(b"x")
    assert next(stream) == b"first"
    code, message = _status(lambda: next(stream))
    assert (code, message) == (grpc.StatusCode.INVALID_ARGUMENT, "the second message is late")


def test_server_streaming_refusal_after_a_message(channel: grpc.Channel) -> None:
    stream = channel.unary_stream("/test.Kinds/UnaryStream")(b"x")
    assert next(stream) == b"first"
    code, message = _status(lambda: next(stream))
    assert (code, message) == (grpc.StatusCode.INVALID_ARGUMENT, "the second message is malformed")


def test_client_streaming_refusal(channel: grpc.Channel) -> None:
    call = channel.stream_unary("/test.Kinds/StreamUnary")
    code, message = _status(lambda: call(iter([b"a", b"b", b"c"])))
    assert (code, message) == (grpc.StatusCode.INVALID_ARGUMENT, "line 3 is not JSON")


def test_bidirectional_streaming_refusal(channel: grpc.Channel) -> None:
    stream = channel.stream_stream("/test.Kinds/StreamStream")(iter([b"a"]))
    assert next(stream) == b"a"
    code, message = _status(lambda: next(stream))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert message == "the stream ended before the header"


def test_a_long_refusal_is_cut_short_keeping_its_code(channel: grpc.Channel) -> None:
    code, message = _status(lambda: channel.unary_unary("/test.Kinds/Long")(b"x"))
    assert code is grpc.StatusCode.FAILED_PRECONDITION
    assert len(message.encode()) <= MAX_MESSAGE_BYTES and message.endswith("(cut short)")


def test_an_answer_over_the_message_limit_is_refused_saying_so(channel: grpc.Channel) -> None:
    """gRPC would fail the call with "Sent message larger than max" and log a server
    error; the store refuses it with the sizes and what to do."""
    parse = wrappers_pb2.StringValue.FromString
    code, message = _status(
        lambda: channel.unary_unary("/test.Kinds/Oversized", response_deserializer=parse)(b"x")
    )
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "the answer to Oversized takes 102,404 bytes, over the 65,536" in message
    assert "SESSIONSTORE_MAX_MESSAGE_MB" in message
    stream = channel.unary_stream("/test.Kinds/OversizedStream", response_deserializer=parse)(b"x")
    assert next(stream).value == "fits"
    code, message = _status(lambda: next(stream))
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED and "OversizedStream" in message


def test_bytes_that_do_not_decode_are_invalid_argument(channel: grpc.Channel) -> None:
    unary = channel.unary_unary("/test.Kinds/StrictUnary")
    assert unary(b"good") == b"good"
    code, message = _status(lambda: unary(b"bad"))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid StrictUnary request" in message and "not a message" in message
    stream = channel.stream_stream("/test.Kinds/StrictStream")(iter([b"good", b"bad"]))
    assert next(stream) == b"good"
    code, message = _status(lambda: next(stream))
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "StrictStream" in message
