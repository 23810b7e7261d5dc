"""Bearer-token authentication and role checks for the SessionStore service.

The caller is worked out once per call, from the call's metadata, before
the behaviour runs (on the event loop, for unary calls); the call is then
refused (UNAUTHENTICATED or PERMISSION_DENIED, answered by the error layer)
or runs as the caller, the
caller set for the use cases (services.app.tenancy) in whichever thread or
task serves the call. Health checks and reflection are other services and
stay open. The rules themselves live in services.app.authentication, free of
gRPC.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractContextManager
from typing import Any

import grpc

from services.app.authentication import PermissionDenied, TokenBook, authorize
from services.app.tenancy import Principal, calling_as
from services.grpc.handlers import Behaviour, rewrapped, stepwise
from services.grpc.permissions import METHOD_PERMISSIONS


class Authentication:
    """A layer (services.grpc.layers) for the methods of ``service_name``."""

    def __init__(self, tokens: TokenBook, service_name: str) -> None:
        self.tokens = tokens
        self.prefix = f"/{service_name}/"

    def __call__(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        if not method.startswith(self.prefix):
            return handler
        caller = _Caller(self.tokens, method.removeprefix(self.prefix))
        return rewrapped(handler, returning=caller.returning, streaming=caller.streaming)


class _Caller:
    """Runs each call of one method as its caller, or refuses it."""

    def __init__(self, tokens: TokenBook, method: str) -> None:
        self._tokens = tokens
        self._method = method

    def _scope(self, context: Any) -> AbstractContextManager[None]:
        return calling_as(self._principal(context))

    def _principal(self, context: Any) -> Principal:
        """The caller, or the refusal raised."""
        header = dict(context.invocation_metadata() or ()).get("authorization")
        principal = self._tokens.authenticate(header if isinstance(header, str) else None)
        permission = METHOD_PERMISSIONS.get(self._method)
        if permission is None:
            # Fail closed: a method nobody classified is nobody's.
            raise PermissionDenied(f"{self._method} is not open to any role on this server")
        authorize(principal, permission, self._method)
        return principal

    def returning(self, behaviour: Behaviour) -> Behaviour:
        if inspect.iscoroutinefunction(behaviour):

            async def handle_async(request: Any, context: Any) -> Any:
                with self._scope(context):
                    return await behaviour(request, context)

            return handle_async

        def handle(request: Any, context: Any) -> Any:
            with self._scope(context):
                return behaviour(request, context)

        return handle

    def streaming(self, behaviour: Behaviour) -> Behaviour:
        if inspect.isasyncgenfunction(behaviour):

            async def handle_async(request: Any, context: Any) -> AsyncIterator[Any]:
                with self._scope(context):
                    async for response in behaviour(request, context):
                        yield response

            return handle_async

        def handle(request: Any, context: Any) -> Iterator[Any]:
            # The caller once per call, not once per step.
            principal = self._principal(context)
            yield from stepwise(behaviour, lambda _context: calling_as(principal))(request, context)

        return handle
