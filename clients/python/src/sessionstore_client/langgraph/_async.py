"""The saver's asyncio methods, over its ``AsyncClient``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
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

from sessionstore_client._appends import append
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


class AsyncSaver(SaverCore):
    """``BaseCheckpointSaver``'s async methods, and ``aprompt_messages``."""

    # -- reads ---------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, namespace = thread_and_namespace(config)
        thread = await self._acaught_up(thread_id)
        return self._tuple(thread_id, namespace, get_checkpoint_id(config), thread)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        thread_ids = [thread_and_namespace(config)[0]] if config else await self._athread_ids()
        threads = {t: await self._acaught_up(t) for t in thread_ids}
        for found in self._listed(threads, config, filter, before, limit):
            yield found

    async def aprompt_messages(self, config: RunnableConfig) -> Messages:
        thread_id, _ = thread_and_namespace(config)
        view = await self.aclient.get_prompt_view(thread_id, format=PromptFormat.OPENAI)
        return cast(Messages, json.loads(view.messages_json))

    # -- writes --------------------------------------------------------------------------

    async def aput(
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
            thread = await self._acaught_up(thread_id)
            new, clear = unsaid(thread, messages)
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
        return stored_config(thread_id, namespace, checkpoint["id"])

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id, _ = thread_and_namespace(config)
        await self._aappend(thread_id, [self._writes_entry(config, writes, task_id, task_path)])

    async def adelete_thread(self, thread_id: str) -> None:
        with suppress(NotFound):
            await self.aclient.erase_session(thread_id, reason="langgraph delete_thread")
        self._forget(thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        with suppress(NotFound):
            await self.aclient.fork_session(source_thread_id, new_session_id=target_thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        for thread_id in await self._athread_ids() if run_ids else []:
            dropped = of_runs(await self._acaught_up(thread_id), set(run_ids))
            await self._aerase(thread_id, dropped, "langgraph delete_for_runs")

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        for thread_id in thread_ids:
            if strategy == "delete":
                await self.adelete_thread(thread_id)
            else:
                dropped = all_but_latest(await self._acaught_up(thread_id))
                await self._aerase(thread_id, dropped, "langgraph prune")

    # -- the store -----------------------------------------------------------------------

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
