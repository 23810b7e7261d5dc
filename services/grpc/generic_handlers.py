"""The generated ``add_*Servicer_to_server`` functions, made to add generic handlers
only (see GenericHandlersOnly)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import grpc


class GenericHandlersOnly:
    """Takes the handlers a generated ``add_*Servicer_to_server`` gives as generic
    handlers only, found by the method's name, not as registered methods.

    grpc.aio keeps a request pending for each registered method, and its serving
    loop waits on all of them (asyncio.wait) to take every call: with the 33
    methods of the store and health, some 20 us of the event loop per call.
    A generic handler is one dict lookup.
    """

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, _service: str, _handlers: dict[str, Any]) -> None:
        """Nothing: the generic handlers serve these methods."""


def generic_handlers_only(server: grpc.aio.Server) -> grpc.aio.Server:
    """``server`` for the generated ``add_*Servicer_to_server``, through
    GenericHandlersOnly: those call only the two methods it has."""
    return cast(grpc.aio.Server, GenericHandlersOnly(server))
