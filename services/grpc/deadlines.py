"""Carries each call's deadline to the code serving it (see services.app.deadline).

Waits for a session's write lock, a database connection or a retry then end
with the call instead of keeping a worker thread busy for a client that has
gone.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any

import grpc

from services.app import deadline
from services.grpc.handlers import behaviour_of, is_async, rewrapped, stepwise

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
        if handler is None or is_async(behaviour_of(handler)):
            # Async handlers need no help: the event loop cancels them at the
            # deadline.
            return handler
        return rewrapped(handler, returning=_returning, streaming=_streaming)


def _within_call(context: grpc.ServicerContext) -> AbstractContextManager[None]:
    return deadline.within(call_deadline(context))


def _returning(behaviour: Callable[..., Any]) -> Callable[..., Any]:
    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        with _within_call(context):
            return behaviour(request, context)

    return handle


def _streaming(behaviour: Callable[..., Any]) -> Callable[..., Any]:
    return stepwise(behaviour, _within_call)
