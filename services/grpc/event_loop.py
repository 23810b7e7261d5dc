"""The asyncio loop the gRPC server runs on, in a thread of its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
# How long the tasks a stopped loop left may take to end once cancelled.
CLOSE_WAIT_SECONDS = 5.0


def _new_event_loop() -> asyncio.AbstractEventLoop:
    # uvloop where it exists (not on Windows): every call passes through the
    # loop twice, and its loop does that work in C, a twentieth of a turn.
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class EventLoopThread:
    """The asyncio loop the gRPC server runs on, in a thread of its own.

    Calls run in the worker threads of the server's pool; the loop only moves
    bytes, and serves what waits without working: followed event streams and
    health checks. Keeping it off the main thread leaves that to signals.
    """

    def __init__(self) -> None:
        self.loop = _new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="grpc-loop", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Runs a coroutine on the loop and waits for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        """Stops the loop and ends what it left, as ``asyncio.run`` ends its own: tasks
        still pending are cancelled and let finish, streams cut short closed, and
        reads handed to threads (``asyncio.to_thread``: a followed stream's next
        page, the database monitor's probe) waited for. All before the caller
        closes the store they read: SQLite crashes the process when a connection
        closes under a query."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.wait(pending, timeout=CLOSE_WAIT_SECONDS))
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.run_until_complete(self.loop.shutdown_default_executor())
        self.loop.close()
