"""Every gRPC call observed from the outside: counted, timed, traced and named in the logs.

The outermost layer (services.grpc.layers): it sees the status the error layer gave,
whatever the handler raised, and the time the whole call took. Per call it
opens a server span (a child of the caller's, when the metadata carries a
W3C ``traceparent``), and binds to the logs the request id (the caller's
``x-request-id``, or a new one) and the session id of the request. Both go
with the call into the worker thread that serves it: the deadline
layer copies the call's context there for plain unary handlers, and
for plain streaming ones each step is run inside the call's scope here.
"""

from __future__ import annotations

import contextlib
import inspect
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import grpc
import structlog
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.grpc.handlers import rewrapped
from services.observability.conversation import conversation

if TYPE_CHECKING:
    # prometheus_client is imported only when metrics are on (services.observability.setup).
    from services.observability.metrics import Metrics

REQUEST_ID_HEADER = "x-request-id"
# Codes that say the server failed, not the caller (OpenTelemetry's RPC conventions).
SERVER_ERRORS = {
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DATA_LOSS,
}
_CODES_BY_VALUE = {code.value[0]: code for code in grpc.StatusCode}


class Observing:
    """A layer (services.grpc.layers), the outermost: every call of a method counted,
    timed, traced and named in the logs."""

    def __init__(self, metrics: Metrics | None, tracer: trace.Tracer) -> None:
        self._metrics = metrics
        self._tracer = tracer

    def __call__(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        observed = _Method(self._metrics, self._tracer, method, _kind(handler))
        return rewrapped(handler, returning=observed.returning, streaming=observed.streaming)


def _kind(handler: grpc.RpcMethodHandler) -> str:
    if handler.unary_unary:
        return "unary"
    if handler.unary_stream:
        return "server_stream"
    if handler.stream_unary:
        return "client_stream"
    return "bidi_stream"


class _Method:
    """One method's calls, each observed by a _Call of its own."""

    def __init__(
        self, metrics: Metrics | None, tracer: trace.Tracer, method: str, kind: str
    ) -> None:
        self.metrics = metrics
        self.tracer = tracer
        self.method = method
        service, _, name = method.lstrip("/").partition("/")
        self.labels = (kind, service, name)

    def returning(self, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(behaviour):

            async def handle_async(request: Any, context: Any) -> Any:
                call = _Call(self, context, request)
                response = None
                try:
                    with call.scope():
                        response = await behaviour(request, context)
                finally:
                    call.end(_status(context), response)
                return response

            return handle_async

        def handle(request: Any, context: Any) -> Any:
            call = _Call(self, context, request)
            watched = _CodeWatch(context)
            response = None
            try:
                with call.scope():
                    response = behaviour(request, watched)
            except BaseException:
                watched.ended_by_error()
                raise
            finally:
                call.end(watched.status(), response)
            return response

        return handle

    def streaming(self, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isasyncgenfunction(behaviour):

            async def handle_async(request: Any, context: Any) -> AsyncIterator[Any]:
                # The scope is set per step, not across yields: a stream cut
                # short (the server stopping) is closed from another task, whose
                # context could not undo what this one had set.
                call = _Call(self, context, request)
                responses = behaviour(request, context)
                try:
                    while True:
                        with call.scope():
                            try:
                                response = await anext(responses)
                            except StopAsyncIteration:
                                return
                        yield response
                finally:
                    with call.scope():
                        await responses.aclose()
                    call.end(_status(context))

            return handle_async

        def handle(request: Any, context: Any) -> Iterator[Any]:
            # Each step may run in another worker thread: the scope is set per step.
            call = _Call(self, context, request)
            watched = _CodeWatch(context)
            responses: Iterator[Any] | None = None
            try:
                while True:
                    with call.scope():
                        if responses is None:
                            responses = iter(behaviour(request, watched))
                        try:
                            response = next(responses)
                        except StopIteration:
                            return
                    yield response
            except GeneratorExit:
                watched.cancelled()  # the client went away mid-stream
                raise
            except BaseException:
                watched.ended_by_error()
                raise
            finally:
                call.end(watched.status())

        return handle


class _Call:
    """One call: its span, its log context, and its figures once it ends."""

    def __init__(self, method: _Method, context: Any, request: Any) -> None:
        self._method = method
        metadata = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        self.request_id = metadata.get(REQUEST_ID_HEADER) or uuid.uuid4().hex
        self._session_id = _session_of(request)
        self._started = time.perf_counter()
        metrics = method.metrics
        if metrics is not None:
            metrics.started.labels(*method.labels).inc()
        _, service, name = method.labels
        attributes: dict[str, Any] = {
            "rpc.system": "grpc",
            "rpc.service": service,
            "rpc.method": name,
            "sessionstore.request_id": self.request_id,
        }
        if self._session_id:
            attributes["gen_ai.conversation.id"] = self._session_id
        self._span: trace.Span | None = method.tracer.start_span(
            method.method.lstrip("/"),
            context=propagate.extract(metadata),
            kind=SpanKind.SERVER,
            attributes=attributes,
        )

    # -- the call's life ------------------------------------------------------------

    def end(self, code: grpc.StatusCode, response: Any = None) -> None:
        metrics = self._method.metrics
        if metrics is not None:
            labels = self._method.labels
            metrics.handled.labels(*labels, code.name).inc()
            metrics.handling.labels(*labels).observe(time.perf_counter() - self._started)
            if isinstance(response, pb.PromptView):
                metrics.views.labels("delta" if response.appended else "whole").inc()
                if response.guard.level:
                    metrics.window_guard.labels(response.guard.level).inc()
        span = self._span
        if span is not None:
            span.set_attribute("rpc.grpc.status_code", code.value[0])
            if code in SERVER_ERRORS:
                span.set_status(Status(StatusCode.ERROR, code.name))
            span.end()
            self._span = None

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """The call's span current, and its ids bound to the logs, in this thread."""
        active = trace.set_span_in_context(self._span) if self._span is not None else None
        token = otel_context.attach(active) if active is not None else None
        ids = {"request_id": self.request_id}
        if self._session_id:
            ids["session_id"] = self._session_id
        try:
            with structlog.contextvars.bound_contextvars(**ids), conversation(self._session_id):
                yield
        finally:
            if token is not None:
                otel_context.detach(token)


class _CodeWatch:
    """A plain handler's context, which cannot tell the code it was given: noted here
    as the handlers set it."""

    def __init__(self, context: Any) -> None:
        self._context = context
        self._code: grpc.StatusCode | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code
        self._context.set_code(code)

    def abort(self, code: grpc.StatusCode, *args: Any, **kwargs: Any) -> Any:
        self._code = code
        return self._context.abort(code, *args, **kwargs)

    def cancelled(self) -> None:
        self._code = self._code or grpc.StatusCode.CANCELLED

    def ended_by_error(self) -> None:
        self._code = self._code or grpc.StatusCode.UNKNOWN

    def status(self) -> grpc.StatusCode:
        return self._code or grpc.StatusCode.OK


def _status(context: Any) -> grpc.StatusCode:
    """The status an asyncio call ends with: what the handlers set, else OK, or
    CANCELLED for a call the client gave up."""
    code = context.code()
    if code is None:
        return grpc.StatusCode.CANCELLED if context.cancelled() else grpc.StatusCode.OK
    if isinstance(code, grpc.StatusCode):
        return code
    return _CODES_BY_VALUE.get(int(code), grpc.StatusCode.UNKNOWN)


def _session_of(request: Any) -> str:
    """The session a request names (as the client names it), if it names one."""
    session_id = getattr(request, "session_id", "")
    return session_id if isinstance(session_id, str) else ""
