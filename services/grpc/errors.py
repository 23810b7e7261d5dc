"""Turning failures into gRPC statuses with messages that say what to fix.

A layer of the server wraps every handler, so servicers raise domain errors
and never build statuses themselves. Handlers are plain functions, run in the
server's worker threads, or async generators served on its event loop.
Anything unexpected is logged with its traceback and answered INTERNAL,
without the traceback. A part of a call that must not fail the call (the view
after an append, whose write stands) is answered that status as text instead
(``failure_text``), logged the same way. Bytes that do not
decode as the method's request, and requests with a string no store can
hold (services.grpc.request_strings), are answered INVALID_ARGUMENT before
any handler runs. Once the server stops, the service's calls are refused
UNAVAILABLE (services.grpc.stopping). Whoever must know what calls are refused
with (the database monitor, which a damaged database takes out of rotation) is
told each refusal (``noticed``), and each failure of a part answered as text.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import grpc
import structlog
from google.protobuf import any_pb2
from google.protobuf.descriptor import Descriptor, ServiceDescriptor
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from domain import errors
from services.app.authentication import PermissionDenied, Unauthenticated
from services.grpc.handlers import rewrapped
from services.grpc.request_strings import RequestStrings, undecodable_field

log = structlog.get_logger(__name__)
ERROR_DOMAIN = "sessionstore"
# Clients refuse status headers beyond 8 KB (the message percent-encoded, and
# again inside any details) and report another error instead: stay well below.
MAX_MESSAGE_BYTES = 1_024


class AnswerTooLarge(errors.DomainError):
    """An answer larger than a message may be: gRPC would fail the call with a
    message of its own and log it as a server error."""

    reason = "answer_too_large"

    def __init__(self, method: str, size: int, limit: int) -> None:
        name = method.rsplit("/", 1)[-1]
        super().__init__(
            f"the answer to {name} takes {size:,} bytes, over the {limit:,} this server "
            "sends in one message (set by SESSIONSTORE_MAX_MESSAGE_MB): ask for less (a "
            "page, a range, a token budget), or raise the limit on the server and the "
            "client's receive limit"
        )
        self.metadata = {"answer_bytes": str(size), "limit_bytes": str(limit)}


_CODES: list[tuple[type[Exception], grpc.StatusCode]] = [
    (errors.VersionConflict, grpc.StatusCode.ABORTED),
    # Another server summarises the session: retry shortly, as after a version conflict.
    (errors.CompactionRunningElsewhere, grpc.StatusCode.ABORTED),
    (errors.NotFound, grpc.StatusCode.NOT_FOUND),
    (errors.Conflict, grpc.StatusCode.ALREADY_EXISTS),
    (errors.InvalidRequest, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.PreconditionFailed, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.VersionOutOfRange, grpc.StatusCode.OUT_OF_RANGE),
    (errors.DeadlineExceeded, grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.TooManyStreams, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (AnswerTooLarge, grpc.StatusCode.RESOURCE_EXHAUSTED),
    # States of the database only an operator ends too (DatabaseNeedsOperator): another
    # server may serve the call, and a retry here does once they are fixed.
    (errors.Unavailable, grpc.StatusCode.UNAVAILABLE),
    (Unauthenticated, grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
]


def status_for(error: Exception) -> tuple[grpc.StatusCode, str]:
    for kind, code in _CODES:
        if isinstance(error, kind):
            return code, _capped(str(error))
    return grpc.StatusCode.INTERNAL, "internal error; the server log has the details"


Noticed = Callable[[Exception], None]


def _unheard(_error: Exception) -> None:
    """Where refusals go when nobody asked to be told of them."""


def failure_text(error: Exception, method: str, part: str, noticed: Noticed = _unheard) -> str:
    """What a call failing with ``error`` would answer, as "CODE: message", for the
    ``part`` of ``method``'s call whose failure must not fail it (the view after an
    append: the write stands, and a failed call would have it sent again). Logged as
    a failed call is: anything unexpected with its traceback, which the text never
    carries; and ``noticed`` is told, as of a failed call (a damaged database met
    there takes the server out of rotation as one met by a call does)."""
    noticed(error)
    code, message = status_for(error)
    _log_failure(error, code, message, method, part)
    return f"{code.name}: {message}"


def _capped(message: str) -> str:
    encoded = message.encode()
    if len(encoded) <= MAX_MESSAGE_BYTES:
        return message
    return encoded[: MAX_MESSAGE_BYTES - 20].decode(errors="ignore") + "... (cut short)"


class _Refused:
    """Stands for a request that cannot be served, so the handler can refuse it.

    gRPC itself answers a failing deserializer with INTERNAL; the wrapped
    deserializer never fails, and the wrapped behaviour refuses this instead.
    """

    def __init__(self, refusal: errors.InvalidRequest) -> None:
        self.refusal = refusal


def _checked(
    deserializer: Callable[[bytes], Any] | None,
    method: str,
    request_type: Descriptor | None,
    strings: RequestStrings,
) -> Callable[[bytes], Any] | None:
    """The deserializer, made to answer an _Refused instead of failing, and to
    check the strings of the service's requests."""
    if deserializer is None:
        return None

    def deserialize(data: bytes) -> Any:
        try:
            request = deserializer(data)
        except Exception as error:
            return _Refused(_malformed(error, data, method, request_type))
        if request_type is not None:
            try:
                strings.check(request)
            except errors.InvalidRequest as refusal:
                return _Refused(refusal)
        return request

    return deserialize


def _decoded(request: Any) -> Any:
    """The request, refusing one that did not decode; a request stream is checked
    message by message as the handler reads it."""
    if isinstance(request, _Refused):
        raise request.refusal
    if isinstance(request, Iterator):
        return _decoded_stream(request)
    return request


def _decoded_stream(requests: Iterator[Any]) -> Iterator[Any]:
    for request in requests:
        if isinstance(request, _Refused):
            raise request.refusal
        yield request


def _malformed(
    error: Exception, data: bytes, method: str, request_type: Descriptor | None
) -> errors.InvalidRequest:
    field = undecodable_field(data, request_type) if request_type is not None else None
    if field is not None:
        return errors.InvalidRequest(
            f"{field} is not UTF-8 text (a lone surrogate, or bytes that are not UTF-8); "
            "send valid UTF-8"
        )
    name = method.rsplit("/", 1)[-1]
    return errors.InvalidRequest(
        f"the request is not a valid {name} request message (protocol buffers, with UTF-8 "
        f"strings): {errors.quoted(str(error), 200)}"
    )


class ErrorMapping:
    """A layer (services.grpc.layers) that wraps every handler kind (unary or
    streaming, either way) with the error mapping, checks the strings of
    ``service``'s requests, and refuses answers over ``max_answer_bytes`` with a
    status that says so; ``noticed`` is told each failure a call is answered."""

    def __init__(
        self,
        service: ServiceDescriptor,
        strings: RequestStrings,
        max_answer_bytes: int,
        noticed: Noticed = _unheard,
    ) -> None:
        self.prefix = f"/{service.full_name}/"
        self.request_types = {m.name: m.input_type for m in service.methods}
        self.strings = strings
        self.max_answer_bytes = max_answer_bytes
        self.noticed = noticed

    def __call__(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        request_type = None
        if method.startswith(self.prefix):
            request_type = self.request_types.get(method.removeprefix(self.prefix))
        limit, noticed = self.max_answer_bytes, self.noticed
        return rewrapped(
            handler,
            returning=lambda behaviour: _returning(behaviour, method, limit, noticed),
            streaming=lambda behaviour: _streaming(behaviour, method, limit, noticed),
            request_deserializer=_checked(
                handler.request_deserializer, method, request_type, self.strings
            ),
        )


def _refusal(
    error: Exception, method: str, noticed: Noticed
) -> tuple[grpc.StatusCode, str, tuple[Any, ...]]:
    """The status code, message and trailing metadata (error details) for a failure."""
    noticed(error)
    code, message = status_for(error)
    _log_failure(error, code, message, method, "request")
    if isinstance(error, _NAMED) and error.reason:
        return code, message, tuple(_with_details(code, message, error).trailing_metadata)
    return code, message, ()


def _log_failure(
    error: Exception, code: grpc.StatusCode, message: str, method: str, part: str
) -> None:
    if code is grpc.StatusCode.INTERNAL:
        log.error(f"{part} failed", method=method, exc_info=error)
    elif isinstance(error, errors.DatabaseNeedsOperator):
        # A state only an operator ends, which nothing else logs: said as an error,
        # though not once per call it refuses.
        if _operator_log.due(message):
            log.error(f"{part} refused", method=method, code=code.name, reason=message)
    elif code is grpc.StatusCode.UNAVAILABLE:
        # A state of the server (the database down, a read model behind, a stop),
        # which is logged when it starts and ends: not once more per call it refuses.
        log.debug(f"{part} refused", method=method, code=code.name, reason=message)
    else:
        log.info(f"{part} refused", method=method, code=code.name, reason=message)


OPERATOR_LOG_SECONDS = 60.0


class _Throttle:
    """Says whether a message is due to be logged: the first time, then at most once
    every ``seconds`` while it keeps coming."""

    def __init__(self, seconds: float, remembered: int = 64) -> None:
        self.seconds = seconds
        self.remembered = remembered
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def due(self, message: str) -> bool:
        now = time.monotonic()
        with self._lock:
            last = self._last.get(message)
            if last is not None and now - last < self.seconds:
                return False
            if len(self._last) >= self.remembered:
                self._last.clear()
            self._last[message] = now
            return True


_operator_log = _Throttle(OPERATOR_LOG_SECONDS)

# Every refusal the server means to make names its reason; anything else is INTERNAL.
_NAMED = (errors.DomainError, Unauthenticated, PermissionDenied)


def _with_details(
    code: grpc.StatusCode,
    message: str,
    error: errors.DomainError | Unauthenticated | PermissionDenied,
) -> Any:
    """The status with a google.rpc.ErrorInfo the client can act on without parsing."""
    info = error_details_pb2.ErrorInfo(
        reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata
    )
    detail = any_pb2.Any()
    detail.Pack(info)
    return rpc_status.to_status(
        status_pb2.Status(code=code.value[0], message=message, details=[detail])
    )


def _sendable(response: Any, method: str, limit: int) -> Any:
    """The response, unless it is larger than one message may be (a handler that
    serialises its own answers checks them itself)."""
    if isinstance(response, Message):
        size = response.ByteSize()
        if size > limit:
            raise AnswerTooLarge(method, size, limit)
    return response


def _returning(
    behaviour: Callable[..., Any], method: str, limit: int, noticed: Noticed
) -> Callable[..., Any]:
    """For handlers that return one response (the request may be a message or a stream)."""
    if inspect.iscoroutinefunction(behaviour):

        async def handle_async(request: Any, context: Any) -> Any:
            try:
                return _sendable(await behaviour(_decoded(request), context), method, limit)
            except Exception as error:
                await context.abort(*_refusal(error, method, noticed))

        return handle_async

    # The context is the asyncio server's one for plain functions: its abort
    # takes the trailing metadata that carries the error details.
    def handle(request: Any, context: Any) -> Any:
        try:
            return _sendable(behaviour(_decoded(request), context), method, limit)
        except Exception as error:
            context.abort(*_refusal(error, method, noticed))

    return handle


def _streaming(
    behaviour: Callable[..., Any], method: str, limit: int, noticed: Noticed
) -> Callable[..., Any]:
    """For handlers that yield responses (the request may be a message or a stream)."""
    if inspect.isasyncgenfunction(behaviour):

        async def handle_async(request: Any, context: Any) -> AsyncIterator[Any]:
            try:
                async for response in behaviour(_decoded(request), context):
                    yield _sendable(response, method, limit)
            except Exception as error:
                await context.abort(*_refusal(error, method, noticed))

        return handle_async

    def handle(request: Any, context: Any) -> Iterator[Any]:
        try:
            for response in behaviour(_decoded(request), context):
                yield _sendable(response, method, limit)
        except Exception as error:
            # Not abort(): from a worker thread it would send the status while
            # the event loop may still be sending the last message. Ending the
            # stream with the status set sends it after that message.
            code, message, trailing = _refusal(error, method, noticed)
            context.set_code(code)
            context.set_details(message)
            context.set_trailing_metadata(trailing)

    return handle
