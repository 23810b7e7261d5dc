"""Each method's handler wrapped in the server's layers once, not once per call.

What the server does around every call (observing it, mapping its errors,
authenticating its caller, carrying its deadline) is a layer: a function that
wraps a method's handler (services.grpc.handlers). As grpc.aio interceptors,
each layer ran per call, as a coroutine of its own that rebuilt the handler it
passed on (new closures, a new method handler, inspect calls on each). Here
the layers wrap a method's handler the first time it is called, and a call is
a dict lookup; what belongs to the call itself (its metadata, its deadline) is
read inside the wrappers, from its context.

This is also how the generated ``add_*Servicer_to_server`` functions reach the
server: as generic handlers only, found by the method's name. grpc.aio keeps a
request pending for each *registered* method and waits on all of them
(asyncio.wait, in Python) to take every call; a generic handler is one lookup.

A stopping server refuses every new call of the stoppable service, not started
(services.grpc.stopping): from then on its methods are served by refusing
handlers, wrapped in the same layers, so that the refusal is mapped, counted
and logged like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import grpc

from services.grpc.stopping import refusing

# A layer: the handler of ``method`` wrapped in what it adds.
Layer = Callable[[grpc.RpcMethodHandler, str], grpc.RpcMethodHandler]


class LayeredServer:
    """The server, as the generated ``add_*Servicer_to_server`` functions and
    reflection see it: what they add is served through ``layers`` (outermost
    first)."""

    def __init__(
        self, server: grpc.aio.Server, layers: Sequence[Layer], stoppable: str = ""
    ) -> None:
        self._server = server
        self._layers = tuple(reversed(layers))
        self._stoppable = f"/{stoppable}/" if stoppable else ""
        # Why the stoppable service's calls are refused (the server stops), once they are.
        self.stopping = ""

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers([_Layered(h, self) for h in handlers])

    def add_registered_method_handlers(self, _service: str, _handlers: dict[str, Any]) -> None:
        """Nothing: the generic handlers serve these methods."""

    @property
    def adding(self) -> grpc.aio.Server:
        """This, typed as the server the generated functions expect: they call only
        the two methods it has."""
        return cast(grpc.aio.Server, self)

    def refuse_all(self, reason: str) -> None:
        """Refuses every call of the stoppable service to come."""
        self.stopping = reason

    def wrapped(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        for layer in self._layers:
            handler = layer(handler, method)
        return handler

    def refuses(self, method: str) -> bool:
        return bool(self.stopping) and bool(self._stoppable) and method.startswith(self._stoppable)


class _Layered(grpc.GenericRpcHandler):
    """A generic handler whose methods are served through the layers."""

    def __init__(self, inner: grpc.GenericRpcHandler, server: LayeredServer) -> None:
        self._inner = inner
        self._server = server
        # Only methods the inner handler serves: names callers make up are not kept.
        self._served: dict[str, grpc.RpcMethodHandler] = {}
        self._refused: dict[str, grpc.RpcMethodHandler] = {}

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = details.method
        if self._server.refuses(method):
            return self._refusing(details)
        try:
            return self._served[method]
        except KeyError:
            handler = self._inner.service(details)
            if handler is None:
                return None
            served = self._served[method] = self._server.wrapped(handler, method)
            return served

    def _refusing(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = details.method
        if method not in self._refused:
            handler = self._inner.service(details)
            if handler is None:
                return None
            refused = refusing(handler, self._server.stopping)
            self._refused[method] = self._server.wrapped(refused, method)
        return self._refused[method]

    def service_name(self) -> str | None:
        name = getattr(self._inner, "service_name", None)
        return name() if callable(name) else None
