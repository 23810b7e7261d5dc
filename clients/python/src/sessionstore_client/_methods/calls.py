# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The calls every RPC method makes: the clients implement them.

The transport (deadline, retries, errors) is the client's: see
sessionstore_client.client and .aio.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

__all__ = ["AsyncCalls", "SyncCalls"]
_R = TypeVar("_R")


class SyncCalls(ABC):
    """What the RPC methods of the synchronous client call."""

    @abstractmethod
    def _unary(
        self, method: str, request: Any, response: type[_R], timeout: float | None
    ) -> _R: ...

    @abstractmethod
    def _server_stream(
        self, method: str, request: Any, response: type[_R], timeout: float | None
    ) -> Iterator[_R]: ...


class AsyncCalls(ABC):
    """What the RPC methods of the asyncio client call."""

    @abstractmethod
    async def _unary(
        self, method: str, request: Any, response: type[_R], timeout: float | None
    ) -> _R: ...

    @abstractmethod
    def _server_stream(
        self, method: str, request: Any, response: type[_R], timeout: float | None
    ) -> AsyncIterator[_R]: ...
