"""Turning failures into gRPC statuses with messages that say what to fix.

A server interceptor wraps every handler, so servicers raise domain errors
and never build statuses themselves. Anything unexpected is logged with its
traceback and answered INTERNAL, without the traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import structlog
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from domain import errors

log = structlog.get_logger(__name__)
ERROR_DOMAIN = "sessionstore"

_CODES: list[tuple[type[Exception], grpc.StatusCode]] = [
    (errors.VersionConflict, grpc.StatusCode.ABORTED),
    (errors.NotFound, grpc.StatusCode.NOT_FOUND),
    (errors.Conflict, grpc.StatusCode.ALREADY_EXISTS),
    (errors.InvalidRequest, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.PreconditionFailed, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.VersionOutOfRange, grpc.StatusCode.OUT_OF_RANGE),
    (errors.DeadlineExceeded, grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.TooManyStreams, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.Unavailable, grpc.StatusCode.UNAVAILABLE),
]


def status_for(error: Exception) -> tuple[grpc.StatusCode, str]:
    for kind, code in _CODES:
        if isinstance(error, kind):
            return code, str(error)
    return grpc.StatusCode.INTERNAL, "internal error; the server log has the details"


class ErrorInterceptor(grpc.ServerInterceptor):
    """Wraps every handler kind (unary or streaming, either way) with the error mapping."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        serializers = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                _returning(handler.unary_unary, method), **serializers
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                _streaming(handler.unary_stream, method), **serializers
            )
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(
                _returning(handler.stream_unary, method), **serializers
            )
        if handler.stream_stream:
            return grpc.stream_stream_rpc_method_handler(
                _streaming(handler.stream_stream, method), **serializers
            )
        return handler


def _abort(context: grpc.ServicerContext, error: Exception, method: str) -> None:
    code, message = status_for(error)
    if code is grpc.StatusCode.INTERNAL:
        log.exception("request failed", method=method)
    else:
        log.info("request refused", method=method, code=code.name, reason=message)
    if isinstance(error, errors.DomainError) and error.reason:
        context.abort_with_status(_with_details(code, message, error))
    context.abort(code, message)


def _with_details(code: grpc.StatusCode, message: str, error: errors.DomainError) -> Any:
    """The status with a google.rpc.ErrorInfo the client can act on without parsing."""
    info = error_details_pb2.ErrorInfo(
        reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    return rpc_status.to_status(
        status_pb2.Status(code=code.value[0], message=message, details=[detail])
    )


def _returning(behaviour: Callable[..., Any], method: str) -> Callable[..., Any]:
    """For handlers that return one response (the request may be a message or a stream)."""

    def handle(request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return behaviour(request, context)
        except Exception as error:
            _abort(context, error, method)

    return handle


def _streaming(
    behaviour: Callable[..., Iterator[Any]], method: str
) -> Callable[..., Iterator[Any]]:
    """For handlers that yield responses (the request may be a message or a stream)."""

    def handle(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        try:
            yield from behaviour(request, context)
        except Exception as error:
            _abort(context, error, method)

    return handle
