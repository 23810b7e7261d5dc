"""A LangGraph thread as the session store keeps it, and read back from its events.

Every checkpoint and every batch of pending writes is one entry of the thread's
session, a note of the runtime's (role custom): its small text says what it is,
its metadata holds it, serialised (sealed with the entry, so an erasure takes
it), with ``checkpoint_ns`` and the checkpoint's id in its keys. The messages of
the graph's ``messages`` channel are also entries, as the conversation they are
(user, assistant with its tool calls, tool results): those the store manages the
context of, and the prompt view shows.

``Thread`` folds the session's events into what the saver answers from: the
checkpoints by namespace, their writes, the message ids the conversation holds.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import WRITES_IDX_MAP
from langgraph.checkpoint.serde.base import SerializerProtocol

from sessionstore_client.types import (
    EntriesAppended,
    Entry,
    EntryRetracted,
    Erasure,
    Role,
    SessionCleared,
    SessionEvent,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)

CHECKPOINT = "langgraph.checkpoint"
WRITES = "langgraph.writes"
KIND, NS, ID, PARENT = "langgraph.kind", "langgraph.ns", "langgraph.id", "langgraph.parent"
VALUE, META, RUN = "langgraph.value", "langgraph.metadata", "langgraph.run_id"
TASK, TASK_PATH = "langgraph.task_id", "langgraph.task_path"
MESSAGE_ID = "langgraph.message_id"


@dataclass
class Saved:
    """A checkpoint as stored: serialised, with its entry."""

    checkpoint: tuple[str, bytes]
    metadata: dict[str, Any]
    parent_id: str | None
    entry_id: str


@dataclass
class Write:
    task_id: str
    channel: str
    value: tuple[str, bytes]
    task_path: str
    entry_id: str


@dataclass
class Thread:
    """One thread folded from its session's events, up to ``version``."""

    version: int = 0
    # namespace -> checkpoint id -> checkpoint
    checkpoints: dict[str, dict[str, Saved]] = field(default_factory=dict)
    # (namespace, checkpoint id) -> (task id, index) -> write
    writes: dict[tuple[str, str], dict[tuple[str, int], Write]] = field(default_factory=dict)
    # Ids of the messages the conversation holds, oldest first.
    messages: list[str] = field(default_factory=list)

    def apply(self, event: SessionEvent, serde: SerializerProtocol) -> None:
        if event.version <= self.version:
            return  # read already
        self.version = event.version
        match event.event:
            case EntriesAppended(entries=entries):
                for entry in entries:
                    self._apply_entry(entry, serde)
            case EntryRetracted(entry_id=entry_id):
                self._forget({entry_id})
            case SessionCleared():
                self.messages = []
            case Erasure(whole_session=True):
                self.checkpoints, self.writes, self.messages = {}, {}, []
            case Erasure(entry_ids=entry_ids):
                self._forget(set(entry_ids))

    def _apply_entry(self, entry: Entry, serde: SerializerProtocol) -> None:
        data = entry.metadata
        if MESSAGE_ID in data:
            self.messages.append(data[MESSAGE_ID])
        elif data.get(KIND) == CHECKPOINT:
            metadata = serde.loads_typed(_typed(data[META]))
            self.checkpoints.setdefault(data[NS], {})[data[ID]] = Saved(
                _typed(data[VALUE]), metadata, data.get(PARENT) or None, entry.id
            )
        elif data.get(KIND) == WRITES:
            key = (data[NS], data[ID])
            pending = self.writes.setdefault(key, {})
            for index, channel, value in json.loads(data[VALUE]):
                slot = (data[TASK], WRITES_IDX_MAP.get(channel, index))
                if slot[1] >= 0 and slot in pending:
                    continue  # a task's regular writes are written once
                pending[slot] = Write(
                    data[TASK], channel, _typed(value), data.get(TASK_PATH, ""), entry.id
                )

    def _forget(self, entry_ids: set[str]) -> None:
        for saved in self.checkpoints.values():
            for checkpoint_id in [c for c, s in saved.items() if s.entry_id in entry_ids]:
                del saved[checkpoint_id]
        for pending in self.writes.values():
            for slot in [k for k, w in pending.items() if w.entry_id in entry_ids]:
                del pending[slot]

    def entries_of(self, namespace: str, checkpoint_id: str) -> list[str]:
        """The entries holding a checkpoint and its writes."""
        saved = self.checkpoints.get(namespace, {}).get(checkpoint_id)
        writes = self.writes.get((namespace, checkpoint_id), {}).values()
        return ([saved.entry_id] if saved else []) + [w.entry_id for w in writes]


def checkpoint_entry(
    namespace: str,
    checkpoint_id: str,
    parent_id: str | None,
    checkpoint: tuple[str, bytes],
    metadata: tuple[str, bytes],
    run_id: str,
) -> Entry:
    return _note(
        CHECKPOINT,
        f"checkpoint {checkpoint_id} of namespace {namespace!r}",
        {
            NS: namespace,
            ID: checkpoint_id,
            PARENT: parent_id or "",
            VALUE: _text(checkpoint),
            META: _text(metadata),
            RUN: run_id,
        },
    )


def writes_entry(
    namespace: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    writes: Sequence[tuple[int, str, tuple[str, bytes]]],
) -> Entry:
    values = [[index, channel, _text(value)] for index, channel, value in writes]
    return _note(
        WRITES,
        f"{len(writes)} writes of task {task_id} to checkpoint {checkpoint_id}",
        {
            NS: namespace,
            ID: checkpoint_id,
            TASK: task_id,
            TASK_PATH: task_path,
            VALUE: json.dumps(values),
        },
    )


def message_entry(message: Any) -> Entry:
    """A LangChain message as a conversation entry (its id in the metadata)."""
    kind = getattr(message, "type", "")
    text = _message_text(message.content)
    content: list[Any] = [TextBlock(text)] if text.strip() else []
    if kind == "ai":
        content += [
            ToolCallBlock(str(call["id"]), str(call["name"]), json.dumps(call.get("args") or {}))
            for call in getattr(message, "tool_calls", ())
        ]
        role = Role.ASSISTANT
    elif kind == "tool":
        content, role = [ToolResultBlock(str(message.tool_call_id), text)], Role.TOOL
    else:
        role = {"human": Role.USER, "system": Role.SYSTEM}.get(kind, Role.USER)
    # The store wants some text; the checkpoint keeps the message as it is.
    content = content or [TextBlock("(empty message)")]
    return Entry(role=role, content=content, metadata={MESSAGE_ID: message.id})


def _note(kind: str, text: str, data: Mapping[str, str]) -> Entry:
    return Entry(
        role=Role.CUSTOM, custom_type=kind, content=[TextBlock(text)], metadata={KIND: kind, **data}
    )


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(
        p if isinstance(p, str) else str(p.get("text", "")) for p in parts if p is not None
    )


def _text(typed: tuple[str, bytes]) -> str:
    kind, data = typed
    return f"{kind}:{base64.b64encode(data).decode('ascii')}"


def _typed(text: str) -> tuple[str, bytes]:
    kind, _, data = text.rpartition(":")
    return kind, base64.b64decode(data)
