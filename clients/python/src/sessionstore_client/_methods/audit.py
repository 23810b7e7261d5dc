# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The RPCs whose requests are under the .proto's "audit" heading.

One method each, for the synchronous client and for the asyncio one: it takes
the request's fields as arguments and answers the response as the dataclass of
sessionstore_client.types.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sessionstore_client._methods.calls import AsyncCalls, SyncCalls
from sessionstore_client.types import (
    GetCompactionRequest,
    GetCompactionResponse,
    GetReadModelStatusRequest,
    ListCompactionsRequest,
    ListCompactionsResponse,
    ListPrunesRequest,
    ListPrunesResponse,
    PruneAction,
    ReadModelStatus,
    RecallRequest,
    RecallResponse,
)

__all__ = ["AsyncAuditMethods", "SyncAuditMethods"]


class SyncAuditMethods(SyncCalls):
    """The "audit" RPCs as methods of the synchronous client."""

    def list_compactions(
        self,
        session_id: str = "",
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        trigger: str = "",
        model: str = "",
        outcome: str = "",
        page_size: int = 0,
        page_token: str = "",
        min_position: int = 0,
        timeout: float | None = None,
    ) -> ListCompactionsResponse:
        """Audit, from the SQL read models: compactions (done and failed) of a
        session or across sessions, filtered and paged.
        """
        return self._unary(
            "ListCompactions",
            ListCompactionsRequest(
                session_id=session_id,
                since=since,
                until=until,
                trigger=trigger,
                model=model,
                outcome=outcome,
                page_size=page_size,
                page_token=page_token,
                min_position=min_position,
            ),
            ListCompactionsResponse,
            timeout,
        )

    def get_compaction(
        self,
        session_id: str,
        *,
        version: int = 0,
        min_position: int = 0,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> GetCompactionResponse:
        """One compaction's receipt, its summary and the entries it replaced."""
        return self._unary(
            "GetCompaction",
            GetCompactionRequest(
                session_id=session_id,
                version=version,
                min_position=min_position,
                page_size=page_size,
                page_token=page_token,
            ),
            GetCompactionResponse,
            timeout,
        )

    def list_prunes(
        self,
        session_id: str = "",
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        action: PruneAction = PruneAction.UNSPECIFIED,
        page_size: int = 0,
        page_token: str = "",
        min_position: int = 0,
        timeout: float | None = None,
    ) -> ListPrunesResponse:
        """Prune decisions, one per pruned entry, filtered and paged."""
        return self._unary(
            "ListPrunes",
            ListPrunesRequest(
                session_id=session_id,
                since=since,
                until=until,
                action=action,
                page_size=page_size,
                page_token=page_token,
                min_position=min_position,
            ),
            ListPrunesResponse,
            timeout,
        )

    def get_read_model_status(self, timeout: float | None = None) -> ReadModelStatus:
        """The read models' health in detail (admin): each model's position and lag
        behind the store, whether this server's projection of it is failing now
        and why, and the events it quarantined (could not apply, and went on past).
        """
        return self._unary(
            "GetReadModelStatus", GetReadModelStatusRequest(), ReadModelStatus, timeout
        )

    def recall(
        self,
        session_id: str,
        *,
        query: str = "",
        limit: int = 0,
        tenant_wide: bool = False,
        labels: Mapping[str, str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        min_position: int = 0,
        timeout: float | None = None,
    ) -> RecallResponse:
        """Long-term memory: searches a session's whole raw history (what compaction
        hid from the prompt included), or every session of the caller's tenant,
        by full text, and by meaning when memory.embedding_model is set. Each hit
        names its entry, the version that appended it and the compaction that hid it.
        """
        return self._unary(
            "Recall",
            RecallRequest(
                session_id=session_id,
                query=query,
                limit=limit,
                tenant_wide=tenant_wide,
                labels=dict(labels or ()),
                since=since,
                until=until,
                min_position=min_position,
            ),
            RecallResponse,
            timeout,
        )


class AsyncAuditMethods(AsyncCalls):
    """The "audit" RPCs as methods of the asyncio client."""

    async def list_compactions(
        self,
        session_id: str = "",
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        trigger: str = "",
        model: str = "",
        outcome: str = "",
        page_size: int = 0,
        page_token: str = "",
        min_position: int = 0,
        timeout: float | None = None,
    ) -> ListCompactionsResponse:
        """Audit, from the SQL read models: compactions (done and failed) of a
        session or across sessions, filtered and paged.
        """
        return await self._unary(
            "ListCompactions",
            ListCompactionsRequest(
                session_id=session_id,
                since=since,
                until=until,
                trigger=trigger,
                model=model,
                outcome=outcome,
                page_size=page_size,
                page_token=page_token,
                min_position=min_position,
            ),
            ListCompactionsResponse,
            timeout,
        )

    async def get_compaction(
        self,
        session_id: str,
        *,
        version: int = 0,
        min_position: int = 0,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> GetCompactionResponse:
        """One compaction's receipt, its summary and the entries it replaced."""
        return await self._unary(
            "GetCompaction",
            GetCompactionRequest(
                session_id=session_id,
                version=version,
                min_position=min_position,
                page_size=page_size,
                page_token=page_token,
            ),
            GetCompactionResponse,
            timeout,
        )

    async def list_prunes(
        self,
        session_id: str = "",
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        action: PruneAction = PruneAction.UNSPECIFIED,
        page_size: int = 0,
        page_token: str = "",
        min_position: int = 0,
        timeout: float | None = None,
    ) -> ListPrunesResponse:
        """Prune decisions, one per pruned entry, filtered and paged."""
        return await self._unary(
            "ListPrunes",
            ListPrunesRequest(
                session_id=session_id,
                since=since,
                until=until,
                action=action,
                page_size=page_size,
                page_token=page_token,
                min_position=min_position,
            ),
            ListPrunesResponse,
            timeout,
        )

    async def get_read_model_status(self, timeout: float | None = None) -> ReadModelStatus:
        """The read models' health in detail (admin): each model's position and lag
        behind the store, whether this server's projection of it is failing now
        and why, and the events it quarantined (could not apply, and went on past).
        """
        return await self._unary(
            "GetReadModelStatus", GetReadModelStatusRequest(), ReadModelStatus, timeout
        )

    async def recall(
        self,
        session_id: str,
        *,
        query: str = "",
        limit: int = 0,
        tenant_wide: bool = False,
        labels: Mapping[str, str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        min_position: int = 0,
        timeout: float | None = None,
    ) -> RecallResponse:
        """Long-term memory: searches a session's whole raw history (what compaction
        hid from the prompt included), or every session of the caller's tenant,
        by full text, and by meaning when memory.embedding_model is set. Each hit
        names its entry, the version that appended it and the compaction that hid it.
        """
        return await self._unary(
            "Recall",
            RecallRequest(
                session_id=session_id,
                query=query,
                limit=limit,
                tenant_wide=tenant_wide,
                labels=dict(labels or ()),
                since=since,
                until=until,
                min_position=min_position,
            ),
            RecallResponse,
            timeout,
        )
