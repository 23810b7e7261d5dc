"""Rewrapping a gRPC method handler's behaviour, whatever its kind.

The server's layers (observing, errors, authentication, deadlines) each wrap the function
that serves a call. A handler has one of four kinds, and each kind is built
by its own grpc function; this does that dispatch once for all of them.
Behaviours are plain functions, run in the server's worker threads, or
coroutines and async generators, run on its event loop.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import grpc

Behaviour = Callable[..., Any]


def rewrapped(
    handler: grpc.RpcMethodHandler,
    *,
    returning: Callable[[Behaviour], Behaviour],
    streaming: Callable[[Behaviour], Behaviour],
    request_deserializer: Callable[[bytes], Any] | None = None,
) -> grpc.RpcMethodHandler:
    """The handler with its behaviour wrapped by ``returning`` (one response) or
    ``streaming`` (a stream of responses)."""
    serializers = {
        "request_deserializer": request_deserializer or handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(returning(handler.unary_unary), **serializers)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(streaming(handler.unary_stream), **serializers)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(returning(handler.stream_unary), **serializers)
    if handler.stream_stream:
        return grpc.stream_stream_rpc_method_handler(
            streaming(handler.stream_stream), **serializers
        )
    return handler


def is_async(behaviour: Behaviour | None) -> bool:
    return inspect.iscoroutinefunction(behaviour) or inspect.isasyncgenfunction(behaviour)


def behaviour_of(handler: grpc.RpcMethodHandler) -> Behaviour | None:
    return (
        handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
    )


def stepwise(
    behaviour: Behaviour, scope: Callable[[Any], AbstractContextManager[Any]]
) -> Behaviour:
    """A plain streaming behaviour whose every step runs inside ``scope(context)``.

    Set around each step rather than across yields: the steps of one stream
    may run in different worker threads, and nothing may stay set in a thread
    when a stream is abandoned half way.
    """

    def handle(request: Any, context: Any) -> Iterator[Any]:
        responses: Iterator[Any] | None = None
        while True:
            with scope(context):
                try:
                    if responses is None:
                        responses = iter(behaviour(request, context))
                    response = next(responses)
                except StopIteration:
                    return
            yield response

    return handle
