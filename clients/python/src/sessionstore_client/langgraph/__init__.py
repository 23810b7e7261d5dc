"""A LangGraph checkpointer on the session store (extra ``[langgraph]``).

    from sessionstore_client.langgraph import SessionStoreSaver

    graph = builder.compile(checkpointer=SessionStoreSaver())
    graph.invoke(inputs, {"configurable": {"thread_id": "support-42"}}, durability="sync")

A thread is a session (its id the thread id); each checkpoint and each batch of
pending writes is an entry of it, ``checkpoint_ns`` kept in its keys (see
``_threads``). ``copy_thread`` forks the session, ``delete_thread`` erases it
(its id is then retired), ``delete_for_runs`` and ``prune`` erase the entries of
the checkpoints they drop. The messages of the root graph's ``messages`` channel
are kept as the session's conversation, so the store manages their context:
``prompt_messages(config)`` answers the prompt view (compacted, guarded, pruned)
for the model, in OpenAI's chat format. With ``durability="sync"`` each step's
messages are in the store before the next node runs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import suppress
from typing import Any, TypeAlias, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)

from sessionstore_client._appends import append, append_sync
from sessionstore_client.aio import AsyncClient
from sessionstore_client.client import Client
from sessionstore_client.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from sessionstore_client.langgraph._threads import (
    Thread,
    checkpoint_entry,
    message_entry,
    writes_entry,
)
from sessionstore_client.types import Entry, PromptFormat, SessionSettings

__all__ = ["SessionStoreSaver"]

# Sessions of LangGraph threads carry this label, so the saver finds them all.
THREAD_LABEL = ("langgraph", "thread")
MESSAGES = "messages"
# What the store may make of a checkpoint's messages: refused, the checkpoint is saved
# by itself before the refusal is raised, so the graph's state is never lost with them.
REFUSALS = (AlreadyExists, FailedPrecondition, InvalidArgument)
# The class's method `list` hides the builtin in its annotations: these name the types.
Entries: TypeAlias = list[Entry]
Ids: TypeAlias = list[str]
Messages: TypeAlias = list[dict[str, Any]]
Events: TypeAlias = list[Any]


class SessionStoreSaver(BaseCheckpointSaver[str]):
    """``BaseCheckpointSaver``, sync and async, over the session store. ``client`` is a
    ``Client`` or an ``AsyncClient`` (the other is made with its address, token and TLS);
    keyword ``settings`` are those of the sessions it creates."""

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

    # -- reads ---------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, namespace = _thread_and_namespace(config)
        thread = self._caught_up(thread_id)
        return self._tuple(thread_id, namespace, get_checkpoint_id(config), thread)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, namespace = _thread_and_namespace(config)
        thread = await self._acaught_up(thread_id)
        return self._tuple(thread_id, namespace, get_checkpoint_id(config), thread)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        thread_ids = [_thread_and_namespace(config)[0]] if config else self._thread_ids()
        threads = {t: self._caught_up(t) for t in thread_ids}
        yield from self._listed(threads, config, filter, before, limit)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        thread_ids = [_thread_and_namespace(config)[0]] if config else await self._athread_ids()
        threads = {t: await self._acaught_up(t) for t in thread_ids}
        for found in self._listed(threads, config, filter, before, limit):
            yield found

    def prompt_messages(self, config: RunnableConfig) -> Messages:
        """The thread's prompt view: its conversation as the model should see it."""
        thread_id, _ = _thread_and_namespace(config)
        view = self.client.get_prompt_view(thread_id, format=PromptFormat.OPENAI)
        return cast(Messages, json.loads(view.messages_json))

    async def aprompt_messages(self, config: RunnableConfig) -> Messages:
        thread_id, _ = _thread_and_namespace(config)
        view = await self.aclient.get_prompt_view(thread_id, format=PromptFormat.OPENAI)
        return cast(Messages, json.loads(view.messages_json))

    # -- writes --------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id, namespace = _thread_and_namespace(config)
        saved = self._checkpoint_entry(config, checkpoint, metadata)
        said: Entries = []
        messages = _messages(namespace, checkpoint)
        if messages is not None:
            thread = self._caught_up(thread_id)
            new, clear = _unsaid(thread, messages)
            if clear:
                self._call(self.client.clear_session, thread_id, reason="state replayed")
            said = [message_entry(m) for m in new]
        try:
            self._append(thread_id, [*said, saved])
        except REFUSALS:
            if not said:
                raise
            self._append(thread_id, [saved])  # the graph's state, whatever befell its messages
            raise
        return _stored(thread_id, namespace, checkpoint["id"])

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id, namespace = _thread_and_namespace(config)
        saved = self._checkpoint_entry(config, checkpoint, metadata)
        said: Entries = []
        messages = _messages(namespace, checkpoint)
        if messages is not None:
            thread = await self._acaught_up(thread_id)
            new, clear = _unsaid(thread, messages)
            if clear:
                with suppress(NotFound):
                    await self.aclient.clear_session(thread_id, reason="state replayed")
            said = [message_entry(m) for m in new]
        try:
            await self._aappend(thread_id, [*said, saved])
        except REFUSALS:
            if not said:
                raise
            await self._aappend(thread_id, [saved])
            raise
        return _stored(thread_id, namespace, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id, _ = _thread_and_namespace(config)
        self._append(thread_id, [self._writes_entry(config, writes, task_id, task_path)])

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id, _ = _thread_and_namespace(config)
        await self._aappend(thread_id, [self._writes_entry(config, writes, task_id, task_path)])

    def delete_thread(self, thread_id: str) -> None:
        self._call(self.client.erase_session, thread_id, reason="langgraph delete_thread")
        self._forget(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        with suppress(NotFound):
            await self.aclient.erase_session(thread_id, reason="langgraph delete_thread")
        self._forget(thread_id)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        with suppress(NotFound):  # no such thread: nothing to copy
            self.client.fork_session(source_thread_id, new_session_id=target_thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        with suppress(NotFound):
            await self.aclient.fork_session(source_thread_id, new_session_id=target_thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        for thread_id in self._thread_ids() if run_ids else []:
            dropped = _of_runs(self._caught_up(thread_id), set(run_ids))
            self._erase(thread_id, dropped, "langgraph delete_for_runs")

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        for thread_id in await self._athread_ids() if run_ids else []:
            dropped = _of_runs(await self._acaught_up(thread_id), set(run_ids))
            await self._aerase(thread_id, dropped, "langgraph delete_for_runs")

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
            else:
                dropped = _all_but_latest(self._caught_up(thread_id))
                self._erase(thread_id, dropped, "langgraph prune")

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for thread_id in thread_ids:
            if strategy == "delete":
                await self.adelete_thread(thread_id)
            else:
                dropped = _all_but_latest(await self._acaught_up(thread_id))
                await self._aerase(thread_id, dropped, "langgraph prune")

    # -- the store, sync -----------------------------------------------------------------

    def _caught_up(self, thread_id: str) -> Thread:
        thread = self._thread(thread_id)
        try:
            events = [*self.client.read_events(thread_id, after_version=thread.version)]
        except NotFound:
            return Thread()
        return self._applied(thread_id, thread, events)

    def _append(self, thread_id: str, entries: Entries) -> None:
        try:
            append_sync(self.client, thread_id, entries)
        except NotFound:
            with suppress(AlreadyExists):
                self.client.create_session(thread_id, settings=self.settings)
            append_sync(self.client, thread_id, entries)

    def _erase(self, thread_id: str, entry_ids: Ids, reason: str) -> None:
        if entry_ids:
            self.client.erase_entries(thread_id, entry_ids=entry_ids, reason=reason)

    def _thread_ids(self) -> Ids:
        return [s.id for s in _paged(self.client.list_sessions, dict([THREAD_LABEL]))]

    def _call(self, method: Any, thread_id: str, **arguments: Any) -> None:
        """``method(thread_id, ...)``, for a thread that may not be in the store."""
        with suppress(NotFound):
            method(thread_id, **arguments)

    # -- the store, async ----------------------------------------------------------------

    async def _acaught_up(self, thread_id: str) -> Thread:
        thread = self._thread(thread_id)
        try:
            events = [
                e async for e in self.aclient.read_events(thread_id, after_version=thread.version)
            ]
        except NotFound:
            return Thread()
        return self._applied(thread_id, thread, events)

    async def _aappend(self, thread_id: str, entries: Entries) -> None:
        try:
            await append(self.aclient, thread_id, entries)
        except NotFound:
            with suppress(AlreadyExists):
                await self.aclient.create_session(thread_id, settings=self.settings)
            await append(self.aclient, thread_id, entries)

    async def _aerase(self, thread_id: str, entry_ids: Ids, reason: str) -> None:
        if entry_ids:
            await self.aclient.erase_entries(thread_id, entry_ids=entry_ids, reason=reason)

    async def _athread_ids(self) -> Ids:
        ids: Ids = []
        token = ""
        while True:
            page = await self.aclient.list_sessions(labels=dict([THREAD_LABEL]), page_token=token)
            ids += [s.id for s in page.sessions]
            token = page.next_page_token
            if not token:
                return ids

    # -- shared ----------------------------------------------------------------------------

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
        _, namespace = _thread_and_namespace(config)
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
        _, namespace = _thread_and_namespace(config)
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
        parent = _stored(thread_id, namespace, found.parent_id) if found.parent_id else None
        return CheckpointTuple(
            config=_stored(thread_id, namespace, checkpoint_id),
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


def _thread_and_namespace(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))


def _stored(thread_id: str, namespace: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": namespace,
            "checkpoint_id": checkpoint_id,
        }
    }


def _messages(namespace: str, checkpoint: Checkpoint) -> list[Any] | None:
    """The root graph's messages, when it has a ``messages`` channel of them."""
    values = checkpoint["channel_values"].get(MESSAGES)
    if namespace or not isinstance(values, list):
        return None
    return [m for m in values if getattr(m, "id", None) and hasattr(m, "content")]


def _unsaid(thread: Thread, messages: list[Any]) -> tuple[list[Any], bool]:
    """The messages the conversation lacks, and whether it must start over first (the
    state went back to an earlier checkpoint, or dropped messages)."""
    ids = [m.id for m in messages]
    held = thread.messages
    if ids[: len(held)] == held:
        return messages[len(held) :], False
    return messages, True


def _of_runs(thread: Thread, run_ids: set[str]) -> list[str]:
    return [
        entry
        for namespace, saved in thread.checkpoints.items()
        for checkpoint_id, found in saved.items()
        if found.metadata.get("run_id") in run_ids
        for entry in thread.entries_of(namespace, checkpoint_id)
    ]


def _all_but_latest(thread: Thread) -> list[str]:
    return [
        entry
        for namespace, saved in thread.checkpoints.items()
        for checkpoint_id in sorted(saved)[:-1]
        for entry in thread.entries_of(namespace, checkpoint_id)
    ]


def _paged(list_page: Any, labels: dict[str, str]) -> Iterator[Any]:
    token = ""
    while True:
        page = list_page(labels=labels, page_token=token)
        yield from page.sessions
        token = page.next_page_token
        if not token:
            return
