"""An OpenAI Agents SDK session kept in the session store (extra ``[agents]``).

    from agents import Agent, Runner
    from sessionstore_client.agents import SessionStoreSession

    session = SessionStoreSession("support-42", model="gpt-4o")
    result = await Runner.run(agent, "Where is my order?", session=session)

``get_items`` answers the store's prompt view, as Responses input items: what the
model should see, with the store's context management applied (compaction when
the window fills, the tool-result guard, pruning), in order; ``limit`` is the
latest N. Items come back as they were added. ``pop_item`` and ``clear_session``
are recorded as events (an entry retracted, the session cleared): the history
keeps what they took out of the views, for audit and replay. ``run_compaction``
makes the store compact (the runner calls it after each turn).

The session id is the store's. Keyword ``settings`` (``model``,
``context_window_tokens``, ``compaction``, ... as in ``SessionSettings``) are
those of a session created here, on first use, when the store has none by that id.
"""

from __future__ import annotations

import json
from contextlib import suppress
from typing import Any, cast

from agents.items import TResponseInputItem
from agents.memory import OpenAIResponsesCompactionArgs
from agents.memory.session_settings import SessionSettings as AgentsSessionSettings
from agents.memory.session_settings import resolve_session_limit

from sessionstore_client._appends import append
from sessionstore_client._call_ids import LATE_RESULT, shown_results
from sessionstore_client._durable_logs import whole_durable_log
from sessionstore_client._responses_items import entry_items, items_entries
from sessionstore_client.aio import AsyncClient
from sessionstore_client.errors import AlreadyExists, FailedPrecondition, NotFound
from sessionstore_client.types import DurableLog, Entry, PromptFormat, PromptView, SessionSettings

__all__ = ["SessionStoreSession"]


class SessionStoreSession:
    """The Agents SDK ``Session`` protocol (and its compaction-aware variant) over the
    session store."""

    def __init__(
        self,
        session_id: str,
        client: AsyncClient | None = None,
        *,
        session_settings: AgentsSessionSettings | None = None,
        **settings: Any,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self.client = client or AsyncClient()
        self._settings = SessionSettings(**settings)
        self._exists = False

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The prompt view as Responses input items, oldest first; the latest ``limit``."""
        if not await self._found():
            return []
        view = await self.client.get_prompt_view(self.session_id, format=PromptFormat.OPENAI)
        log = await whole_durable_log(self.client, self.session_id, view.version)
        items = _view_items(view, log)
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None:
            items = items[-limit:] if limit > 0 else []
        return cast(list[TResponseInputItem], items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Appends the items, in order, as one write (an idempotent one: retried, never
        written twice)."""
        if not items:
            return
        await self._ensure()
        await self._append(items_entries([cast(dict[str, Any], item) for item in items]))

    async def pop_item(self) -> TResponseInputItem | None:
        """Takes the latest item back out of the views and answers it (None when the log
        holds none). The store records the retraction; the item stays in its history."""
        if not await self._found():
            return None
        try:
            answer = await self.client.retract_entry(self.session_id, reason="pop_item")
        except FailedPrecondition:
            return None  # nothing to take back
        assert answer.entry is not None
        items = entry_items(answer.entry, {})
        if len(items) > 1:
            # Function calls made together are one entry: the others go back in.
            await self._append(items_entries(items[:-1]), expected_version=answer.version)
        return cast(TResponseInputItem, items[-1])

    async def clear_session(self) -> None:
        """Takes every item out of the views; the store records it and keeps them."""
        if await self._found():
            await self.client.clear_session(self.session_id, reason="clear_session")

    async def run_compaction(self, args: OpenAIResponsesCompactionArgs | None = None) -> None:
        """Compacts with the store's engine: when the prompt is past the session's
        threshold, or whatever its size with ``force``."""
        if await self._found():
            force = bool(args.get("force", False)) if args else False
            await self.client.compact(self.session_id, force=force)

    async def _append(self, entries: list[Entry], expected_version: int | None = None) -> None:
        """Appends the entries as the store takes them (see ``_appends``): items added
        again after a pop keep the tool call ids they had, a message that comes while
        calls are open has them abandoned, as the SDK's own sessions take both."""
        await append(self.client, self.session_id, entries, expected_version)

    async def _found(self) -> bool:
        if not self._exists:
            try:
                await self.client.get_session(self.session_id)
            except NotFound:
                return False
            self._exists = True
        return True

    async def _ensure(self) -> None:
        if self._exists:
            return
        with suppress(AlreadyExists):  # made before, or by another task just now
            await self.client.create_session(self.session_id, settings=self._settings)
        self._exists = True


def _view_items(view: PromptView, log: DurableLog) -> list[dict[str, Any]]:
    """The view's messages as the items they were made from."""
    messages: list[dict[str, Any]] = json.loads(view.messages_json)
    shown = shown_results(view)
    items: list[dict[str, Any]] = []
    for entry in log.pinned:
        items += entry_items(entry, shown)
    if log.compaction is not None:
        # The summary, as the view words it: the first message after the system ones.
        summary = next(m for m in messages if m.get("role") != "system")
        items.append({"role": summary["role"], "content": summary["content"]})
    for entry in log.entries:
        # A result that came after its call was closed is a note, not in the prompt: its
        # call has the abandonment's answer there, and a second output would be refused.
        if entry.custom_type != LATE_RESULT:
            items += entry_items(entry, shown)
    return items
