# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The calls every RPC method makes: the clients implement them.

The transport (deadline, retries, errors) is the client's: see
sessionstore_client.client and .aio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

__all__ = ["AsyncCalls", "SyncCalls"]
_R = TypeVar("_R")


class SyncCalls:
    """What the RPC methods of the synchronous client call."""

    def _unary(self, method: str, request: Any, response: type[_R], timeout: float | None) -> _R:
        raise NotImplementedError

    def _server_stream(
        self, method: str, request: Any, response: type[_R], timeout: float | None
    ) -> Iterator[_R]:
        raise NotImplementedError


class AsyncCalls:
    """What the RPC methods of the asyncio client call."""

    async def _unary(
        self, method: str, request: Any, response: type[_R], timeout: float | None
    ) -> _R:
        raise NotImplementedError

    def _server_stream(
        self, method: str, request: Any, response: type[_R], timeout: float | None
    ) -> AsyncIterator[_R]:
        raise NotImplementedError
