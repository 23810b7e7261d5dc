"""Compactions run here: in the background, one at a time per session.

The summariser can take minutes, so it never runs under a session's write
lock: appends go on while it works, and the result is recorded afterwards
(still valid, since entries appended meanwhile lie after the cut). Per
session there is at most one compaction running; a caller either joins it
(a threshold crossing, an overflow report: any compaction will do) or queues
behind it (a manual request with its own instructions). Jobs of different
sessions run in parallel on a small pool.

A session has lanes: the summarising compactions run in one, the steps that
make a view fit (seconds faster than a model) in another, so a view need not
queue behind a model's minutes. The jobs of one lane run one at a time.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class CompactionRunner:
    def __init__(self, workers: int = 4) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="compaction")
        self._lock = threading.Lock()
        # (Session id, lane) -> the newest job submitted for it (running or queued).
        self._latest: dict[tuple[str, str], Future[Any]] = {}
        # Held while a lane's job runs, so queued jobs run one after another.
        self._lane_locks: dict[tuple[str, str], threading.Lock] = {}
        # Jobs no other caller may join: they end with the call that started them.
        self._private: set[Future[Any]] = set()

    def run(
        self,
        session_id: str,
        job: Callable[[], Any],
        *,
        join: bool,
        lane: str = "compaction",
        joinable: bool = True,
    ) -> Future[Any]:
        """Starts ``job`` in the session's ``lane``, or, with ``join``, answers the one
        not yet done there. A job started not ``joinable`` (one that stops at its
        caller's deadline) is queued behind, never joined: its end is no one else's."""
        key = (session_id, lane)
        with self._lock:
            latest = self._latest.get(key)
            if join and latest is not None and not latest.done() and latest not in self._private:
                return latest
            lane_lock = self._lane_locks.setdefault(key, threading.Lock())

            def one_at_a_time() -> Any:
                with lane_lock:
                    return job()

            # In the context of who started it: its trace, its log context.
            future = self._pool.submit(contextvars.copy_context().run, one_at_a_time)
            self._latest[key] = future
            if not joinable:
                self._private.add(future)
        # Outside the lock: a job already done runs the callback right here.
        future.add_done_callback(lambda done: self._forget(key, done))
        return future

    def running(self, session_id: str, lane: str = "compaction") -> Future[Any] | None:
        with self._lock:
            latest = self._latest.get((session_id, lane))
            return latest if latest is not None and not latest.done() else None

    def _forget(self, key: tuple[str, str], done: Future[Any]) -> None:
        with self._lock:
            self._private.discard(done)
            if self._latest.get(key) is done:
                del self._latest[key]
                self._lane_locks.pop(key, None)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
