# Generated from proto/sessionstore/v1/session_store.proto by clients/python/tools/generate.py.
# DO NOT EDIT: `make proto` writes it.

"""The RPCs whose requests are under the .proto's "events" heading.

One method each, for the synchronous client and for the asyncio one: it takes
the request's fields as arguments and answers the response as the dataclass of
sessionstore_client.types.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from sessionstore_client._methods.calls import AsyncCalls, SyncCalls
from sessionstore_client.types import ReadEventsRequest, SessionEvent

__all__ = ["AsyncEventsMethods", "SyncEventsMethods"]


class SyncEventsMethods(SyncCalls):
    """The "events" RPCs as methods of the synchronous client."""

    def read_events(
        self,
        session_id: str,
        *,
        after_version: int = 0,
        follow: bool = False,
        timeout: float | None = None,
    ) -> Iterator[SessionEvent]:
        """The session's events from a version on; with follow, keeps streaming new ones.
        A followed stream has no end of its own: a server that stops ends it
        UNAVAILABLE, its message naming the version to follow on from (the last
        one sent); read again with that after_version, on another server, and no
        event is missed or given twice. The Python client does so by itself.
        """
        return self._server_stream(
            "ReadEvents",
            ReadEventsRequest(session_id=session_id, after_version=after_version, follow=follow),
            SessionEvent,
            timeout,
        )


class AsyncEventsMethods(AsyncCalls):
    """The "events" RPCs as methods of the asyncio client."""

    def read_events(
        self,
        session_id: str,
        *,
        after_version: int = 0,
        follow: bool = False,
        timeout: float | None = None,
    ) -> AsyncIterator[SessionEvent]:
        """The session's events from a version on; with follow, keeps streaming new ones.
        A followed stream has no end of its own: a server that stops ends it
        UNAVAILABLE, its message naming the version to follow on from (the last
        one sent); read again with that after_version, on another server, and no
        event is missed or given twice. The Python client does so by itself.
        """
        return self._server_stream(
            "ReadEvents",
            ReadEventsRequest(session_id=session_id, after_version=after_version, follow=follow),
            SessionEvent,
            timeout,
        )
