"""The latest version this server saved of each session, and who waits for the next.

Followers of a session's events wait here, on the server's event loop, without
holding a thread: a save, from whatever thread made it, wakes the waiters of
that session through their loop. A session that fell out of the record, or a
write made by another server, is found by the follower's poll instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

from services.app.cache import WeightedLRU, per_session_entry

_Waiter = tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]


class SavedVersions:
    def __init__(self, budget_bytes: int) -> None:
        self._lock = threading.Lock()
        self._latest: WeightedLRU[str, int] = WeightedLRU(budget_bytes, per_session_entry)
        self._waiting: dict[str, list[_Waiter]] = {}
        self.closed = False

    def caches(self) -> dict[str, WeightedLRU[str, int]]:
        """The record by name, for the metrics."""
        return {"saved_versions": self._latest}

    def saved(self, session_id: str, version: int) -> None:
        """Records a save (any thread) and wakes those waiting for the session."""
        with self._lock:
            self._latest.put(session_id, version)
            waiters = self._waiting.pop(session_id, [])
        _wake(waiters)

    async def wait_beyond(self, session_id: str, version: int, timeout: float) -> None:
        """Returns once a version past ``version`` was saved here, at the timeout,
        or when the record closes, whichever comes first."""
        loop = asyncio.get_running_loop()
        waiter = (loop, loop.create_future())
        with self._lock:
            if self.closed or (self._latest.get(session_id) or 0) > version:
                return
            self._waiting.setdefault(session_id, []).append(waiter)
        try:
            await asyncio.wait_for(waiter[1], timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                others = self._waiting.get(session_id)
                if others and waiter in others:
                    others.remove(waiter)
                    if not others:
                        del self._waiting[session_id]

    def close(self) -> None:
        """Wakes every waiter for good: the server is shutting down."""
        with self._lock:
            self.closed = True
            waiters = [w for each in self._waiting.values() for w in each]
            self._waiting.clear()
        _wake(waiters)


def _wake(waiters: list[_Waiter]) -> None:
    for loop, future in waiters:
        # A closed loop has nobody waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
