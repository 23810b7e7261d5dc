"""Waiting for what a server does in the background: a compaction landing, a model
asked, a database back or a monitor noticing it gone."""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_SECONDS = 0.05


def eventually(check: Callable[[], object], within: float = 30) -> bool:
    """Whether ``check`` holds within ``within`` seconds, asked every 50 ms.

    Callers assert on the answer, so that a failure shows the check it waited for."""
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_SECONDS)
    return True
