"""The NOTIFY that wakes the read models' listeners, sent after saves commit.

A NOTIFY inside a save's transaction takes a database-wide lock from the start
of its commit to the end (PostgreSQL keeps the notification queue in commit
order that way), so the commits of saves running side by side, and their
flushes of the WAL, would queue one behind another again. Sent from a thread
of its own once saves have committed, one NOTIFY answers every save made since
the last (a listener reads all that is new, not one event per wake-up), and
no save waits for it. NOTIFYs are paced (PACE_SECONDS): one per save was a
round trip, and a wake-up of this thread, beside the next request of a client
appending turn after turn. A NOTIFY lost to a failure costs a listener its
poll interval (``SESSIONSTORE_PROJECTION_POLL_SECONDS``), never an event.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from psycopg import sql

# How often an idle thread looks whether its database was closed.
_IDLE_CHECK_SECONDS = 5.0
# After a NOTIFY the thread waits this long before the next: saves meanwhile
# share the next one. Listeners read at most every 0.1 s (the projection's
# pause, services.readmodels.runner), so they miss nothing by it, and the first
# save after a quiet spell is still told at once.
PACE_SECONDS = 0.02


class SaveWakeups:
    """Sends ``NOTIFY channel`` soon after ``saved()``, one at a time, PACE_SECONDS
    apart at least."""

    def __init__(self, datastore: Any, channel: str) -> None:
        self._datastore = datastore
        self._statement = sql.SQL("NOTIFY {}").format(sql.Identifier(channel))
        self._due = threading.Event()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()

    def saved(self) -> None:
        """A save committed: listeners are told soon."""
        self._due.set()
        if self._thread is None:
            with self._starting:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="store-notify", daemon=True
                    )
                    self._thread.start()

    def _run(self) -> None:
        while not self._datastore.pool.closed:
            if not self._due.wait(_IDLE_CHECK_SECONDS):
                continue
            self._due.clear()
            try:
                with self._datastore.get_connection() as conn:
                    conn.execute(self._statement)
            except Exception:
                continue
            time.sleep(PACE_SECONDS)
