# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The RPCs whose requests are under the .proto's "views" heading.

One method each, for the synchronous client and for the asyncio one: it takes
the request's fields as arguments and answers the response as the dataclass of
sessionstore_client.types.
"""

from __future__ import annotations

from datetime import datetime

from sessionstore_client._methods.calls import AsyncCalls, SyncCalls
from sessionstore_client.types import (
    DurableLog,
    Entry,
    GetEntryRequest,
    GetPromptViewRequest,
    GetViewRequest,
    PromptFormat,
    PromptView,
)

__all__ = ["AsyncViewsMethods", "SyncViewsMethods"]


class SyncViewsMethods(SyncCalls):
    """The "views" RPCs as methods of the synchronous client."""

    def get_durable_log(
        self,
        session_id: str,
        *,
        version: int | None = None,
        time: datetime | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> DurableLog:
        """The durable log: latest compaction summary, then the kept entries. Large
        logs come in pages (GetViewRequest.page_size, page_token).
        """
        return self._unary(
            "GetDurableLog",
            GetViewRequest(
                session_id=session_id,
                version=version,
                time=time,
                page_size=page_size,
                page_token=page_token,
            ),
            DurableLog,
            timeout,
        )

    def get_prompt_view(
        self,
        session_id: str,
        *,
        version: int | None = None,
        time: datetime | None = None,
        format: PromptFormat = PromptFormat.UNSPECIFIED,
        token_budget: int | None = None,
        held_version: int | None = None,
        held_hash: str = "",
        timeout: float | None = None,
    ) -> PromptView:
        """The prompt view: the durable log with prunes applied, rendered for a provider."""
        return self._unary(
            "GetPromptView",
            GetPromptViewRequest(
                session_id=session_id,
                version=version,
                time=time,
                format=format,
                token_budget=token_budget,
                held_version=held_version,
                held_hash=held_hash,
            ),
            PromptView,
            timeout,
        )

    def get_entry(
        self, session_id: str, *, entry_id: str = "", timeout: float | None = None
    ) -> Entry:
        """One entry's full, unpruned content, whether or not it was compacted away."""
        return self._unary(
            "GetEntry", GetEntryRequest(session_id=session_id, entry_id=entry_id), Entry, timeout
        )


class AsyncViewsMethods(AsyncCalls):
    """The "views" RPCs as methods of the asyncio client."""

    async def get_durable_log(
        self,
        session_id: str,
        *,
        version: int | None = None,
        time: datetime | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> DurableLog:
        """The durable log: latest compaction summary, then the kept entries. Large
        logs come in pages (GetViewRequest.page_size, page_token).
        """
        return await self._unary(
            "GetDurableLog",
            GetViewRequest(
                session_id=session_id,
                version=version,
                time=time,
                page_size=page_size,
                page_token=page_token,
            ),
            DurableLog,
            timeout,
        )

    async def get_prompt_view(
        self,
        session_id: str,
        *,
        version: int | None = None,
        time: datetime | None = None,
        format: PromptFormat = PromptFormat.UNSPECIFIED,
        token_budget: int | None = None,
        held_version: int | None = None,
        held_hash: str = "",
        timeout: float | None = None,
    ) -> PromptView:
        """The prompt view: the durable log with prunes applied, rendered for a provider."""
        return await self._unary(
            "GetPromptView",
            GetPromptViewRequest(
                session_id=session_id,
                version=version,
                time=time,
                format=format,
                token_budget=token_budget,
                held_version=held_version,
                held_hash=held_hash,
            ),
            PromptView,
            timeout,
        )

    async def get_entry(
        self, session_id: str, *, entry_id: str = "", timeout: float | None = None
    ) -> Entry:
        """One entry's full, unpruned content, whether or not it was compacted away."""
        return await self._unary(
            "GetEntry", GetEntryRequest(session_id=session_id, entry_id=entry_id), Entry, timeout
        )
