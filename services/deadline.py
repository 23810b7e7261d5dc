"""The deadline of the call being served, and its cut: for waits and loops that must
not outlive the call.

The gRPC layer sets both for the code serving a call (``within``): the
deadline the client gave, and a ``Cut`` it pulls when the client cancels or
the server stops. The use cases and adapters ask how long is left before they
wait for a lock, a connection, a retry or the read models, and end their wait
when it is cut. Work done outside a call has neither.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from domain.errors import DeadlineExceeded, Unavailable


class Cut:
    """Pulled when the call's waits must end: the client went away, or the server stops."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def __call__(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleeps ``seconds`` or until cut; answers whether it was cut."""
        return self._event.wait(seconds)


T = TypeVar("T")
# How often a wait for another thread's work looks whether the call was cut.
_POLL_SECONDS = 0.1

_deadline: ContextVar[float | None] = ContextVar("sessionstore_call_deadline", default=None)
_cut: ContextVar[Cut | None] = ContextVar("sessionstore_call_cut", default=None)


@contextmanager
def within(deadline: float | None, cut: Cut | None = None) -> Iterator[None]:
    """Runs the block with a deadline on the time.monotonic() clock (None: no
    deadline), and the call's cut if it has one."""
    token = _deadline.set(deadline)
    cut_token = _cut.set(cut)
    try:
        yield
    finally:
        _cut.reset(cut_token)
        _deadline.reset(token)


def remaining() -> float | None:
    """Seconds left before the call's deadline (never negative), or None without one."""
    deadline = _deadline.get()
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def bounded(seconds: float) -> float:
    """``seconds``, or less if the call's deadline comes sooner."""
    left = remaining()
    return seconds if left is None else min(seconds, left)


def check(doing: str, outcome: str = "nothing more was done") -> None:
    """Raises Unavailable if the call was cut, DeadlineExceeded if its deadline passed;
    their messages say what the call was ``doing`` and, as ``outcome``, what that
    left behind."""
    cut = _cut.get()
    if cut is not None and cut.is_set():
        raise Unavailable(f"{cut.reason} while {doing}; {outcome}: retry")
    if remaining() == 0.0:
        raise DeadlineExceeded(f"the call's deadline passed while {doing}; {outcome}")


def pause(seconds: float) -> None:
    """Sleeps ``seconds`` (less if the deadline comes sooner), waking at once when cut."""
    seconds = bounded(seconds)
    cut = _cut.get()
    if cut is None:
        time.sleep(seconds)
    else:
        cut.wait(seconds)


def result(future: Future[T], doing: str) -> T:
    """The future's result, waited for no longer than the call's deadline and ended
    when the call is cut (raising as ``check`` does). The work itself goes on unless
    it, too, heeds the deadline."""
    while True:
        check(doing)
        try:
            return future.result(timeout=bounded(_POLL_SECONDS))
        except FutureTimeout:
            continue
