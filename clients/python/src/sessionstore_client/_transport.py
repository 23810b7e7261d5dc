"""What both clients share: where the server is, how to reach it, when to retry.

The address comes from the argument, else ``SESSIONSTORE_ADDRESS``, else
127.0.0.1:50051. The bearer token from the argument, else ``SESSIONSTORE_TOKEN``.
TLS from the argument, else from ``SESSIONSTORE_CA_FILE``, ``SESSIONSTORE_CERT_FILE``
and ``SESSIONSTORE_KEY_FILE`` when any is set (the CLI's variables), else none.
The gRPC service config (say, round robin over every address a name resolves
to) from the argument, else from the file ``SESSIONSTORE_SERVICE_CONFIG_FILE``
names (the ``service-config.json`` of the deploy's client ConfigMap), else none.
"""

from __future__ import annotations

import json
import os
import random
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc

from sessionstore_client._proto import session_store_pb2 as pb
from sessionstore_client.errors import SessionStoreError

DEFAULT_ADDRESS = "127.0.0.1:50051"
# Idempotency keys the client makes up begin with this, so a reader of the events
# tells them from the keys callers chose.
GENERATED_KEY_PREFIX = "auto-"
SERVICE = pb.DESCRIPTOR.services_by_name["SessionStore"]
# Views of long sessions are large; the server bounds what it sends.
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 256 << 20),
    # Reconnect soon after a dropped connection, so a retry finds the server.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2_000),
]
# Codes after which the same request may be sent again: nothing was done, or
# the request is one whose repetition changes nothing. CANCELLED that the client
# did not cause is a server's: a stopping server's gRPC cancels the calls it had
# taken but not yet started, and a stream its transport reset as a server went
# away answers it too. Its own (close() during a call) is never retried.
RETRIED_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}
)
# Reads, and writes a repeat cannot duplicate (an append, and a Compact, carries its
# idempotency key).
RETRIED_METHODS = frozenset(
    {
        "GetSession",
        "ListSessions",
        "AppendEntries",
        "Compact",
        "GetDurableLog",
        "GetPromptView",
        "GetEntry",
        "ReadEvents",
        "GetContextReport",
        "ExportSession",
        "ListCompactions",
        "GetCompaction",
        "ListPrunes",
        "AuditView",
        "GetReadModelStatus",
        # Searching fills the server's embedding cache, which changes no answer.
        "Recall",
    }
)


@dataclass(frozen=True)
class TLS:
    """TLS to the server: trust ``ca_file`` (PEM; the system's roots when None), and
    present ``cert_file`` with ``key_file`` to a server that wants a client certificate."""

    ca_file: str | Path | None = None
    cert_file: str | Path | None = None
    key_file: str | Path | None = None

    def credentials(self) -> grpc.ChannelCredentials:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("TLS needs cert_file and key_file together")
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca_file),
            private_key=_read(self.key_file),
            certificate_chain=_read(self.cert_file),
        )

    @classmethod
    def from_environment(cls) -> TLS | None:
        files = [
            os.environ.get(f"SESSIONSTORE_{name}_FILE") or None for name in ("CA", "CERT", "KEY")
        ]
        return cls(*files) if any(files) else None


@dataclass(frozen=True)
class Retry:
    """How calls that may safely be repeated are retried after UNAVAILABLE,
    DEADLINE_EXCEEDED or a CANCELLED the client did not cause: up to ``attempts``
    tries in all, waiting ``backoff`` seconds (doubled each time, at most
    ``max_backoff``, with jitter) between them, all within the call's timeout. A
    followed stream that drops after giving events resumes after the last, its tries
    counted afresh."""

    attempts: int = 5
    backoff: float = 0.1
    max_backoff: float = 2.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before try ``attempt + 1`` (the first retry is attempt 1)."""
        ceiling = min(self.max_backoff, self.backoff * 2.0 ** (attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)


NO_RETRY = Retry(attempts=1)


@dataclass(frozen=True)
class Connection:
    """The resolved settings of a client."""

    address: str
    token: str
    tls: TLS | None
    timeout: float | None
    retry: Retry
    # The gRPC service config, as JSON text; empty: gRPC's defaults (pick_first).
    service_config: str = ""

    @classmethod
    def resolve(
        cls,
        address: str | None,
        token: str | None,
        tls: TLS | bool | None,
        timeout: float | None,
        retry: Retry | None,
        service_config: str | Mapping[str, Any] | None = None,
    ) -> Connection:
        if tls is None:
            resolved_tls = TLS.from_environment()
        elif isinstance(tls, bool):
            resolved_tls = TLS() if tls else None
        else:
            resolved_tls = tls
        return cls(
            address=address or os.environ.get("SESSIONSTORE_ADDRESS") or DEFAULT_ADDRESS,
            token=token if token is not None else os.environ.get("SESSIONSTORE_TOKEN", ""),
            tls=resolved_tls,
            timeout=timeout,
            retry=retry or Retry(),
            service_config=_service_config(service_config),
        )

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        # Call metadata rather than call credentials: gRPC sends those over TLS
        # only, and a server on loopback takes tokens too.
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()

    def credentials(self) -> grpc.ChannelCredentials | None:
        return self.tls.credentials() if self.tls is not None else None

    @property
    def channel_options(self) -> list[tuple[str, Any]]:
        if not self.service_config:
            return CHANNEL_OPTIONS
        return [*CHANNEL_OPTIONS, ("grpc.service_config", self.service_config)]


SERVICE_CONFIG_FILE_VARIABLE = "SESSIONSTORE_SERVICE_CONFIG_FILE"


def _service_config(given: str | Mapping[str, Any] | None) -> str:
    """The service config as JSON text, checked here: gRPC would reject a malformed
    one only when the channel opens, far from where it was given."""
    if isinstance(given, Mapping):
        return json.dumps(given)
    where = "service_config"
    if given is None:
        path = os.environ.get(SERVICE_CONFIG_FILE_VARIABLE)
        if not path:
            return ""
        where = f"{SERVICE_CONFIG_FILE_VARIABLE} ({path})"
        given = Path(path).read_text()
    try:
        parsed = json.loads(given)
    except ValueError as error:
        raise ValueError(f"{where} is not JSON: {error}") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{where} must be a JSON object, such as {ROUND_ROBIN}")
    return given


# The service config of a channel that round-robins over every address of its target.
ROUND_ROBIN = '{"loadBalancingConfig": [{"round_robin": {}}]}'


class Channels:
    """What ``Client`` and ``AsyncClient`` share: their settings, the callables of the
    RPCs on the channel each opens (``_open``) on first use, and the calls' timeouts."""

    def __init__(
        self,
        address: str | None,
        token: str | None,
        tls: TLS | bool | None,
        timeout: float | None,
        retry: Retry | None,
        service_config: str | Mapping[str, Any] | None,
    ) -> None:
        self.connection = Connection.resolve(address, token, tls, timeout, retry, service_config)
        self._callables: dict[str, Any] = {}
        # How many times close() was called: a call it cancelled is not retried.
        self._closes = 0

    @property
    def address(self) -> str:
        return self.connection.address

    @property
    def closes(self) -> int:
        """How many times ``close()`` was called."""
        return self._closes

    def _open(self) -> Any:
        raise NotImplementedError

    def _callable(self, method: str, kind: str) -> Any:
        """The channel's callable of an RPC, of ``kind`` (say, "unary_unary")."""
        found = self._callables.get(method)
        if found is None:
            request, response = message_classes(method)
            found = getattr(self._open(), kind)(
                method_path(method),
                request_serializer=request.SerializeToString,
                response_deserializer=response.FromString,
            )
            self._callables[method] = found
        return found

    def _timeout(self, timeout: float | None, request: Any = None) -> float | None:
        if timeout is not None:
            return timeout
        if getattr(request, "follow", False):
            return None  # a followed stream lasts until closed
        return self.connection.timeout


def method_path(method: str) -> str:
    return f"/{SERVICE.full_name}/{method}"


def message_classes(method: str) -> tuple[Any, Any]:
    """The request and response message classes of an RPC."""
    descriptor = SERVICE.methods_by_name[method]
    return (
        getattr(pb, descriptor.input_type.name),
        getattr(pb, descriptor.output_type.name),
    )


class Attempts:
    """The tries of one call: the time each may take, and whether to try again."""

    def __init__(self, method: str, client: Channels, timeout: float | None) -> None:
        self.retry = client.connection.retry if method in RETRIED_METHODS else NO_RETRY
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.attempt = 1
        self._client = client
        self._closes = client.closes

    def remaining(self) -> float | None:
        """Seconds the next try may take (None: no limit)."""
        if self.deadline is None:
            return None
        return max(self.deadline - time.monotonic(), 0.001)

    def pause_after(self, error: SessionStoreError) -> float:
        """Seconds to wait before trying again; raises ``error`` when there is no next try."""
        if error.code not in RETRIED_CODES or self.attempt >= self.retry.attempts:
            raise error
        if error.code is grpc.StatusCode.CANCELLED and self._client.closes != self._closes:
            raise error  # the client's own close() ended the call
        pause = self.retry.delay(self.attempt)
        if self.deadline is not None and time.monotonic() + pause >= self.deadline:
            raise error
        self.attempt += 1
        return pause

    def progressed(self) -> None:
        """The call got somewhere (a followed stream gave events): the tries start over."""
        self.attempt = 1


def resumable(request: Any) -> bool:
    """Whether a dropped stream of ``request`` picks up where it stopped: a followed
    ReadEvents, asked again for the events after the last one it gave (so none is
    given twice, and none is missed)."""
    return bool(getattr(request, "follow", False)) and hasattr(request, "after_version")


def resume_after(message: Any, event: Any) -> None:
    """Points a resumable stream's request message past ``event``, the last it gave."""
    message.after_version = event.version


def with_idempotency_key(request: Any) -> Any:
    """The request with a fresh idempotency key when it takes one and has none: every
    try of the call then sends the same key, so a retry never appends (or compacts)
    twice."""
    if getattr(request, "idempotency_key", None) == "":
        return replace(request, idempotency_key=GENERATED_KEY_PREFIX + uuid.uuid4().hex)
    return request


def _read(path: str | Path | None) -> bytes | None:
    return Path(path).read_bytes() if path is not None else None
