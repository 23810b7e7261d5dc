"""What a write or a delete picks out of a thread as read so far: the messages a
checkpoint adds to the conversation, and the entries ``delete_for_runs`` and
``prune`` erase."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import Checkpoint

from sessionstore_client.langgraph._threads import Thread

MESSAGES = "messages"


def root_messages(namespace: str, checkpoint: Checkpoint) -> list[Any] | None:
    """The root graph's messages, when it has a ``messages`` channel of them."""
    values = checkpoint["channel_values"].get(MESSAGES)
    if namespace or not isinstance(values, list):
        return None
    return [m for m in values if getattr(m, "id", None) and hasattr(m, "content")]


def unsaid(thread: Thread, messages: list[Any]) -> tuple[list[Any], bool]:
    """The messages the conversation lacks, and whether it must start over first (the
    state went back to an earlier checkpoint, or dropped messages)."""
    ids = [m.id for m in messages]
    held = thread.messages
    if ids[: len(held)] == held:
        return messages[len(held) :], False
    return messages, True


def of_runs(thread: Thread, run_ids: set[str]) -> list[str]:
    return [
        entry
        for namespace, saved in thread.checkpoints.items()
        for checkpoint_id, found in saved.items()
        if found.metadata.get("run_id") in run_ids
        for entry in thread.entries_of(namespace, checkpoint_id)
    ]


def all_but_latest(thread: Thread) -> list[str]:
    return [
        entry
        for namespace, saved in thread.checkpoints.items()
        for checkpoint_id in sorted(saved)[:-1]
        for entry in thread.entries_of(namespace, checkpoint_id)
    ]
