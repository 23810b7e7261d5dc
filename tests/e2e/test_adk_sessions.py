"""The Google ADK session service on a running store: create, get (recent events, after a
time), list by app and user, delete, state deltas, the stale-session error; and ADK's
Runner with an LlmAgent and a tool, driven by a scripted model written against ADK's
BaseLlm, for turns through a window small enough that the store compacts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.errors import StaleSessionError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types
from pydantic import Field
from sessionstore_client import AsyncClient, Client, CompactionPolicy
from sessionstore_client.adk import SessionStoreSessionService

from services.grpc.server import RunningServer
from tests.conftest import start_server

FILE_CHARS = 15_000


@pytest.fixture
def address(server: RunningServer) -> str:
    return f"127.0.0.1:{server.port}"


def said(text: str, author: str = "user") -> Event:
    role = "user" if author == "user" else "model"
    return Event(author=author, content=types.Content(role=role, parts=[types.Part(text=text)]))


def test_sessions_events_and_state(address: str) -> None:
    async def run() -> None:
        service = SessionStoreSessionService(AsyncClient(address))
        made = await service.create_session(
            app_name="shop", user_id="ann", state={"cart": []}, session_id="adk-basics"
        )
        assert made.state == {"cart": []}
        await service.create_session(app_name="shop", user_id="bob", session_id="adk-bob")
        await service.create_session(app_name="blog", user_id="ann", session_id="adk-blog")
        for n in range(4):
            event = said(f"message {n}")
            event.actions = EventActions(state_delta={"last": n})
            await service.append_event(made, event)
        found = await service.get_session(app_name="shop", user_id="ann", session_id="adk-basics")
        assert found is not None and found.state == {"cart": [], "last": 3}
        texts = [e.content.parts[0].text for e in found.events if e.content and e.content.parts]
        assert texts == [f"message {n}" for n in range(4)]
        recent = await service.get_session(
            app_name="shop",
            user_id="ann",
            session_id="adk-basics",
            config=GetSessionConfig(num_recent_events=2),
        )
        assert recent is not None and [e.id for e in recent.events] == [
            e.id for e in found.events[-2:]
        ]
        after = await service.get_session(
            app_name="shop",
            user_id="ann",
            session_id="adk-basics",
            config=GetSessionConfig(after_timestamp=found.events[-1].timestamp),
        )
        assert after is not None and [e.id for e in after.events] == [found.events[-1].id]
        assert (
            await service.get_session(app_name="blog", user_id="ann", session_id="adk-basics")
            is None
        )
        shop = await service.list_sessions(app_name="shop")
        assert {s.id for s in shop.sessions} == {"adk-basics", "adk-bob"}
        anns = await service.list_sessions(app_name="shop", user_id="ann")
        assert [s.id for s in anns.sessions] == ["adk-basics"]

        # Two readers of one session: the second to write read it before the first wrote.
        first = await service.get_session(app_name="shop", user_id="ann", session_id="adk-basics")
        second = await service.get_session(app_name="shop", user_id="ann", session_id="adk-basics")
        assert first is not None and second is not None
        await service.append_event(first, said("from the first"))
        with pytest.raises(StaleSessionError):
            await service.append_event(second, said("from the second"))

        await service.delete_session(app_name="shop", user_id="bob", session_id="adk-bob")
        assert (
            await service.get_session(app_name="shop", user_id="bob", session_id="adk-bob") is None
        )

    asyncio.run(run())


def called(call_id: str, name: str = "lookup") -> Event:
    call = types.FunctionCall(id=call_id, name=name, args={})
    return Event(
        author="model", content=types.Content(role="model", parts=[types.Part(function_call=call)])
    )


def answered(call_id: str, response: dict[str, Any], name: str = "lookup") -> Event:
    answer = types.FunctionResponse(id=call_id, name=name, response=response)
    return Event(
        author="user",
        content=types.Content(role="user", parts=[types.Part(function_response=answer)]),
    )


def test_a_message_while_a_call_is_open_abandons_the_call(address: str) -> None:
    """What ADK's own service takes: a user message before a call's response, the
    response coming later."""

    async def run() -> list[Event]:
        service = SessionStoreSessionService(AsyncClient(address))
        session = await service.create_session(app_name="shop", user_id="ann")
        for event in (called("fc-1"), said("never mind"), answered("fc-1", {"result": "late"})):
            await service.append_event(session, event)
        found = await service.get_session(app_name="shop", user_id="ann", session_id=session.id)
        assert found is not None
        return found.events

    events = asyncio.run(run())
    parts = [e.content.parts[0] for e in events if e.content and e.content.parts]
    assert parts[0].function_call is not None and parts[0].function_call.id == "fc-1"
    closed = parts[1].function_response
    assert closed is not None and (closed.id, closed.name) == ("fc-1", "lookup")
    assert "abandoned" in str(closed.response)
    assert parts[2].text == "never mind"
    late = parts[3].function_response
    assert late is not None and late.response == {"result": "late"}


def test_call_ids_used_again_and_a_long_running_tools_responses(address: str) -> None:
    """What ADK's own service takes: a model reusing a call id in a later turn, and a
    long-running tool's "pending" response followed by its final one, by the same id."""

    async def run() -> list[Event]:
        service = SessionStoreSessionService(AsyncClient(address))
        session = await service.create_session(app_name="shop", user_id="ann")
        for event in (
            called("call_0"),
            answered("call_0", {"result": "first"}),
            said("again"),
            called("call_0"),
            answered("call_0", {"result": "second"}),
            called("adk-1", "approve"),
            answered("adk-1", {"status": "pending"}, "approve"),
            answered("adk-1", {"status": "approved"}, "approve"),
        ):
            await service.append_event(session, event)
        found = await service.get_session(app_name="shop", user_id="ann", session_id=session.id)
        assert found is not None
        return found.events

    parts = [e.content.parts[0] for e in asyncio.run(run()) if e.content and e.content.parts]
    calls = [p.function_call.id for p in parts if p.function_call]
    assert calls == ["call_0", "call_0", "adk-1"]  # as ADK gave them
    responses = [(r.id, r.response) for p in parts if (r := p.function_response)]
    assert responses == [
        ("call_0", {"result": "first"}),
        ("call_0", {"result": "second"}),
        ("adk-1", {"status": "pending"}),
        ("adk-1", {"status": "approved"}),
    ]


@pytest.mark.parametrize("call_id", ["call_1", "functions.lookup:0"])
def test_a_guarded_result_comes_back_as_the_model_sees_it(address: str, call_id: str) -> None:
    """Whatever the call's id: one OpenAI refuses is shown rewritten in the view."""
    huge = {"result": "Z" * 600_000}

    async def run() -> dict[str, Any]:
        service = SessionStoreSessionService(AsyncClient(address), model="gpt-4o")
        session = await service.create_session(app_name="shop", user_id="ann")
        for event in (said("go"), called(call_id), answered(call_id, huge)):
            await service.append_event(session, event)
        found = await service.get_session(app_name="shop", user_id="ann", session_id=session.id)
        assert found is not None and found.events[-1].content and found.events[-1].content.parts
        response = found.events[-1].content.parts[0].function_response
        assert response is not None and response.id == call_id
        return response.response or {}

    shown = asyncio.run(run())["result"]
    assert len(shown) < 50_000 and shown.startswith("{")  # the guard's cut, not the whole


def test_a_session_over_one_message_comes_back_whole(database_url: str) -> None:
    """A durable log larger than one message comes in pages: ADK's Runner builds the
    model's request from the session's events, so a session cut at the first page
    would lose its latest turns."""
    server = start_server(database_url, max_message_mb=1, max_entry_bytes=700_000)
    big = {"result": "Z" * 200_000}  # kept whole in the log, cut by the guard in the view

    async def run() -> list[Event]:
        service = SessionStoreSessionService(AsyncClient(f"127.0.0.1:{server.port}"))
        session = await service.create_session(app_name="shop", user_id="ann")
        for n in range(8):
            for event in (said(f"look {n}"), called(f"call_{n}"), answered(f"call_{n}", big)):
                await service.append_event(session, event)
        await service.append_event(session, said("the last word"))
        found = await service.get_session(app_name="shop", user_id="ann", session_id=session.id)
        assert found is not None
        return found.events

    try:
        events = asyncio.run(run())
    finally:
        server.stop(0)
    texts = [p.text for e in events if e.content for p in e.content.parts or [] if p.text]
    assert texts == [*(f"look {n}" for n in range(8)), "the last word"]
    assert len(events) == 8 * 3 + 1


def test_a_blank_message_is_kept_as_given(address: str) -> None:
    async def run() -> list[Event]:
        service = SessionStoreSessionService(AsyncClient(address))
        session = await service.create_session(app_name="shop", user_id="ann")
        await service.append_event(session, said("  "))
        found = await service.get_session(app_name="shop", user_id="ann", session_id=session.id)
        assert found is not None
        return found.events

    events = asyncio.run(run())
    assert [e.content.parts[0].text for e in events if e.content and e.content.parts] == ["  "]


def test_the_initial_state_is_no_event_and_keeps_no_temporary_keys(address: str) -> None:
    """As ADK's own service: temp: keys live for an invocation only, and the state a
    session is created with is not among its events."""

    async def run() -> None:
        service = SessionStoreSessionService(AsyncClient(address))
        made = await service.create_session(
            app_name="shop", user_id="ann", state={"cart": [], "temp:draft": "x"}
        )
        assert made.state == {"cart": []} and made.events == []
        for n in range(2):
            await service.append_event(made, said(f"message {n}"))
        recent = await service.get_session(
            app_name="shop",
            user_id="ann",
            session_id=made.id,
            config=GetSessionConfig(num_recent_events=2),
        )
        assert recent is not None and recent.state == {"cart": []}
        assert [
            e.content.parts[0].text for e in recent.events if e.content and e.content.parts
        ] == [
            "message 0",
            "message 1",
        ]

    asyncio.run(run())


def read_file(path: str) -> str:
    """Reads a file of the project."""
    return f"{path}:\n" + "".join(f"line {n} of {path}\n" for n in range(FILE_CHARS // 20))


def checked(contents: list[types.Content]) -> list[types.Content]:
    """The request, after checking the model takes it: each call answered in the content
    right after the one that makes it, no response without its call. (ADK sends calls
    without their ids, which are its own: they pair by name.)"""
    waiting: list[str] = []
    for content in contents:
        parts = content.parts or []
        responses = sorted(str(p.function_response.name) for p in parts if p.function_response)
        assert responses == sorted(waiting), f"calls {waiting} answered by {responses}"
        waiting = [str(p.function_call.name) for p in parts if p.function_call]
    return contents


class ScriptedModel(BaseLlm):
    """A model that asks for the file, then says it read it; every request checked."""

    model: str = "scripted"
    requests: list[list[types.Content]] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = checked(list(llm_request.contents))
        self.requests.append(contents)
        last = contents[-1].parts or []
        if any(p.function_response for p in last):
            answer = types.Part(text=f"read it ({len(self.requests)})")
        else:
            call = types.FunctionCall(name="read_file", args={"path": "a.py"})
            answer = types.Part(function_call=call)
        yield LlmResponse(content=types.Content(role="model", parts=[answer]))


def test_the_adk_runner_runs_turns_with_a_tool_while_the_store_compacts(address: str) -> None:
    model = ScriptedModel()
    agent = LlmAgent(
        name="coder", model=model, instruction="Read what is asked.", tools=[read_file]
    )
    service = SessionStoreSessionService(
        AsyncClient(address),
        model="gpt-4o",
        context_window_tokens=40_000,
        compaction=CompactionPolicy(keep_recent_tokens=4_000, threshold_ratio=0.3),
    )
    runner = Runner(app_name="coding", agent=agent, session_service=service)

    async def run() -> list[str]:
        await service.create_session(app_name="coding", user_id="ann", session_id="adk-run")
        answers = []
        for turn in range(8):
            message = types.Content(role="user", parts=[types.Part(text=f"read file {turn}")])
            final: Any = None
            async for event in runner.run_async(
                user_id="ann", session_id="adk-run", new_message=message
            ):
                if event.content and event.content.parts and event.content.parts[0].text:
                    final = event.content.parts[0].text
            answers.append(final)
        return answers

    answers = asyncio.run(run())
    assert answers == [f"read it ({2 * t + 2})" for t in range(8)]
    with Client(address) as client:
        assert client.list_compactions("adk-run", min_position=0).compactions, (
            "the store never compacted"
        )
    later = model.requests[-1]
    first_text = later[0].parts[0].text if later[0].parts else ""
    assert "compacted into the following summary" in str(first_text)
    assert sum(len(str(c.model_dump())) for c in later) < 4 * FILE_CHARS
