# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The RPCs whose requests are under the .proto's "erasure" heading.

One method each, for the synchronous client and for the asyncio one: it takes
the request's fields as arguments and answers the response as the dataclass of
sessionstore_client.types.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessionstore_client._methods.calls import AsyncCalls, SyncCalls
from sessionstore_client.types import EraseEntriesRequest, EraseResponse, EraseSessionRequest

__all__ = ["AsyncErasureMethods", "SyncErasureMethods"]


class SyncErasureMethods(SyncCalls):
    """The "erasure" RPCs as methods of the synchronous client."""

    def erase_session(
        self,
        session_id: str,
        *,
        reason: str = "",
        erased_by: str = "",
        timeout: float | None = None,
    ) -> EraseResponse:
        """Erases the whole session's content (crypto-shredding: its keys are deleted),
        keeping the fact, who and when; it takes no more writes.
        """
        return self._unary(
            "EraseSession",
            EraseSessionRequest(session_id=session_id, reason=reason, erased_by=erased_by),
            EraseResponse,
            timeout,
        )

    def erase_entries(
        self,
        session_id: str,
        *,
        entry_ids: Sequence[str] | None = None,
        reason: str = "",
        erased_by: str = "",
        timeout: float | None = None,
    ) -> EraseResponse:
        """Erases entries' content, and the summaries of compactions that covered them
        (tainted until Compact regenerates them).
        """
        return self._unary(
            "EraseEntries",
            EraseEntriesRequest(
                session_id=session_id,
                entry_ids=list(entry_ids or ()),
                reason=reason,
                erased_by=erased_by,
            ),
            EraseResponse,
            timeout,
        )


class AsyncErasureMethods(AsyncCalls):
    """The "erasure" RPCs as methods of the asyncio client."""

    async def erase_session(
        self,
        session_id: str,
        *,
        reason: str = "",
        erased_by: str = "",
        timeout: float | None = None,
    ) -> EraseResponse:
        """Erases the whole session's content (crypto-shredding: its keys are deleted),
        keeping the fact, who and when; it takes no more writes.
        """
        return await self._unary(
            "EraseSession",
            EraseSessionRequest(session_id=session_id, reason=reason, erased_by=erased_by),
            EraseResponse,
            timeout,
        )

    async def erase_entries(
        self,
        session_id: str,
        *,
        entry_ids: Sequence[str] | None = None,
        reason: str = "",
        erased_by: str = "",
        timeout: float | None = None,
    ) -> EraseResponse:
        """Erases entries' content, and the summaries of compactions that covered them
        (tainted until Compact regenerates them).
        """
        return await self._unary(
            "EraseEntries",
            EraseEntriesRequest(
                session_id=session_id,
                entry_ids=list(entry_ids or ()),
                reason=reason,
                erased_by=erased_by,
            ),
            EraseResponse,
            timeout,
        )
