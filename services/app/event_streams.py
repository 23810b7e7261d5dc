"""A session's events as a stream, and followed streams that wait for new ones.

A followed stream lives on the server's event loop: between events it holds
no thread, so any number of followers leave every worker to unary calls and
health checks. Reads of the store still block, so each page is read in a
thread and handed back. The limit on followers is for memory and sockets,
not for threads.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

from domain.errors import TooManyStreams, Unavailable, VersionOutOfRange
from domain.session import SessionEvent
from services.app.sessions import SessionService

PAGE_EVENTS = 500


class EventStreams:
    def __init__(self, sessions: SessionService) -> None:
        self._sessions = sessions
        self._saved = sessions.saved_versions
        self._limit = sessions.config.max_followers
        self._followers = threading.BoundedSemaphore(self._limit)

    async def read(
        self, session_id: str, after_version: int, *, follow: bool
    ) -> AsyncIterator[SessionEvent]:
        """The session's events after a version; with follow, new ones as they land,
        until the client leaves or the server shuts down (Unavailable)."""
        # NOT_FOUND and OUT_OF_RANGE before the stream starts.
        current = (await asyncio.to_thread(self._sessions.aggregate, session_id)).version
        if after_version > current:
            raise VersionOutOfRange(
                f"after_version {after_version} is beyond the session's version {current}"
            )
        if not follow:
            async for event in self._pages(session_id, after_version, follow=False):
                yield event
            return
        if not self._followers.acquire(blocking=False):
            raise TooManyStreams(
                f"this server already serves {self._limit} followed streams "
                "(SESSIONSTORE_MAX_FOLLOWERS); retry later, on another server, or read "
                "without follow"
            )
        try:
            async for event in self._pages(session_id, after_version, follow=True):
                yield event
        finally:
            self._followers.release()

    async def _pages(
        self, session_id: str, after_version: int, *, follow: bool
    ) -> AsyncIterator[SessionEvent]:
        store = self._sessions.store
        poll_seconds = self._sessions.config.follow_poll_seconds
        while True:
            page = await asyncio.to_thread(
                store.session_events, session_id, after=after_version, limit=PAGE_EVENTS
            )
            for event in page:
                yield event
            if page:
                after_version = page[-1].originator_version
                continue
            if not follow:
                return
            if self._saved.closed:
                # Not the end of the session's events: the follower is to carry on
                # after the last it got, elsewhere (an OK would read as the end).
                raise Unavailable(
                    "the server is stopping; follow the session again after version "
                    f"{after_version}, on another server"
                )
            # Wake on this server's next save of the session; poll now and
            # then for what other servers wrote.
            await self._saved.wait_beyond(session_id, after_version, poll_seconds)
