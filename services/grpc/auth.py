"""Bearer-token authentication and role checks for the SessionStore service.

The check runs inside the wrapped handler, in the thread that serves the
call (grpcio may call intercept_service elsewhere), and sets the caller
there for the use cases (services.app.tenancy). Health checks and
reflection are other services and stay open. The rules themselves live in
services.app.authentication, free of gRPC.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import structlog

from services.app.authentication import (
    PermissionDenied,
    TokenBook,
    Unauthenticated,
    authorize,
)
from services.app.tenancy import Principal, calling_as
from services.grpc.permissions import METHOD_PERMISSIONS

log = structlog.get_logger(__name__)


class AuthInterceptor(grpc.ServerInterceptor):
    def __init__(self, tokens: TokenBook, service_name: str) -> None:
        self.tokens = tokens
        self.prefix = f"/{service_name}/"

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not method.startswith(self.prefix):
            return handler
        check = _Check(self.tokens, method.removeprefix(self.prefix))
        serializers = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                check.returning(handler.unary_unary), **serializers
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                check.streaming(handler.unary_stream), **serializers
            )
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(
                check.returning(handler.stream_unary), **serializers
            )
        if handler.stream_stream:
            return grpc.stream_stream_rpc_method_handler(
                check.streaming(handler.stream_stream), **serializers
            )
        return handler


class _Check:
    def __init__(self, tokens: TokenBook, method: str) -> None:
        self.tokens = tokens
        self.method = method

    def principal(self, context: grpc.ServicerContext) -> Principal:
        """The caller, or the call aborted with UNAUTHENTICATED or PERMISSION_DENIED."""
        metadata = dict(context.invocation_metadata())
        header = metadata.get("authorization")
        try:
            principal = self.tokens.authenticate(header if isinstance(header, str) else None)
            permission = METHOD_PERMISSIONS.get(self.method)
            if permission is None:
                # Fail closed: a method nobody classified is nobody's.
                raise PermissionDenied(f"{self.method} is not open to any role on this server")
            authorize(principal, permission, self.method)
        except Unauthenticated as error:
            log.info("request refused", method=self.method, code="UNAUTHENTICATED")
            context.abort(grpc.StatusCode.UNAUTHENTICATED, str(error))
        except PermissionDenied as error:
            log.info("request refused", method=self.method, code="PERMISSION_DENIED")
            context.abort(grpc.StatusCode.PERMISSION_DENIED, str(error))
        return principal

    def returning(self, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            with calling_as(self.principal(context)):
                return behaviour(request, context)

        return handle

    def streaming(self, behaviour: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
        def handle(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            principal = self.principal(context)
            # Set around each step rather than across yields, so that nothing
            # stays set in the worker thread when a stream is abandoned half way.
            with calling_as(principal):
                responses = behaviour(request, context)
            while True:
                with calling_as(principal):
                    try:
                        response = next(responses)
                    except StopIteration:
                        return
                yield response

        return handle
