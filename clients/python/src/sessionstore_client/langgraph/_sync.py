"""The saver's synchronous methods, over its ``Client``."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import suppress
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
)

from sessionstore_client._appends import append_sync
from sessionstore_client.errors import AlreadyExists, NotFound
from sessionstore_client.langgraph._core import (
    REFUSALS,
    THREAD_LABEL,
    Entries,
    Ids,
    Messages,
    SaverCore,
    stored_config,
    thread_and_namespace,
)
from sessionstore_client.langgraph._selection import all_but_latest, of_runs, root_messages, unsaid
from sessionstore_client.langgraph._threads import Thread, message_entry
from sessionstore_client.types import PromptFormat


class SyncSaver(SaverCore):
    """``BaseCheckpointSaver``'s sync methods, and ``prompt_messages``."""

    # -- reads ---------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, namespace = thread_and_namespace(config)
        thread = self._caught_up(thread_id)
        return self._tuple(thread_id, namespace, get_checkpoint_id(config), thread)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        thread_ids = [thread_and_namespace(config)[0]] if config else self._thread_ids()
        threads = {t: self._caught_up(t) for t in thread_ids}
        yield from self._listed(threads, config, filter, before, limit)

    def prompt_messages(self, config: RunnableConfig) -> Messages:
        """The thread's prompt view: its conversation as the model should see it."""
        thread_id, _ = thread_and_namespace(config)
        view = self.client.get_prompt_view(thread_id, format=PromptFormat.OPENAI)
        return cast(Messages, json.loads(view.messages_json))

    # -- writes --------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id, namespace = thread_and_namespace(config)
        saved = self._checkpoint_entry(config, checkpoint, metadata)
        said: Entries = []
        messages = root_messages(namespace, checkpoint)
        if messages is not None:
            thread = self._caught_up(thread_id)
            new, clear = unsaid(thread, messages)
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
        return stored_config(thread_id, namespace, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id, _ = thread_and_namespace(config)
        self._append(thread_id, [self._writes_entry(config, writes, task_id, task_path)])

    def delete_thread(self, thread_id: str) -> None:
        self._call(self.client.erase_session, thread_id, reason="langgraph delete_thread")
        self._forget(thread_id)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        with suppress(NotFound):  # no such thread: nothing to copy
            self.client.fork_session(source_thread_id, new_session_id=target_thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        for thread_id in self._thread_ids() if run_ids else []:
            dropped = of_runs(self._caught_up(thread_id), set(run_ids))
            self._erase(thread_id, dropped, "langgraph delete_for_runs")

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
            else:
                dropped = all_but_latest(self._caught_up(thread_id))
                self._erase(thread_id, dropped, "langgraph prune")

    # -- the store -----------------------------------------------------------------------

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


def _paged(list_page: Any, labels: dict[str, str]) -> Iterator[Any]:
    token = ""
    while True:
        page = list_page(labels=labels, page_token=token)
        yield from page.sessions
        token = page.next_page_token
        if not token:
            return
