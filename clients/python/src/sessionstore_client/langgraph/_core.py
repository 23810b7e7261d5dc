"""What the sync and the async saver share: the threads read so far, and the
conversions between LangGraph's checkpoints and writes and the store's entries.

``SaverCore`` holds no calls to the store: ``SyncSaver`` and ``AsyncSaver`` (its
subclasses) make them, each with its client, and fold what they read in here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any, TypeAlias, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)

from sessionstore_client.aio import AsyncClient
from sessionstore_client.client import Client
from sessionstore_client.errors import AlreadyExists, FailedPrecondition, InvalidArgument
from sessionstore_client.langgraph._threads import Thread, checkpoint_entry, writes_entry
from sessionstore_client.types import Entry, SessionSettings

# Sessions of LangGraph threads carry this label, so the saver finds them all.
THREAD_LABEL = ("langgraph", "thread")
# What the store may make of a checkpoint's messages: refused, the checkpoint is saved
# by itself before the refusal is raised, so the graph's state is never lost with them.
REFUSALS = (AlreadyExists, FailedPrecondition, InvalidArgument)
# The saver's method `list` hides the builtin in its annotations: these name the types.
Entries: TypeAlias = list[Entry]
Ids: TypeAlias = list[str]
Messages: TypeAlias = list[dict[str, Any]]
Events: TypeAlias = list[Any]


class SaverCore(BaseCheckpointSaver[str]):
    """The saver's clients, settings and threads, and what it answers from them."""

    def __init__(self, client: Client | AsyncClient | None = None, **settings: Any) -> None:
        super().__init__()
        connection = (client or Client()).connection
        tls = connection.tls or False
        self.client = (
            client
            if isinstance(client, Client)
            else Client(connection.address, token=connection.token, tls=tls)
        )
        self.aclient = (
            client
            if isinstance(client, AsyncClient)
            else AsyncClient(connection.address, token=connection.token, tls=tls)
        )
        labels = {**settings.pop("labels", {}), THREAD_LABEL[0]: THREAD_LABEL[1]}
        self.settings = SessionSettings(labels=labels, **settings)
        self._threads: dict[str, Thread] = {}
        self._lock = threading.Lock()

    def _thread(self, thread_id: str) -> Thread:
        with self._lock:
            return self._threads.setdefault(thread_id, Thread())

    def _applied(self, thread_id: str, thread: Thread, events: Events) -> Thread:
        with self._lock:
            for event in events:
                thread.apply(event, self.serde)
        return thread

    def _forget(self, thread_id: str) -> None:
        with self._lock:
            self._threads.pop(thread_id, None)

    def _checkpoint_entry(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> Entry:
        _, namespace = thread_and_namespace(config)
        versions = checkpoint["channel_versions"]
        values = {k: v for k, v in checkpoint["channel_values"].items() if k in versions}
        stored = get_checkpoint_metadata(config, metadata)
        return checkpoint_entry(
            namespace,
            checkpoint["id"],
            config["configurable"].get("checkpoint_id"),
            self.serde.dumps_typed({**checkpoint, "channel_values": values}),
            self.serde.dumps_typed(stored),
            str(stored.get("run_id", "")),
        )

    def _writes_entry(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Entry:
        _, namespace = thread_and_namespace(config)
        return writes_entry(
            namespace,
            config["configurable"]["checkpoint_id"],
            task_id,
            task_path,
            [(i, channel, self.serde.dumps_typed(v)) for i, (channel, v) in enumerate(writes)],
        )

    def _tuple(
        self, thread_id: str, namespace: str, checkpoint_id: str | None, thread: Thread
    ) -> CheckpointTuple | None:
        saved = thread.checkpoints.get(namespace, {})
        if not saved:
            return None
        checkpoint_id = checkpoint_id or max(saved)
        found = saved.get(checkpoint_id)
        if found is None:
            return None
        writes = sorted(
            thread.writes.get((namespace, checkpoint_id), {}).items(),
            key=lambda item: writes_sort_key(item[1].task_path, *item[0]),
        )
        parent = stored_config(thread_id, namespace, found.parent_id) if found.parent_id else None
        return CheckpointTuple(
            config=stored_config(thread_id, namespace, checkpoint_id),
            checkpoint=self.serde.loads_typed(found.checkpoint),
            metadata=cast(CheckpointMetadata, found.metadata),
            parent_config=parent,
            pending_writes=[
                (w.task_id, w.channel, self.serde.loads_typed(w.value)) for _, w in writes
            ],
        )

    def _listed(
        self,
        threads: dict[str, Thread],
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Iterator[CheckpointTuple]:
        wanted_namespace = config["configurable"].get("checkpoint_ns") if config else None
        wanted_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        for thread_id, thread in threads.items():
            for namespace, saved in list(thread.checkpoints.items()):
                if wanted_namespace is not None and namespace != wanted_namespace:
                    continue
                for checkpoint_id in sorted(saved, reverse=True):
                    if wanted_id and checkpoint_id != wanted_id:
                        continue
                    if before_id and checkpoint_id >= before_id:
                        continue
                    metadata = saved[checkpoint_id].metadata
                    if filter and any(metadata.get(k) != v for k, v in filter.items()):
                        continue
                    if limit is not None:
                        if limit <= 0:
                            return
                        limit -= 1
                    found = self._tuple(thread_id, namespace, checkpoint_id, thread)
                    if found is not None:
                        yield found


def thread_and_namespace(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))


def stored_config(thread_id: str, namespace: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": namespace,
            "checkpoint_id": checkpoint_id,
        }
    }
