# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The RPCs whose requests are before the .proto's first heading.

One method each, for the synchronous client and for the asyncio one: it takes
the request's fields as arguments and answers the response as the dataclass of
sessionstore_client.types.
"""

from __future__ import annotations

from datetime import datetime

from sessionstore_client._methods.calls import AsyncCalls, SyncCalls
from sessionstore_client.types import AuditViewRequest, ViewAudit

__all__ = ["AsyncAuditViewMethods", "SyncAuditViewMethods"]


class SyncAuditViewMethods(SyncCalls):
    """The "audit view" RPCs as methods of the synchronous client."""

    def audit_view(
        self,
        session_id: str,
        *,
        version: int | None = None,
        time: datetime | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> ViewAudit:
        """The raw history against the views at a version: every entry shown,
        summarised, pinned, pruned or guarded (and why); and, for assistant turns
        that carry the prompt_ref of the view they answered, whether replaying
        that view reproduces its hash. Large audits come in pages
        (AuditViewRequest.page_size, page_token).
        """
        return self._unary(
            "AuditView",
            AuditViewRequest(
                session_id=session_id,
                version=version,
                time=time,
                page_size=page_size,
                page_token=page_token,
            ),
            ViewAudit,
            timeout,
        )


class AsyncAuditViewMethods(AsyncCalls):
    """The "audit view" RPCs as methods of the asyncio client."""

    async def audit_view(
        self,
        session_id: str,
        *,
        version: int | None = None,
        time: datetime | None = None,
        page_size: int = 0,
        page_token: str = "",
        timeout: float | None = None,
    ) -> ViewAudit:
        """The raw history against the views at a version: every entry shown,
        summarised, pinned, pruned or guarded (and why); and, for assistant turns
        that carry the prompt_ref of the view they answered, whether replaying
        that view reproduces its hash. Large audits come in pages
        (AuditViewRequest.page_size, page_token).
        """
        return await self._unary(
            "AuditView",
            AuditViewRequest(
                session_id=session_id,
                version=version,
                time=time,
                page_size=page_size,
                page_token=page_token,
            ),
            ViewAudit,
            timeout,
        )
