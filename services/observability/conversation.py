"""The session a piece of work is for, so that spans deep inside it can name it.

Set per call by the gRPC server's observing layer and per compaction by the engine's
tracing; read by the summariser's spans (``gen_ai.conversation.id``), which
are made far from any request.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_CONVERSATION: ContextVar[str] = ContextVar("conversation", default="")


@contextmanager
def conversation(session_id: str) -> Iterator[None]:
    if not session_id:
        yield
        return
    token = _CONVERSATION.set(session_id)
    try:
        yield
    finally:
        _CONVERSATION.reset(token)


def current_conversation() -> str:
    return _CONVERSATION.get()
