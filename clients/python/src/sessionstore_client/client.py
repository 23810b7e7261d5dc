"""The synchronous client: one method per RPC, plain Python values in and out.

    from sessionstore_client import Client, Entry, Role, TextBlock

    with Client() as client:
        session = client.create_session()
        client.append_entries(
            session.id, entries=[Entry(role=Role.USER, content=[TextBlock("hi")])]
        )

Every call has a timeout (the client's ``timeout``, 30 seconds unless set; a
followed event stream has none unless given). Reads, appends and compactions that
fail with UNAVAILABLE, DEADLINE_EXCEEDED or a CANCELLED the client did not cause (a
stopping server's) are tried again with backoff within it; every append and compact
carries an idempotency key (generated unless given), the same on each try, so a
retried one is never written twice. A followed event stream that drops
resumes after the last event it gave. Failures raise the exceptions of
``sessionstore_client.errors``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import grpc

from sessionstore_client._methods import SyncMethods
from sessionstore_client._transport import (
    GENERATED_KEY_PREFIX,
    TLS,
    Attempts,
    Channels,
    Retry,
    message_classes,
    resumable,
    resume_after,
    with_idempotency_key,
)
from sessionstore_client.errors import from_rpc_error
from sessionstore_client.protobuf import from_proto, to_proto
from sessionstore_client.types import (
    ImportHeader,
    ImportSessionResponse,
    SessionSettings,
)

__all__ = ["GENERATED_KEY_PREFIX", "Client"]
_R = TypeVar("_R")
DEFAULT_TIMEOUT = 30.0
# A transcript goes to the server in chunks of this many bytes.
IMPORT_CHUNK_BYTES = 1 << 20


class Client(Channels, SyncMethods):
    """A connection to a session store server (opened on the first call).

    ``address`` is host:port (default: ``SESSIONSTORE_ADDRESS``, else
    127.0.0.1:50051); ``token`` the bearer token (default: ``SESSIONSTORE_TOKEN``);
    ``tls`` a ``TLS`` (or True for TLS with the system's roots, False for none;
    default: from ``SESSIONSTORE_CA_FILE``, ``_CERT_FILE`` and ``_KEY_FILE``);
    ``timeout`` the seconds a call may take, retries included (None: no limit);
    ``retry`` how reads and appends are retried (``Retry``).
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        token: str | None = None,
        tls: TLS | bool | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        retry: Retry | None = None,
        service_config: str | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(address, token, tls, timeout, retry, service_config)
        self._channel: grpc.Channel | None = None
        # Threads share a client: their first calls must open one channel, not one each
        # (close() would close only the last).
        self._channel_lock = threading.Lock()

    def close(self) -> None:
        with self._channel_lock:
            self._closes += 1
            if self._channel is not None:
                self._channel.close()
                self._channel = None
                self._callables.clear()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- transport ---------------------------------------------------------------------

    def _open(self) -> grpc.Channel:
        with self._channel_lock:
            if self._channel is None:
                credentials = self.connection.credentials()
                address = self.connection.address
                options = self.connection.channel_options
                self._channel = (
                    grpc.secure_channel(address, credentials, options=options)
                    if credentials is not None
                    else grpc.insecure_channel(address, options=options)
                )
            return self._channel

    def _unary(self, method: str, request: Any, response: type[_R], timeout: float | None) -> _R:
        message = to_proto(with_idempotency_key(request))
        call = self._callable(method, "unary_unary")
        attempts = Attempts(method, self, self._timeout(timeout))
        while True:
            try:
                answer = call(
                    message,
                    timeout=attempts.remaining(),
                    metadata=self.connection.metadata,
                    # Fail at once when nothing listens (and retry), rather than
                    # waiting out the deadline for a server that may never come.
                    wait_for_ready=False,
                )
            except grpc.RpcError as error:
                failure = from_rpc_error(error)
            else:
                return from_proto(answer, response)
            time.sleep(attempts.pause_after(failure))

    def _server_stream(
        self, method: str, request: Any, response: type[_R], timeout: float | None
    ) -> Iterator[_R]:
        message = to_proto(request)
        # A dropped followed stream is asked again for what came after its last event.
        resumes = resumable(request)
        call = self._callable(method, "unary_stream")
        attempts = Attempts(method, self, self._timeout(timeout, request))
        while True:
            stream = call(
                message,
                timeout=attempts.remaining(),
                metadata=self.connection.metadata,
                wait_for_ready=False,
            )
            received = False
            try:
                for answer in stream:
                    received = True
                    value = from_proto(answer, response)
                    if resumes:
                        resume_after(message, answer)
                    yield value
                return
            except grpc.RpcError as error:
                failure = from_rpc_error(error)
            finally:
                stream.cancel()
            if received and not resumes:
                raise failure  # retrying would repeat what was read
            if received:
                attempts.progressed()
            time.sleep(attempts.pause_after(failure))

    # -- by hand: the client-streaming RPC -----------------------------------------------

    def import_session(
        self,
        data: bytes | Iterable[bytes] | Path,
        *,
        format: str = "",
        session_id: str = "",
        settings: SessionSettings | None = None,
        file_name: str = "",
        timeout: float | None = None,
    ) -> ImportSessionResponse:
        """Imports an agent transcript (pi, openclaw, claude-code or openai JSONL; detected
        when ``format`` is empty): its bytes, chunks of them, or a file. Creates the
        session (and one fork per other branch of a pi tree), or nothing."""
        if isinstance(data, Path):
            file_name = file_name or data.name
        header = ImportHeader(format, session_id, settings, file_name)
        call = self._callable("ImportSession", "stream_unary")
        with import_chunks(data) as chunks:
            requests = ImportRequests(header, chunks)
            try:
                answer = call(
                    iter(requests),
                    timeout=self._timeout(timeout),
                    metadata=self.connection.metadata,
                    wait_for_ready=False,
                )
            except grpc.RpcError as error:
                raise requests.failure or from_rpc_error(error) from None
        return from_proto(answer, ImportSessionResponse)


class ImportRequests:
    """An import's request messages: the header, then the transcript's chunks. Keeps an
    exception the chunks raised (a generator that failed): gRPC only logs it and fails
    the call with UNKNOWN, so the client raises it in the call's place."""

    def __init__(self, header: ImportHeader, chunks: Iterable[bytes]) -> None:
        self.request_class, _ = message_classes("ImportSession")
        self.header = self.request_class(header=to_proto(header))
        self.chunks = chunks
        self.failure: Exception | None = None

    def __iter__(self) -> Iterator[Any]:
        yield self.header
        try:
            for chunk in self.chunks:
                yield self.request_class(chunk=chunk)
        except Exception as error:
            self.failure = error
            raise

    async def __aiter__(self) -> AsyncIterator[Any]:
        for request in self:
            yield request


@contextmanager
def import_chunks(data: bytes | Iterable[bytes] | Path) -> Iterator[Iterable[bytes]]:
    """The transcript in chunks. A file is opened here, before the call, so a missing one
    raises FileNotFoundError at once, and is read a chunk at a time as the call sends."""
    if isinstance(data, Path):
        with data.open("rb") as file:
            yield iter(lambda: file.read(IMPORT_CHUNK_BYTES), b"")
    elif isinstance(data, bytes | bytearray):
        yield (
            bytes(data[start : start + IMPORT_CHUNK_BYTES])
            for start in range(0, len(data), IMPORT_CHUNK_BYTES)
        )
    elif isinstance(data, str):
        raise TypeError("data is a str: give the transcript's bytes, chunks of them or a Path")
    else:
        yield data
