# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The RPCs whose requests are under the .proto's "sessions" heading.

One method each, for the synchronous client and for the asyncio one: it takes
the request's fields as arguments and answers the response as the dataclass of
sessionstore_client.types.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from sessionstore_client._methods.calls import AsyncCalls, SyncCalls
from sessionstore_client.types import (
    CreateSessionRequest,
    GetSessionRequest,
    ListSessionsRequest,
    ListSessionsResponse,
    Session,
    SessionSettings,
    UpdateSettingsRequest,
)

__all__ = ["AsyncSessionsMethods", "SyncSessionsMethods"]


class SyncSessionsMethods(SyncCalls):
    """The "sessions" RPCs as methods of the synchronous client."""

    def create_session(
        self,
        session_id: str = "",
        *,
        settings: SessionSettings | None = None,
        timeout: float | None = None,
    ) -> Session:
        """Starts a new session. ALREADY_EXISTS if the given id is taken."""
        return self._unary(
            "CreateSession",
            CreateSessionRequest(session_id=session_id, settings=settings),
            Session,
            timeout,
        )

    def get_session(self, session_id: str, *, timeout: float | None = None) -> Session:
        """The session's current settings, version and running totals."""
        return self._unary("GetSession", GetSessionRequest(session_id=session_id), Session, timeout)

    def list_sessions(
        self,
        *,
        page_size: int = 0,
        page_token: str = "",
        labels: Mapping[str, str] | None = None,
        model: str = "",
        title_contains: str = "",
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        min_position: int = 0,
        order_by: str = "",
        timeout: float | None = None,
    ) -> ListSessionsResponse:
        """Sessions in creation order, a page at a time."""
        return self._unary(
            "ListSessions",
            ListSessionsRequest(
                page_size=page_size,
                page_token=page_token,
                labels=dict(labels or ()),
                model=model,
                title_contains=title_contains,
                updated_after=updated_after,
                updated_before=updated_before,
                min_position=min_position,
                order_by=order_by,
            ),
            ListSessionsResponse,
            timeout,
        )

    def update_settings(
        self,
        session_id: str,
        *,
        settings: SessionSettings | None = None,
        expected_version: int | None = None,
        remove_labels: Sequence[str] | None = None,
        forget_learned_limits: bool = False,
        timeout: float | None = None,
    ) -> Session:
        """Changes some settings; fields left unset keep their value. It may also have
        the session forget what providers' overflow errors taught (forget_learned_limits).
        """
        return self._unary(
            "UpdateSettings",
            UpdateSettingsRequest(
                session_id=session_id,
                settings=settings,
                expected_version=expected_version,
                remove_labels=list(remove_labels or ()),
                forget_learned_limits=forget_learned_limits,
            ),
            Session,
            timeout,
        )


class AsyncSessionsMethods(AsyncCalls):
    """The "sessions" RPCs as methods of the asyncio client."""

    async def create_session(
        self,
        session_id: str = "",
        *,
        settings: SessionSettings | None = None,
        timeout: float | None = None,
    ) -> Session:
        """Starts a new session. ALREADY_EXISTS if the given id is taken."""
        return await self._unary(
            "CreateSession",
            CreateSessionRequest(session_id=session_id, settings=settings),
            Session,
            timeout,
        )

    async def get_session(self, session_id: str, *, timeout: float | None = None) -> Session:
        """The session's current settings, version and running totals."""
        return await self._unary(
            "GetSession", GetSessionRequest(session_id=session_id), Session, timeout
        )

    async def list_sessions(
        self,
        *,
        page_size: int = 0,
        page_token: str = "",
        labels: Mapping[str, str] | None = None,
        model: str = "",
        title_contains: str = "",
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        min_position: int = 0,
        order_by: str = "",
        timeout: float | None = None,
    ) -> ListSessionsResponse:
        """Sessions in creation order, a page at a time."""
        return await self._unary(
            "ListSessions",
            ListSessionsRequest(
                page_size=page_size,
                page_token=page_token,
                labels=dict(labels or ()),
                model=model,
                title_contains=title_contains,
                updated_after=updated_after,
                updated_before=updated_before,
                min_position=min_position,
                order_by=order_by,
            ),
            ListSessionsResponse,
            timeout,
        )

    async def update_settings(
        self,
        session_id: str,
        *,
        settings: SessionSettings | None = None,
        expected_version: int | None = None,
        remove_labels: Sequence[str] | None = None,
        forget_learned_limits: bool = False,
        timeout: float | None = None,
    ) -> Session:
        """Changes some settings; fields left unset keep their value. It may also have
        the session forget what providers' overflow errors taught (forget_learned_limits).
        """
        return await self._unary(
            "UpdateSettings",
            UpdateSettingsRequest(
                session_id=session_id,
                settings=settings,
                expected_version=expected_version,
                remove_labels=list(remove_labels or ()),
                forget_learned_limits=forget_learned_limits,
            ),
            Session,
            timeout,
        )
