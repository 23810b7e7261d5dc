"""Carries each call's deadline to the code serving it (see services.app.deadline).

Waits for a session's write lock, a database connection or a retry then end
with the call instead of keeping a worker thread busy for a client that has
gone.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import grpc

from services.app import deadline

# Without a deadline gRPC answers a remaining time of centuries.
NO_DEADLINE_SECONDS = 365 * 24 * 3600


def call_deadline(context: grpc.ServicerContext) -> float | None:
    """The client's deadline on the time.monotonic() clock, if it set one."""
    remaining = context.time_remaining()
    if remaining is None or remaining > NO_DEADLINE_SECONDS:
        return None
    return time.monotonic() + remaining


class DeadlineInterceptor(grpc.aio.ServerInterceptor):
    async def intercept_service(  # type: ignore[override]  # None: no such method
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None or _is_async(handler):
            # Async handlers need no help: the event loop cancels them at the
            # deadline.
            return handler
        serializers = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                _returning(handler.unary_unary), **serializers
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                _streaming(handler.unary_stream), **serializers
            )
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(
                _returning(handler.stream_unary), **serializers
            )
        if handler.stream_stream:
            return grpc.stream_stream_rpc_method_handler(
                _streaming(handler.stream_stream), **serializers
            )
        return handler


def _is_async(handler: grpc.RpcMethodHandler) -> bool:
    behaviour = (
        handler.unary_unary or handler.unary_stream or handler.stream_unary or handler.stream_stream
    )
    return inspect.iscoroutinefunction(behaviour) or inspect.isasyncgenfunction(behaviour)


def _returning(behaviour: Callable[..., Any]) -> Callable[..., Any]:
    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        with deadline.within(call_deadline(context)):
            return behaviour(request, context)

    return handle


def _streaming(behaviour: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    def handle(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        # Set around each step rather than across yields, so that nothing stays
        # set in the worker thread when a stream is abandoned half way.
        limit = call_deadline(context)
        responses = behaviour(request, context)
        while True:
            with deadline.within(limit):
                try:
                    response = next(responses)
                except StopIteration:
                    return
            yield response

    return handle
