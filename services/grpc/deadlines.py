"""Carries each call's deadline and cut to the code serving it (see services.deadline).

Waits for a session's write lock, a database connection, a retry or the read
models then end with the call instead of keeping a worker thread busy for a
client that has gone, or a server that is stopping.

A plain unary handler is served as a coroutine that runs it in the worker
pool: the event loop cancels that coroutine when the client cancels or its
deadline passes, which a worker thread would never hear of, and the
cancellation pulls the call's cut. ``cut_all`` pulls every call's cut when
the server stops, so that waits end at once (answered UNAVAILABLE) and the
grace period is left to calls that work.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from typing import Any

import grpc

from services import deadline
from services.deadline import Cut
from services.grpc.handlers import behaviour_of, is_async, rewrapped, stepwise

# Without a deadline gRPC answers a remaining time of centuries.
NO_DEADLINE_SECONDS = 365 * 24 * 3600
CANCELLED = "the call was cancelled"


def call_deadline(context: Any) -> float | None:
    """The client's deadline on the time.monotonic() clock, if it set one."""
    remaining = context.time_remaining()
    if remaining is None or remaining > NO_DEADLINE_SECONDS:
        return None
    return time.monotonic() + remaining


class Deadlines:
    """A layer (services.grpc.layers): each call's deadline and cut for the code
    serving it, and plain unary handlers served from the event loop."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor
        self._cuts: set[Cut] = set()
        # Why every call is cut from now on (the server stops), once it is.
        self._stopping = ""

    def __call__(self, handler: grpc.RpcMethodHandler, _method: str) -> grpc.RpcMethodHandler:
        if is_async(behaviour_of(handler)):
            # Async handlers need no help: the event loop cancels them at the
            # deadline.
            return handler
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                self._on_loop(handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return rewrapped(handler, returning=self._in_thread, streaming=self._streaming)

    def cut_all(self, reason: str) -> None:
        """Cuts every call running and every call to come."""
        self._stopping = reason
        for cut in list(self._cuts):
            cut(reason)

    @contextmanager
    def _call(self, context: Any) -> Iterator[Cut]:
        cut = Cut()
        if self._stopping:
            cut(self._stopping)
        self._cuts.add(cut)
        try:
            with deadline.within(call_deadline(context), cut):
                yield cut
        finally:
            self._cuts.discard(cut)

    def _on_loop(self, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        async def handle(request: Any, context: Any) -> Any:
            with self._call(context) as cut:
                # The caller and the deadline go with the call into the worker thread.
                call = contextvars.copy_context()
                loop = asyncio.get_running_loop()
                try:
                    return await loop.run_in_executor(
                        self._executor, call.run, behaviour, request, context
                    )
                except asyncio.CancelledError:
                    cut(CANCELLED)
                    raise

        return handle

    def _in_thread(self, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        # A request stream (ImportSession) is read in its worker thread.
        def handle(request: Any, context: Any) -> Any:
            with self._call(context):
                return behaviour(request, context)

        return handle

    def _streaming(self, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        return stepwise(behaviour, self._call)
