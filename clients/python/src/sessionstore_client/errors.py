"""The server's refusals as exceptions, one class per remedy.

Every exception the client raises for a failed call is a ``SessionStoreError``
carrying the gRPC status ``code``, the server's message, and the machine-readable
``reason`` and ``metadata`` of the ``google.rpc.ErrorInfo`` the server sends with
it (empty when it sent none), so code can act without parsing messages::

    try:
        client.append_entries(session_id, entries=[...], expected_version=seen)
    except VersionConflict:
        ...  # read the session again, then retry
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc

from sessionstore_client._proto import rpc_status_pb2

_STATUS_DETAILS = "grpc-status-details-bin"
_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


class SessionStoreError(Exception):
    """A call the server refused, or that could not reach it."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        reason: str = "",
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.reason = reason
        self.metadata: dict[str, str] = dict(metadata or {})


class VersionConflict(SessionStoreError):
    """ABORTED: the session moved on since you read it. Read it again, then retry."""


class CompactionRunningElsewhere(VersionConflict):
    """ABORTED (reason compaction_running_elsewhere): another server is summarising the
    session, so ``compact`` asked no model and compacted nothing. Not retried by the
    client: that summary takes as long as its model (seconds, or minutes), past the
    retries' backoff, and once it lands a compaction may no longer be needed. Call
    ``compact`` again shortly with the same ``idempotency_key`` (``metadata``
    ``idempotency_key`` names it, the one the client made up when none was given): if
    that summary was this call's, the retry answers it (``replayed``)."""


class NotFound(SessionStoreError):
    """NOT_FOUND: no such session or entry (or one of another tenant)."""


class AlreadyExists(SessionStoreError):
    """ALREADY_EXISTS: the id is taken."""


class InvalidArgument(SessionStoreError):
    """INVALID_ARGUMENT: the request is malformed; the message says what to fix."""


class FailedPrecondition(SessionStoreError):
    """FAILED_PRECONDITION: well formed, but the session's state does not allow it."""


class WindowTooSmall(FailedPrecondition):
    """The model's context window is below the window guard's minimum: use a model with a
    larger one (metadata: window_tokens, window_source, minimum_tokens)."""


class CompactionFailed(FailedPrecondition):
    """Compaction could not bring the prompt within the window in the attempts allowed
    (reason compaction_failure; metadata: attempts)."""


class OutOfRange(SessionStoreError):
    """OUT_OF_RANGE: a version or time the session has not reached."""


class Unavailable(SessionStoreError):
    """UNAVAILABLE: the server (or its database) cannot serve now; retried with backoff
    where that is safe, raised when the retries ran out."""


class DeadlineExceeded(SessionStoreError):
    """DEADLINE_EXCEEDED: no answer within the call's timeout."""


class Unauthenticated(SessionStoreError):
    """UNAUTHENTICATED: no token, or one the server does not know."""


class PermissionDenied(SessionStoreError):
    """PERMISSION_DENIED: the token's role may not do this."""


class ResourceExhausted(SessionStoreError):
    """RESOURCE_EXHAUSTED: a limit of the server (say, followed streams) is reached."""


_BY_CODE: dict[grpc.StatusCode, type[SessionStoreError]] = {
    grpc.StatusCode.ABORTED: VersionConflict,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
}
_BY_REASON: dict[str, type[SessionStoreError]] = {
    "CONTEXT_WINDOW_TOO_SMALL": WindowTooSmall,
    "compaction_failure": CompactionFailed,
    "compaction_running_elsewhere": CompactionRunningElsewhere,
}


def error_for(
    code: grpc.StatusCode, message: str, trailing: tuple[tuple[str, str | bytes], ...] | None
) -> SessionStoreError:
    """The exception for a status, with the ErrorInfo found in its trailing metadata."""
    reason, metadata = _error_info(trailing or ())
    kind = _BY_REASON.get(reason) or _BY_CODE.get(code, SessionStoreError)
    return kind(code, message, reason, metadata)


def from_rpc_error(error: grpc.RpcError) -> SessionStoreError:
    """The exception for a failed call (grpc.RpcError of the sync or asyncio API)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = error.details() if hasattr(error, "details") else str(error)
    trailing: Any = error.trailing_metadata() if hasattr(error, "trailing_metadata") else ()
    return error_for(code, message or "", tuple((k, v) for k, v in trailing or ()))


def _error_info(trailing: tuple[tuple[str, str | bytes], ...]) -> tuple[str, dict[str, str]]:
    for key, value in trailing:
        if key != _STATUS_DETAILS or not isinstance(value, bytes):
            continue
        status = rpc_status_pb2.Status.FromString(value)
        for detail in status.details:
            if detail.type_url == _ERROR_INFO:
                info = rpc_status_pb2.ErrorInfo.FromString(detail.value)
                return info.reason, dict(info.metadata)
    return "", {}
