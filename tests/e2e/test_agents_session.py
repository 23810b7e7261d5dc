"""The OpenAI Agents SDK session on a running store: the protocol, every item type the
SDK writes coming back equal, pop and clear recorded as events, concurrent writers, and
the SDK's own Runner with a scripted model and a tool, through a window small enough
that the store compacts during the run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any, cast

import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.items import TResponseInputItem
from agents.memory import Session, is_openai_responses_compaction_aware_session
from agents.testing import ModelCall, ScriptedModel, assistant_message, function_call
from sessionstore_client import (
    AsyncClient,
    Client,
    CompactionPolicy,
    EntryRetracted,
    PromptFormat,
    SessionCleared,
)
from sessionstore_client.agents import SessionStoreSession

from services.grpc.server import RunningServer

set_tracing_disabled(True)  # offline: no traces to export

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "What is in the repository?"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "and this picture"},
            {"type": "input_image", "image_url": "https://x.test/a.png", "detail": "auto"},
        ],
    },
    {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "List the files first."}],
        "encrypted_content": "gAAAAB-opaque-reasoning",
    },
    {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "ls",
        "arguments": '{"path": "."}',
        "status": "completed",
    },
    {
        "id": "fc_2",
        "type": "function_call",
        "call_id": "call_2",
        "name": "cat",
        "arguments": '{"path": "README.md"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "README.md\nsrc/"},
    {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": [{"type": "input_text", "text": "# Demo"}],
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "A demo project.", "annotations": [], "logprobs": []}
        ],
    },
    {"id": "cmp_1", "type": "compaction", "encrypted_content": "gAAAAB-opaque-compaction"},
    {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {"type": "search"}},
]


@pytest.fixture
def address(server: RunningServer) -> str:
    return f"127.0.0.1:{server.port}"


@pytest.fixture
def client(address: str) -> Iterator[Client]:
    with Client(address) as client:
        yield client


def items(values: list[dict[str, Any]]) -> list[TResponseInputItem]:
    return cast(list[TResponseInputItem], values)


def test_it_is_an_sdk_session_and_items_come_back_equal(address: str) -> None:
    async def run() -> None:
        session = SessionStoreSession("agents-round-trip", AsyncClient(address))
        assert isinstance(session, Session)
        assert is_openai_responses_compaction_aware_session(session)
        assert await session.get_items() == []
        await session.add_items(items(ITEMS[:3]))
        await session.add_items(items(ITEMS[3:]))
        assert await session.get_items() == ITEMS
        assert await session.get_items(limit=2) == ITEMS[-2:]

    asyncio.run(run())


def test_pop_and_clear_are_events_and_leave_the_views(address: str, client: Client) -> None:
    async def run() -> None:
        session = SessionStoreSession("agents-pop", AsyncClient(address))
        await session.add_items(items(ITEMS[:5]))  # ends with two calls made together
        assert await session.pop_item() == ITEMS[4]
        assert await session.get_items() == ITEMS[:4]
        assert await session.pop_item() == ITEMS[3]
        assert await session.pop_item() == ITEMS[2]
        assert await session.get_items() == ITEMS[:2]
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None
        await session.add_items(items(ITEMS[:1]))
        assert await session.get_items() == ITEMS[:1]

    asyncio.run(run())
    events = [e.event for e in client.read_events("agents-pop")]
    assert sum(isinstance(e, EntryRetracted) for e in events) == 3
    assert sum(isinstance(e, SessionCleared) for e in events) == 1
    # The history keeps what the views dropped: the view as of the append has it all.
    assert len(client.get_durable_log("agents-pop", version=2).entries) == 4


def test_concurrent_adds_lose_nothing(address: str) -> None:
    async def run() -> None:
        client = AsyncClient(address)
        first = SessionStoreSession("agents-concurrent", client)
        second = SessionStoreSession("agents-concurrent", client)
        writes = [
            session.add_items(items([{"role": "user", "content": f"{name} {i}"}]))
            for i in range(15)
            for name, session in (("a", first), ("b", second))
        ]
        await asyncio.gather(*writes)
        stored = await first.get_items()
        assert sorted(str(i["content"]) for i in stored) == sorted(
            f"{name} {i}" for i in range(15) for name in "ab"
        )

    asyncio.run(run())


def test_a_message_while_a_call_is_open_abandons_the_call(address: str, client: Client) -> None:
    """What the SDK's own sessions take: a user message before a call's output (the run
    failed, or was cancelled, before the tool answered), the output coming later."""
    call = ITEMS[3]
    user = {"role": "user", "content": "never mind"}
    late = {"type": "function_call_output", "call_id": "call_1", "output": "README.md"}

    async def run() -> list[dict[str, Any]]:
        session = SessionStoreSession("agents-moves-on", AsyncClient(address))
        await session.add_items(items([call]))
        await session.add_items(items([user]))
        await session.add_items(items([late]))
        return cast(list[dict[str, Any]], await session.get_items())

    got = asyncio.run(run())
    # The model is sent the call closed, as never run: one output for the call (a second
    # one would be refused); the late output is kept in the log, not sent.
    assert got[0] == call and got[2:] == [user]
    assert got[1]["call_id"] == "call_1" and "abandoned" in got[1]["output"]
    assert client.get_session("agents-moves-on").open_tool_call_ids == []
    view = json.loads(client.get_prompt_view("agents-moves-on").messages_json)
    assert [m["role"] for m in view] == ["assistant", "tool", "user"]
    log = client.get_durable_log("agents-moves-on")
    assert "README.md" in log.entries[-1].content[0].text


def test_empty_input_is_kept_as_given(address: str, client: Client) -> None:
    """What the SDK's own sessions take: the runner's item for an empty input."""
    empty = [{"role": "user", "content": ""}, {"role": "user", "content": []}]
    model = ScriptedModel([{"responder": lambda call: [assistant_message("yes?")]}])
    agent = Agent(name="assistant", instructions="Reply.", model=model)

    async def run() -> list[TResponseInputItem]:
        session = SessionStoreSession("agents-empty", AsyncClient(address))
        await session.add_items(items(empty[1:]))
        result = await Runner.run(agent, "", session=session)
        assert result.final_output == "yes?"
        return await session.get_items()

    got = asyncio.run(run())
    assert got[:2] == [empty[1], empty[0]]
    view = json.loads(client.get_prompt_view("agents-empty").messages_json)
    assert [m["content"] for m in view[:2]] == ["(empty message)"] * 2


# -- the SDK's own runner -------------------------------------------------------------

FILE_CHARS = 15_000


@function_tool
def read_file(path: str) -> str:
    """Reads a file of the project."""
    return f"{path}:\n" + "".join(f"line {n} of {path}\n" for n in range(FILE_CHARS // 20))


def checked_request(call: ModelCall) -> list[dict[str, Any]]:
    """The request's items, after checking it is one a provider takes: every call
    answered right after it is made, no result without its call."""
    sent = cast(list[dict[str, Any]], call.input)
    open_calls: set[str] = set()
    made: set[str] = set()
    for item in sent:
        kind = item.get("type")
        if kind == "function_call":
            open_calls.add(item["call_id"])
            made.add(item["call_id"])
        elif kind == "function_call_output":
            assert item["call_id"] in made, f"a result without its call: {item['call_id']}"
            open_calls.discard(item["call_id"])
        else:
            assert not open_calls, f"{item} follows unanswered calls {open_calls}"
    return sent


def test_the_sdk_runner_runs_turns_with_a_tool_while_the_store_compacts(
    address: str, client: Client
) -> None:
    requests: list[list[dict[str, Any]]] = []

    def respond(call: ModelCall) -> list[Any]:
        sent = checked_request(call)
        requests.append(sent)
        last = sent[-1]
        if last.get("type") == "function_call_output":
            return [assistant_message(f"read it ({len(requests)})")]
        n = len(requests)
        return [function_call("read_file", {"path": f"f{n}.py"}, call_id=f"c{n}")]

    model = ScriptedModel([{"responder": respond}] * 16)
    agent = Agent(name="coder", instructions="Read what is asked.", model=model, tools=[read_file])
    session = SessionStoreSession(
        "agents-run",
        AsyncClient(address),
        model="gpt-4o",
        context_window_tokens=40_000,
        compaction=CompactionPolicy(keep_recent_tokens=4_000, threshold_ratio=0.3),
    )

    async def run() -> list[str]:
        answers = []
        for turn in range(8):
            result = await Runner.run(agent, f"read file number {turn}", session=session)
            answers.append(str(result.final_output))
        return answers

    answers = asyncio.run(run())
    assert answers == [f"read it ({2 * t + 2})" for t in range(8)]
    compactions = client.list_compactions("agents-run", min_position=0).compactions
    assert compactions, "the store never compacted during the run"
    later = requests[-1]
    assert "compacted into the following summary" in str(later[0]["content"])
    assert later[-2]["type"] == "function_call" and later[-1]["type"] == "function_call_output"
    assert len(json.dumps(later)) < len(json.dumps(requests[0])) + 8 * FILE_CHARS


def test_reasoning_items_go_back_verbatim_in_the_stores_responses_view(
    address: str, client: Client
) -> None:
    """A reasoning item the runtime adds is OpenAI's own item in the store: the Responses
    view carries it byte for byte, Anthropic's leaves it out and says so."""

    async def run() -> None:
        session = SessionStoreSession("agents-reasoning", AsyncClient(address))
        await session.add_items(items(ITEMS[:5]))
        await session.add_items(items(ITEMS[5:7]))

    asyncio.run(run())
    stored = json.dumps(ITEMS[2], ensure_ascii=False, separators=(",", ":"))
    responses = client.get_prompt_view("agents-reasoning", format=PromptFormat.OPENAI_RESPONSES)
    assert responses.messages_json.count(stored) == 1
    anthropic = client.get_prompt_view("agents-reasoning", format=PromptFormat.ANTHROPIC)
    assert stored not in anthropic.messages_json
    assert [(o.provider, o.type) for o in anthropic.omitted] == [("openai", "reasoning")]
