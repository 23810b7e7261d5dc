# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The RPCs whose requests are under the .proto's "abandon, fork, import, export" heading.

One method each, for the synchronous client and for the asyncio one: it takes
the request's fields as arguments and answers the response as the dataclass of
sessionstore_client.types.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence

from sessionstore_client._methods.calls import AsyncCalls, SyncCalls
from sessionstore_client.types import (
    AbandonToolCallsRequest,
    AbandonToolCallsResponse,
    ClearSessionRequest,
    ClearSessionResponse,
    ExportSessionChunk,
    ExportSessionRequest,
    ForkSessionRequest,
    RetractEntryRequest,
    RetractEntryResponse,
    Session,
    SessionSettings,
)

__all__ = ["AsyncAbandonForkImportExportMethods", "SyncAbandonForkImportExportMethods"]


class SyncAbandonForkImportExportMethods(SyncCalls):
    """The "abandon, fork, import, export" RPCs as methods of the synchronous client."""

    def abandon_tool_calls(
        self,
        session_id: str,
        *,
        tool_call_ids: Sequence[str] | None = None,
        reason: str = "",
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> AbandonToolCallsResponse:
        """Closes open tool calls that will never be answered (all open ones when
        tool_call_ids is empty) with a synthetic error result each, so appends
        may go on. FAILED_PRECONDITION when a named call is not open.
        """
        return self._unary(
            "AbandonToolCalls",
            AbandonToolCallsRequest(
                session_id=session_id,
                tool_call_ids=list(tool_call_ids or ()),
                reason=reason,
                expected_version=expected_version,
            ),
            AbandonToolCallsResponse,
            timeout,
        )

    def retract_entry(
        self,
        session_id: str,
        *,
        entry_id: str = "",
        reason: str = "",
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> RetractEntryResponse:
        """Takes the log's latest entry out of the views (a runtime's undo of its last
        item, e.g. the Agents SDK's pop_item). Recorded as an event: the entry stays
        in the store, for audit and replay. Its tool calls close with it; the calls
        its results answered are open again. entry_id, when set, must be that
        entry. FAILED_PRECONDITION when the log holds no entry.
        """
        return self._unary(
            "RetractEntry",
            RetractEntryRequest(
                session_id=session_id,
                entry_id=entry_id,
                reason=reason,
                expected_version=expected_version,
            ),
            RetractEntryResponse,
            timeout,
        )

    def clear_session(
        self,
        session_id: str,
        *,
        reason: str = "",
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> ClearSessionResponse:
        """Takes every entry, and the summary in force, out of the views: the log
        starts empty (a runtime's clear_session). Recorded as an event: the entries
        stay in the store, for audit and replay. The system prompt stays.
        """
        return self._unary(
            "ClearSession",
            ClearSessionRequest(
                session_id=session_id, reason=reason, expected_version=expected_version
            ),
            ClearSessionResponse,
            timeout,
        )

    def fork_session(
        self,
        session_id: str,
        *,
        version: int | None = None,
        entry_id: str | None = None,
        new_session_id: str = "",
        settings: SessionSettings | None = None,
        timeout: float | None = None,
    ) -> Session:
        """A new session whose history is the parent's up to a version (or up to the
        entry entry_id): the same entries, ids, times, compactions and prunes, so
        its views equal the parent's there. The parent is not touched.
        """
        return self._unary(
            "ForkSession",
            ForkSessionRequest(
                session_id=session_id,
                version=version,
                entry_id=entry_id,
                new_session_id=new_session_id,
                settings=settings,
            ),
            Session,
            timeout,
        )

    def export_session(
        self, session_id: str, *, version: int = 0, timeout: float | None = None
    ) -> Iterator[ExportSessionChunk]:
        """The session as a pi session file (JSONL, version 3), in chunks."""
        return self._server_stream(
            "ExportSession",
            ExportSessionRequest(session_id=session_id, version=version),
            ExportSessionChunk,
            timeout,
        )


class AsyncAbandonForkImportExportMethods(AsyncCalls):
    """The "abandon, fork, import, export" RPCs as methods of the asyncio client."""

    async def abandon_tool_calls(
        self,
        session_id: str,
        *,
        tool_call_ids: Sequence[str] | None = None,
        reason: str = "",
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> AbandonToolCallsResponse:
        """Closes open tool calls that will never be answered (all open ones when
        tool_call_ids is empty) with a synthetic error result each, so appends
        may go on. FAILED_PRECONDITION when a named call is not open.
        """
        return await self._unary(
            "AbandonToolCalls",
            AbandonToolCallsRequest(
                session_id=session_id,
                tool_call_ids=list(tool_call_ids or ()),
                reason=reason,
                expected_version=expected_version,
            ),
            AbandonToolCallsResponse,
            timeout,
        )

    async def retract_entry(
        self,
        session_id: str,
        *,
        entry_id: str = "",
        reason: str = "",
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> RetractEntryResponse:
        """Takes the log's latest entry out of the views (a runtime's undo of its last
        item, e.g. the Agents SDK's pop_item). Recorded as an event: the entry stays
        in the store, for audit and replay. Its tool calls close with it; the calls
        its results answered are open again. entry_id, when set, must be that
        entry. FAILED_PRECONDITION when the log holds no entry.
        """
        return await self._unary(
            "RetractEntry",
            RetractEntryRequest(
                session_id=session_id,
                entry_id=entry_id,
                reason=reason,
                expected_version=expected_version,
            ),
            RetractEntryResponse,
            timeout,
        )

    async def clear_session(
        self,
        session_id: str,
        *,
        reason: str = "",
        expected_version: int | None = None,
        timeout: float | None = None,
    ) -> ClearSessionResponse:
        """Takes every entry, and the summary in force, out of the views: the log
        starts empty (a runtime's clear_session). Recorded as an event: the entries
        stay in the store, for audit and replay. The system prompt stays.
        """
        return await self._unary(
            "ClearSession",
            ClearSessionRequest(
                session_id=session_id, reason=reason, expected_version=expected_version
            ),
            ClearSessionResponse,
            timeout,
        )

    async def fork_session(
        self,
        session_id: str,
        *,
        version: int | None = None,
        entry_id: str | None = None,
        new_session_id: str = "",
        settings: SessionSettings | None = None,
        timeout: float | None = None,
    ) -> Session:
        """A new session whose history is the parent's up to a version (or up to the
        entry entry_id): the same entries, ids, times, compactions and prunes, so
        its views equal the parent's there. The parent is not touched.
        """
        return await self._unary(
            "ForkSession",
            ForkSessionRequest(
                session_id=session_id,
                version=version,
                entry_id=entry_id,
                new_session_id=new_session_id,
                settings=settings,
            ),
            Session,
            timeout,
        )

    def export_session(
        self, session_id: str, *, version: int = 0, timeout: float | None = None
    ) -> AsyncIterator[ExportSessionChunk]:
        """The session as a pi session file (JSONL, version 3), in chunks."""
        return self._server_stream(
            "ExportSession",
            ExportSessionRequest(session_id=session_id, version=version),
            ExportSessionChunk,
            timeout,
        )
