"""The asyncio client: the synchronous client's methods, awaited.

    async with AsyncClient() as client:
        session = await client.create_session()
        async for event in client.read_events(session.id):
            ...

Timeouts, retries, idempotency keys and errors work as in ``Client``. The channel
is opened on the first call, in the event loop that makes it; a call from another
event loop (the client used again under a second ``asyncio.run``) opens a new one
there, since a gRPC channel works only in the loop it was opened in.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import grpc

from sessionstore_client._methods import AsyncMethods
from sessionstore_client._transport import (
    TLS,
    Attempts,
    Channels,
    Retry,
    resumable,
    resume_after,
    with_idempotency_key,
)
from sessionstore_client.client import DEFAULT_TIMEOUT, ImportRequests, import_chunks
from sessionstore_client.errors import from_rpc_error
from sessionstore_client.protobuf import from_proto, to_proto
from sessionstore_client.types import ImportHeader, ImportSessionResponse, SessionSettings

_R = TypeVar("_R")


class AsyncClient(Channels, AsyncMethods):
    """As ``Client``, for asyncio: the same arguments, the same methods, awaited."""

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
        self._channel: grpc.aio.Channel | None = None
        # The event loop the channel was opened in: the only one it works in.
        self._loop: asyncio.AbstractEventLoop | None = None

    async def close(self) -> None:
        self._closes += 1
        loop, channel = self._loop, self._forget_channel()
        # A channel works only in its own loop: one opened in another (closed by
        # now, say) cannot be closed from here and is left to the garbage collector.
        if channel is not None and loop is asyncio.get_running_loop():
            await channel.close(None)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- transport ---------------------------------------------------------------------

    def _callable(self, method: str, kind: str) -> Any:
        if self._channel is not None and self._loop is not asyncio.get_running_loop():
            # Opened in another event loop (closed by now, as asyncio.run does on
            # return): its calls would fail there, so this loop gets a channel of its own.
            self._forget_channel()
        return super()._callable(method, kind)

    def _forget_channel(self) -> grpc.aio.Channel | None:
        channel, self._channel, self._loop = self._channel, None, None
        self._callables.clear()
        return channel

    def _open(self) -> grpc.aio.Channel:
        # No lock: this awaits nothing, so the loop's tasks cannot open two channels.
        if self._channel is None:
            self._loop = asyncio.get_running_loop()
            credentials = self.connection.credentials()
            address = self.connection.address
            options = self.connection.channel_options
            self._channel = (
                grpc.aio.secure_channel(address, credentials, options=options)
                if credentials is not None
                else grpc.aio.insecure_channel(address, options=options)
            )
        return self._channel

    async def _unary(
        self, method: str, request: Any, response: type[_R], timeout: float | None
    ) -> _R:
        message = to_proto(with_idempotency_key(request))
        call = self._callable(method, "unary_unary")
        attempts = Attempts(method, self, self._timeout(timeout))
        while True:
            try:
                answer = await call(
                    message,
                    timeout=attempts.remaining(),
                    metadata=self.connection.metadata,
                    wait_for_ready=False,
                )
            except grpc.RpcError as error:
                failure = from_rpc_error(error)
            else:
                return from_proto(answer, response)
            await asyncio.sleep(attempts.pause_after(failure))

    async def _server_stream(
        self, method: str, request: Any, response: type[_R], timeout: float | None
    ) -> AsyncIterator[_R]:
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
                async for answer in stream:
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
            await asyncio.sleep(attempts.pause_after(failure))

    async def import_session(
        self,
        data: bytes | Iterable[bytes] | Path,
        *,
        format: str = "",
        session_id: str = "",
        settings: SessionSettings | None = None,
        file_name: str = "",
        timeout: float | None = None,
    ) -> ImportSessionResponse:
        """As ``Client.import_session``."""
        if isinstance(data, Path):
            file_name = file_name or data.name
        header = ImportHeader(format, session_id, settings, file_name)
        call = self._callable("ImportSession", "stream_unary")
        with import_chunks(data) as chunks:
            requests = ImportRequests(header, chunks)
            try:
                answer = await call(
                    aiter(requests),
                    timeout=self._timeout(timeout),
                    metadata=self.connection.metadata,
                    wait_for_ready=False,
                )
            except (grpc.RpcError, asyncio.CancelledError) as error:
                # gRPC cancels the call when the chunks raise: theirs is the failure.
                if requests.failure is not None:
                    raise requests.failure from None
                if isinstance(error, asyncio.CancelledError):
                    raise
                raise from_rpc_error(error) from None
        return from_proto(answer, ImportSessionResponse)
