"""A Google ADK session service on the session store (extra ``[adk]``).

    from google.adk.runners import Runner
    from sessionstore_client.adk import SessionStoreSessionService

    runner = Runner(app_name="support", agent=agent, session_service=SessionStoreSessionService())

An ADK session is a store session (the same id), its ``app_name`` and ``user_id``
kept as labels, which ``list_sessions`` filters by; ``delete_session`` erases it
(its id is then retired). Each event is an entry: its
content as the store's blocks (text, thinking, function calls and responses), the
event itself, as ADK wrote it, in the entry's sealed metadata. ``get_session``
answers the events of the store's prompt view: when the store compacted, a
compaction event (``EventActions.compaction``) carries the summary in place of the
events it covers, and a tool result the guard or a prune cut shows as the model
sees it. The state is every event's ``state_delta`` folded in order, compacted
ones included. ``append_event`` raises ADK's ``StaleSessionError`` when another
writer appended to the session since it was read.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State
from google.genai import types

from sessionstore_client._appends import append
from sessionstore_client._call_ids import runtime_call_id, shown_results
from sessionstore_client._durable_logs import whole_durable_log
from sessionstore_client.aio import AsyncClient
from sessionstore_client.errors import AlreadyExists, NotFound, VersionConflict
from sessionstore_client.types import (
    ContentBlock,
    DurableLog,
    EntriesAppended,
    Entry,
    EntryRetracted,
    Erasure,
    PromptFormat,
    PromptView,
    Role,
    SessionCleared,
    SessionEvent,
    SessionSettings,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolCallsAbandoned,
    ToolResultBlock,
)

__all__ = ["SessionStoreSessionService"]

APP, USER = "adk.app", "adk.user"
EVENT_KEY = "adk.event"
# Events without content (a state change, the initial state): notes of the runtime's.
NOTE = "adk.event"
# The state a session was created with: in the state, not among the session's events.
INITIAL_STATE = "adk.initial_state"
# What other writers record: a session read before one of these is stale (the store's
# own records, a compaction or a prune, leave it current).
_WRITES = (EntriesAppended, ToolCallsAbandoned, EntryRetracted, SessionCleared, Erasure)


class SessionStoreSessionService(BaseSessionService):
    """``BaseSessionService`` over the session store; keyword ``settings`` are those of
    the sessions it creates (``model``, ``context_window_tokens``, ...)."""

    def __init__(self, client: AsyncClient | None = None, **settings: Any) -> None:
        self.client = client or AsyncClient()
        self.settings = settings

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session_id = (session_id or "").strip() or uuid.uuid4().hex
        labels = {**self.settings.get("labels", {}), APP: app_name, USER: user_id}
        settings = SessionSettings(**{**self.settings, "labels": labels})
        try:
            await self.client.create_session(session_id, settings=settings)
        except AlreadyExists as refused:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from refused
        # Temporary state lives for an invocation only: ADK never keeps it.
        kept = {k: v for k, v in (state or {}).items() if not k.startswith(State.TEMP_PREFIX)}
        if kept:
            initial = Event(author="user", actions=EventActions(state_delta=kept))
            entry = _event_entry(initial, custom_type=INITIAL_STATE)
            await self.client.append_entries(session_id, entries=[entry])
        found = await self.get_session(app_name=app_name, user_id=user_id, session_id=session_id)
        assert found is not None
        return found

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        try:
            stored = await self.client.get_session(session_id)
        except NotFound:
            return None
        labels = stored.settings.labels if stored.settings else {}
        if stored.erased is not None or (labels.get(APP), labels.get(USER)) != (app_name, user_id):
            return None  # deleted (erased), or another app's or user's
        view = await self.client.get_prompt_view(session_id, format=PromptFormat.OPENAI)
        log = await whole_durable_log(self.client, session_id, view.version)
        events = _view_events(view, log)
        events = _filtered(events, config)
        session = Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=await self._state(session_id, view.version),
            events=events,
            last_update_time=(stored.updated_at or datetime.now(UTC)).timestamp(),
        )
        session._storage_update_marker = str(view.version)
        return session

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        labels = {APP: app_name, **({USER: user_id} if user_id is not None else {})}
        found, token = [], ""
        while True:
            page = await self.client.list_sessions(labels=labels, page_token=token)
            found += [
                Session(
                    id=s.id,
                    app_name=app_name,
                    user_id=(s.settings.labels if s.settings else {}).get(USER, ""),
                    last_update_time=s.updated_at.timestamp() if s.updated_at else 0.0,
                )
                for s in page.sessions
                if s.erased is None
            ]
            token = page.next_page_token
            if not token:
                break
        found.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=found)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        if await self.get_session(app_name=app_name, user_id=user_id, session_id=session_id):
            with suppress(NotFound):
                await self.client.erase_session(session_id, reason="adk delete_session")

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        event = await super().append_event(session=session, event=event)
        read_at = int(session._storage_update_marker or 0) or None
        entry = _event_entry(event)
        while True:
            try:
                # As the store takes it: see _appends (open calls, ids it has seen).
                answer = await append(self.client, session.id, [entry], read_at)
                break
            except VersionConflict as conflict:
                read_at = await self._unchanged_since(session.id, read_at or 0, conflict)
        session._storage_update_marker = str(answer.version)
        return event

    async def _unchanged_since(self, session_id: str, version: int, conflict: Exception) -> int:
        """The session's version, when only the store's own records (a compaction, a prune)
        came after ``version``; else the session was read before another writer's events."""
        latest = version
        async for later in self.client.read_events(session_id, after_version=version):
            if isinstance(later.event, _WRITES):
                raise StaleSessionError(
                    f"session {session_id} was written at version {later.version} after it "
                    f"was read at version {version}: get it again"
                ) from conflict
            latest = later.version
        return latest

    async def _state(self, session_id: str, upto: int) -> dict[str, Any]:
        state: dict[str, Any] = {}
        async for recorded in self.client.read_events(session_id):
            if recorded.version > upto:
                break
            state.update(_state_delta(recorded))
        return state


def _event_entry(event: Event, custom_type: str = NOTE) -> Entry:
    kept = event.model_dump_json(exclude_none=True)
    role, blocks = _blocks(event.content)
    if not blocks:
        role = Role.CUSTOM
        blocks = [TextBlock(f"event {event.id} of {event.author}")]
    return Entry(
        role=role,
        content=blocks,
        custom_type=custom_type if role is Role.CUSTOM else "",
        timestamp=datetime.fromtimestamp(event.timestamp, UTC),
        metadata={EVENT_KEY: kept},
    )


def _blocks(content: types.Content | None) -> tuple[Role, list[ContentBlock]]:
    if content is None or not content.parts:
        return Role.CUSTOM, []
    blocks: list[ContentBlock] = []
    results: list[ContentBlock] = []
    for part in content.parts:
        if part.function_response is not None:
            response = part.function_response
            text = json.dumps(response.response, ensure_ascii=False, default=str)
            results.append(ToolResultBlock(str(response.id), text))
        elif part.function_call is not None:
            call = part.function_call
            arguments = json.dumps(call.args or {}, ensure_ascii=False, default=str)
            blocks.append(ToolCallBlock(str(call.id), str(call.name), arguments))
        elif not (part.text or "").strip():
            continue  # says nothing: an event of nothing else is kept as a note
        elif part.thought:
            blocks.append(ThinkingBlock(part.text or ""))
        else:
            blocks.append(TextBlock(part.text or ""))
    if results:
        return Role.TOOL, results
    return (Role.ASSISTANT if content.role == "model" else Role.USER), blocks


def _view_events(view: PromptView, log: DurableLog) -> list[Event]:
    """The events of the view: the summary as a compaction event, then the log's."""
    shown = shown_results(view)
    entries = [e for e in [*log.pinned, *log.entries] if e.custom_type != INITIAL_STATE]
    # Entries of other writers (the store's results for abandoned calls among them) say
    # which call a result answers by id only; ADK's responses name the function too.
    names = {b.id: b.name for e in entries for b in e.content if isinstance(b, ToolCallBlock)}
    events = [e for entry in entries if (e := _entry_event(entry, shown, names))]
    if log.compaction is not None:
        messages = json.loads(view.messages_json)
        summary = next(m for m in messages if m.get("role") != "system")
        first = events[0].timestamp if events else datetime.now(UTC).timestamp()
        compaction = EventCompaction(
            start_timestamp=0.0,
            end_timestamp=first - 1e-6,
            compacted_content=types.Content(
                role="model", parts=[types.Part(text=summary["content"])]
            ),
        )
        events.insert(
            0,
            Event(
                author="model", timestamp=first - 1e-6, actions=EventActions(compaction=compaction)
            ),
        )
    return events


def _entry_event(entry: Entry, shown: dict[str, str], names: dict[str, str]) -> Event | None:
    kept = entry.metadata.get(EVENT_KEY)
    if kept is None:
        return _plain_event(entry, shown, names)
    event = Event.model_validate_json(kept)
    # The results the entry holds, by the call id ADK gave (a late one, kept as a note,
    # holds none: its call shows another answer).
    stored = {
        runtime_call_id(b.tool_call_id): b for b in entry.content if isinstance(b, ToolResultBlock)
    }
    for part in event.content.parts or [] if event.content is not None else []:
        response = part.function_response
        result = stored.get(str(response.id)) if response is not None else None
        if response is None or result is None:
            continue
        text = shown.get(result.tool_call_id)
        if text not in (None, result.content):
            response.response = {"result": text}  # as the model sees it
    return event


def _plain_event(entry: Entry, shown: dict[str, str], names: dict[str, str]) -> Event | None:
    """An event for an entry another client wrote."""
    parts = [types.Part(text=b.text) for b in entry.content if isinstance(b, TextBlock)]
    parts += [
        types.Part(
            function_call=types.FunctionCall(
                id=runtime_call_id(b.id), name=b.name, args=json.loads(b.arguments_json)
            )
        )
        for b in entry.content
        if isinstance(b, ToolCallBlock)
    ]
    parts += [
        types.Part(
            function_response=types.FunctionResponse(
                id=runtime_call_id(b.tool_call_id),
                name=names.get(b.tool_call_id, ""),
                response={"result": shown.get(b.tool_call_id, b.content)},
            )
        )
        for b in entry.content
        if isinstance(b, ToolResultBlock)
    ]
    if not parts or entry.role in (Role.CUSTOM, Role.SYSTEM):
        return None
    role = "model" if entry.role is Role.ASSISTANT else "user"
    moment = entry.timestamp or datetime.now(UTC)
    return Event(
        author="model" if role == "model" else "user",
        content=types.Content(role=role, parts=parts),
        timestamp=moment.timestamp(),
    )


def _filtered(events: Sequence[Event], config: GetSessionConfig | None) -> list[Event]:
    chosen = list(events)
    if config is None:
        return chosen
    if config.after_timestamp is not None:
        chosen = [e for e in chosen if e.timestamp >= config.after_timestamp]
    if config.num_recent_events is not None:
        chosen = chosen[-config.num_recent_events :] if config.num_recent_events else []
    return chosen


def _state_delta(recorded: SessionEvent) -> dict[str, Any]:
    if not isinstance(recorded.event, EntriesAppended):
        return {}
    delta: dict[str, Any] = {}
    for entry in recorded.event.entries:
        kept = entry.metadata.get(EVENT_KEY)
        if kept is not None:
            actions = json.loads(kept).get("actions") or {}
            delta.update(actions.get("state_delta") or {})
    return delta
