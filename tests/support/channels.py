"""Raw gRPC channels for tests that speak the API's messages themselves: plain or TLS
(with a client certificate for mutual TLS), with a bearer token on every call."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from services.cli.client import Security

PLAIN = Security()


class _ClientCallDetails(grpc.ClientCallDetails):
    def __init__(
        self, details: grpc.ClientCallDetails, metadata: tuple[tuple[str, str | bytes], ...]
    ) -> None:
        self.method = details.method
        self.timeout = details.timeout
        self.metadata = metadata
        self.credentials = details.credentials
        self.wait_for_ready = details.wait_for_ready
        self.compression = details.compression


class BearerToken(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds `authorization: Bearer <token>` to every call. Metadata rather than
    call credentials: those gRPC sends over TLS only, and a token is also
    useful to a server on loopback."""

    def __init__(self, token: str) -> None:
        self.header: tuple[str, str | bytes] = ("authorization", f"Bearer {token}")

    def _details(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        metadata = tuple(m for m in (details.metadata or ()) if m[0] != "authorization")
        return _ClientCallDetails(details, (*metadata, self.header))

    def _call(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    intercept_unary_unary = _call  # type: ignore[assignment]
    intercept_unary_stream = _call  # type: ignore[assignment]
    intercept_stream_unary = _call  # type: ignore[assignment]
    intercept_stream_stream = _call  # type: ignore[assignment]


def open_channel(address: str, security: Security = PLAIN) -> grpc.Channel:
    """A channel as the CLI's ``Security`` (its token and TLS files) describes it."""
    if security.tls:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read(security.ca_file),
            private_key=_read(security.key_file),
            certificate_chain=_read(security.cert_file),
        )
        channel = grpc.secure_channel(address, credentials)
    else:
        channel = grpc.insecure_channel(address)
    if security.token:
        channel = grpc.intercept_channel(channel, BearerToken(security.token))
    return channel


def _read(path: Path | None) -> bytes | None:
    return path.read_bytes() if path is not None else None
