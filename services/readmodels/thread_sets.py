"""The projection's threads, one set at a time, whatever holds an earlier set.

A stop tells the threads to stop and waits for them a while; one whose batch
the database holds (a PostgreSQL that hangs mid-statement) ends only once the
database lets it go, which may be never. A start after such a stop (a worker
that took the lead back) waits for them as long as a stop would, no longer:
while some are still held then, the new set is started by a thread of its
own once they end, and the start returns. Two sets never project at once:
the threads held stay told to stop until they end, and a stop in the meantime
calls the waiting start off.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import structlog

log = structlog.get_logger(__name__)

WAITS_FOR_OLD_THREADS = "read model projection waits for its threads from before to end"


class ThreadSets:
    """Starts and stops the sets of threads ``make`` answers (not yet started), which
    run until ``stopping``; ``wake`` rouses them to see it. A start put off looks every
    ``look_seconds`` whether the threads it waits for have ended."""

    def __init__(
        self,
        make: Callable[[], list[threading.Thread]],
        stopping: threading.Event,
        wake: Callable[[], None],
        look_seconds: float,
    ) -> None:
        self._make = make
        self._stopping = stopping
        self._wake = wake
        self._look_seconds = look_seconds
        self._threads: list[threading.Thread] = []
        # The start waiting for threads a stop left running; set: called off.
        self._deferred: threading.Event | None = None
        self._successor: threading.Thread | None = None
        # Held while a set starts, and while a stop calls off a start waiting.
        self._control = threading.Lock()

    @property
    def running(self) -> bool:
        """Whether a set runs now (started and not stopped)."""
        return bool(self._threads) and not self._stopping.is_set()

    def start(self, timeout: float) -> None:
        """Starts a set, unless one runs or is waiting to; threads a stop left running
        are waited for first, at most ``timeout`` seconds, and, still held then, left
        to end before the new set starts (without this call waiting for it)."""
        with self._control:
            if self.running or self._deferred is not None:
                return
            if self._threads:
                log.warning(
                    WAITS_FOR_OLD_THREADS,
                    threads=_names(self._threads),
                    timeout_seconds=timeout,
                )
                self._threads = still_running(self._threads, timeout)
            if self._threads:
                self._defer()
            else:
                self._launch()

    def _launch(self) -> None:
        self._stopping.clear()
        self._threads = self._make()
        for thread in self._threads:
            thread.start()

    def _defer(self) -> None:
        called_off = threading.Event()
        self._deferred = called_off
        held = list(self._threads)
        log.warning(
            "read model threads from before still running, held by the database; "
            "projection starts once they end, not beside them",
            threads=_names(held),
        )
        self._successor = threading.Thread(
            target=self._start_after,
            args=(held, called_off),
            name="starting-read-models",
            daemon=True,
        )
        self._successor.start()

    def _start_after(self, held: list[threading.Thread], called_off: threading.Event) -> None:
        while any(thread.is_alive() for thread in held):
            if called_off.wait(self._look_seconds):
                return
        with self._control:
            if called_off.is_set():
                return
            self._deferred = None
            self._launch()
        log.info("read model threads from before ended; projecting", threads=_names(held))

    def stop(self, timeout: float) -> list[str]:
        """Stops the set (and calls off a start waiting), waiting at most ``timeout``
        seconds for its threads to end; answers the names of those still running."""
        with self._control:
            if self._deferred is not None:
                self._deferred.set()
                self._deferred = None
            self._stopping.set()
            successor, self._successor = self._successor, None
            threads = list(self._threads)
        self._wake()
        # Called off, the successor ends at once: waited for, never reported.
        waited = threads if successor is None else [successor, *threads]
        left = still_running(waited, timeout)
        self._threads = [thread for thread in left if thread is not successor]
        return _names(self._threads)


def still_running(threads: Sequence[threading.Thread], timeout: float) -> list[threading.Thread]:
    """Waits at most ``timeout`` seconds in all for the threads to end; answers those
    still running then."""
    give_up_at = time.monotonic() + timeout
    for thread in threads:
        thread.join(timeout=max(0.0, give_up_at - time.monotonic()))
    return [thread for thread in threads if thread.is_alive()]


def _names(threads: Sequence[threading.Thread]) -> list[str]:
    return [thread.name for thread in threads]
