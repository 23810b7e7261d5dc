"""Compactions run here: in the background, one at a time per session.

The summariser can take minutes, so it never runs under a session's write
lock: appends go on while it works, and the result is recorded afterwards
(still valid, since entries appended meanwhile lie after the cut). Per
session there is at most one compaction running; a caller either joins it
(a threshold crossing, an overflow report: any compaction will do) or queues
behind it (a manual request with its own instructions). Jobs of different
sessions run in parallel on a small pool.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class CompactionRunner:
    def __init__(self, workers: int = 4) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="compaction")
        self._lock = threading.Lock()
        # Session id -> the newest job submitted for it (running or queued).
        self._latest: dict[str, Future[Any]] = {}
        # Held while a session's job runs, so queued jobs run one after another.
        self._session_locks: dict[str, threading.Lock] = {}

    def run(self, session_id: str, job: Callable[[], Any], *, join: bool) -> Future[Any]:
        """Starts ``job`` for the session, or, with ``join``, answers the one not yet done."""
        with self._lock:
            latest = self._latest.get(session_id)
            if join and latest is not None and not latest.done():
                return latest
            session_lock = self._session_locks.setdefault(session_id, threading.Lock())

            def one_at_a_time() -> Any:
                with session_lock:
                    return job()

            future = self._pool.submit(one_at_a_time)
            self._latest[session_id] = future
        # Outside the lock: a job already done runs the callback right here.
        future.add_done_callback(lambda done: self._forget(session_id, done))
        return future

    def running(self, session_id: str) -> Future[Any] | None:
        with self._lock:
            latest = self._latest.get(session_id)
            return latest if latest is not None and not latest.done() else None

    def _forget(self, session_id: str, done: Future[Any]) -> None:
        with self._lock:
            if self._latest.get(session_id) is done:
                del self._latest[session_id]
                self._session_locks.pop(session_id, None)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
