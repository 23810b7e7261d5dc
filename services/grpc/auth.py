"""Bearer-token authentication and role checks for the SessionStore service.

The caller is worked out once per call, on the event loop, from the call's
metadata; the wrapped behaviour then refuses it (UNAUTHENTICATED or
PERMISSION_DENIED, answered by the error interceptor) or runs as it, the
caller set for the use cases (services.app.tenancy) in whichever thread or
task serves the call. Health checks and reflection are other services and
stay open. The rules themselves live in services.app.authentication, free of
gRPC.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any

import grpc

from services.app.authentication import PermissionDenied, TokenBook, authorize
from services.app.tenancy import Principal, calling_as
from services.grpc.handlers import Behaviour, rewrapped, stepwise
from services.grpc.permissions import METHOD_PERMISSIONS


class AuthInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, tokens: TokenBook, service_name: str) -> None:
        self.tokens = tokens
        self.prefix = f"/{service_name}/"

    async def intercept_service(  # type: ignore[override]  # None: no such method
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not method.startswith(self.prefix):
            return handler
        caller = _Caller(self._principal(handler_call_details, method.removeprefix(self.prefix)))
        return rewrapped(handler, returning=caller.returning, streaming=caller.streaming)

    def _principal(self, details: grpc.HandlerCallDetails, method: str) -> Principal | Exception:
        """The caller, or why it is refused."""
        header = dict(details.invocation_metadata or ()).get("authorization")
        try:
            principal = self.tokens.authenticate(header if isinstance(header, str) else None)
            permission = METHOD_PERMISSIONS.get(method)
            if permission is None:
                # Fail closed: a method nobody classified is nobody's.
                raise PermissionDenied(f"{method} is not open to any role on this server")
            authorize(principal, permission, method)
        except Exception as refusal:
            return refusal
        return principal


class _Caller:
    """Runs one call's behaviour as its caller, or refuses it."""

    def __init__(self, principal: Principal | Exception) -> None:
        self._principal = principal

    def _scope(self, _context: Any = None) -> AbstractContextManager[None]:
        if isinstance(self._principal, Exception):
            raise self._principal
        return calling_as(self._principal)

    def returning(self, behaviour: Behaviour) -> Behaviour:
        if inspect.iscoroutinefunction(behaviour):

            async def handle_async(request: Any, context: Any) -> Any:
                with self._scope():
                    return await behaviour(request, context)

            return handle_async

        def handle(request: Any, context: Any) -> Any:
            with self._scope():
                return behaviour(request, context)

        return handle

    def streaming(self, behaviour: Behaviour) -> Behaviour:
        if inspect.isasyncgenfunction(behaviour):

            async def handle_async(request: Any, context: Any) -> AsyncIterator[Any]:
                with self._scope():
                    async for response in behaviour(request, context):
                        yield response

            return handle_async
        return stepwise(behaviour, self._scope)
