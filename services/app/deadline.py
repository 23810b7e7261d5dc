"""The deadline of the call being served, for waits and loops that must not outlive it.

The gRPC layer sets it for the thread serving a call (``within``); the use
cases and adapters ask how long is left before they wait for a lock, a
connection or a retry. Work done outside a call has no deadline.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from domain.errors import DeadlineExceeded

_deadline: ContextVar[float | None] = ContextVar("sessionstore_call_deadline", default=None)


@contextmanager
def within(deadline: float | None) -> Iterator[None]:
    """Runs the block with a deadline on the time.monotonic() clock (None: no deadline)."""
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


def remaining() -> float | None:
    """Seconds left before the call's deadline (never negative), or None without one."""
    deadline = _deadline.get()
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def bounded(seconds: float) -> float:
    """``seconds``, or less if the call's deadline comes sooner."""
    left = remaining()
    return seconds if left is None else min(seconds, left)


def check(doing: str) -> None:
    """Raises DeadlineExceeded if the call's deadline has passed."""
    if remaining() == 0.0:
        raise DeadlineExceeded(f"the call's deadline passed while {doing}; nothing more was done")
