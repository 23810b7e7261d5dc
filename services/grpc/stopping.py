"""Refusing the calls that reach a server once it is stopping, with UNAVAILABLE.

When gRPC itself shuts down it cancels at once the calls it had taken but not
yet handed over: the client sees CANCELLED, which does not say "retry on
another server". So the server first refuses every new call of the
SessionStore service, UNAVAILABLE, for a moment in which gRPC hands over what
it holds, and shuts gRPC down only then (services.grpc.server). A call that
arrives just as it does is still cancelled by gRPC, never started: the Python
client retries that CANCELLED, which it did not cause. Health checks and
reflection stay open: probes must see NOT_SERVING.

The server's layers (services.grpc.layers) serve the refusing handler in the
method's place, wrapped like any other (the error layer answers its
refusal), rather than a layer of its own: every call would pass one more
layer for a check that matters for a tenth of a second at the end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn

import grpc

from domain.errors import Unavailable
from services.grpc.handlers import rewrapped


def refusing(handler: grpc.RpcMethodHandler, reason: str) -> grpc.RpcMethodHandler:
    """The handler, made to refuse its call, not started, because of ``reason``."""
    refusal = f"{reason}; the call was not started: retry it on another server"
    return rewrapped(
        handler,
        returning=lambda _behaviour: _refusing(refusal),
        streaming=lambda _behaviour: _refusing_stream(refusal),
    )


# Coroutines, not plain functions: refused on the event loop, without waiting for a
# worker thread that calls still running may all hold.
def _refusing(refusal: str) -> Callable[..., Awaitable[Any]]:
    async def refuse(_request: Any, _context: Any) -> NoReturn:
        raise Unavailable(refusal)

    return refuse


def _refusing_stream(refusal: str) -> Callable[..., AsyncIterator[Any]]:
    async def refuse(_request: Any, _context: Any) -> AsyncIterator[Any]:
        raise Unavailable(refusal)
        yield  # an async generator, as gRPC serves a stream of responses

    return refuse
