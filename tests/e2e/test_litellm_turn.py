"""complete_turn against a running store and the loopback provider, which speaks OpenAI's
and Anthropic's real protocols to litellm's real client: turns with a tool through a
window small enough that the store compacts, every request checked; a provider's
overflow reported and retried, at most 3 times; the same in Anthropic's protocol and
with asyncio; answers the store could not hold as they came (empty, arguments cut
short) stored all the same."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from sessionstore_client import (
    AsyncClient,
    Client,
    CompactionPolicy,
    Entry,
    OverflowReported,
    Role,
    SessionSettings,
    SystemPrompt,
    TextBlock,
    Tool,
    ToolResultBlock,
)
from sessionstore_client.litellm import (
    EMPTY_ANSWER,
    ContextOverflow,
    acomplete_turn,
    complete_turn,
)

from services.grpc.server import RunningServer
from tests.support.fake_provider import FakeProvider, Received, call, cut_short, fail, reply

FILE_CHARS = 15_000


@pytest.fixture
def client(server: RunningServer) -> Iterator[Client]:
    with Client(f"127.0.0.1:{server.port}") as client:
        yield client


def user(text: str) -> Entry:
    return Entry(role=Role.USER, content=[TextBlock(text)])


def file_text(path: str) -> str:
    return f"{path}:\n" + "".join(f"line {n} of {path}\n" for n in range(FILE_CHARS // 20))


def checked(received: Received) -> list[dict[str, Any]]:
    """An OpenAI request's messages, after checking the provider takes them."""
    waiting: set[str] = set()
    for message in received.messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in waiting, f"a result without its call: {message}"
            waiting.discard(message["tool_call_id"])
            continue
        assert not waiting, f"calls {waiting} unanswered before {message}"
        waiting = {c["id"] for c in message.get("tool_calls") or ()}
    return received.messages


def test_turns_with_a_tool_run_while_the_store_compacts(
    client: Client, provider: FakeProvider
) -> None:
    session = client.create_session(
        settings=SessionSettings(
            model="gpt-4o",
            context_window_tokens=40_000,
            compaction=CompactionPolicy(keep_recent_tokens=4_000, threshold_ratio=0.3),
        )
    )
    options = {"api_base": provider.openai_base, "api_key": "sk-test"}
    for turn in range(8):
        provider.script(call(f"call_{turn}", "read_file", path=f"f{turn}.py"), reply("read it"))
        client.append_entries(session.id, entries=[user(f"read file {turn}")])
        asked = complete_turn(client, session.id, model="openai/gpt-4o", **options)
        (tool_call,) = asked.tool_calls
        assert json.loads(tool_call.arguments_json) == {"path": f"f{turn}.py"}
        result = ToolResultBlock(tool_call.id, file_text(f"f{turn}.py"))
        client.append_entries(session.id, entries=[Entry(role=Role.TOOL, content=[result])])
        answered = complete_turn(client, session.id, model="openai/gpt-4o", **options)
        assert answered.text == "read it" and answered.attempts == 1
    for received in provider.requests:
        checked(received)
    assert client.list_compactions(session.id, min_position=0).compactions, (
        "the store never compacted"
    )
    last = provider.requests[-1].messages
    assert "compacted into the following summary" in last[0]["content"]
    # The answers carry the provider's usage and the view they answered.
    stored = client.get_entry(session.id, entry_id=answered.entry.id)
    assert stored.usage is not None and stored.usage.input_tokens > 0
    assert stored.prompt_ref is not None
    assert stored.prompt_ref.hash == answered.view.request_hash


def test_an_overflow_is_reported_and_retried_at_most_three_times(
    client: Client, provider: FakeProvider
) -> None:
    session = client.create_session(settings=SessionSettings(model="gpt-4o"))
    client.append_entries(session.id, entries=[user("hello")])
    options = {"api_base": provider.openai_base, "api_key": "sk-test"}
    provider.script(fail("overflow"), reply("hi"))
    turn = complete_turn(client, session.id, model="openai/gpt-4o", **options)
    assert turn.text == "hi" and turn.attempts == 2
    reports = [e for e in client.read_events(session.id) if isinstance(e.event, OverflowReported)]
    assert len(reports) == 1

    client.append_entries(session.id, entries=[user("again")])
    provider.script(*[fail("overflow")] * 4)
    with pytest.raises(ContextOverflow, match="3 times"):
        complete_turn(client, session.id, model="openai/gpt-4o", **options)
    reports = [e for e in client.read_events(session.id) if isinstance(e.event, OverflowReported)]
    assert len(reports) == 1 + 3
    assert len(provider.requests) == 2 + 4


def test_a_request_too_large_in_bytes_is_reported_and_retried(
    client: Client, provider: FakeProvider
) -> None:
    """Anthropic's 413 reaches litellm's caller as a plain BadRequestError (status 400):
    the store's classifier takes it as an overflow, as litellm's does not."""
    model = "anthropic/claude-sonnet-4-5"
    session = client.create_session(settings=SessionSettings(model=model))
    client.append_entries(session.id, entries=[user("hello")])
    options = {"api_base": provider.url, "api_key": "sk-ant-test"}
    provider.script(fail("too_large"), reply("hi"))
    turn = complete_turn(client, session.id, model=model, **options)
    assert turn.text == "hi" and turn.attempts == 2
    reports = [e for e in client.read_events(session.id) if isinstance(e.event, OverflowReported)]
    assert len(reports) == 1


# The loopback provider refuses any request body over this many bytes, as Anthropic
# refuses one over its limit (32 MB there; small here, so a few turns reach it).
BYTE_LIMIT = 100_000


def play_against_a_byte_limit(
    client: Client, tools: list[dict[str, Any]] | None = None
) -> tuple[str, list[Received]]:
    """16 turns, each reading a file, against the loopback provider refusing request
    bodies over BYTE_LIMIT (Anthropic's 413); ``tools`` are the client's own, sent in
    place of the session's. The session, and every request the provider got."""
    model = "anthropic/claude-sonnet-4-5"
    session = client.create_session(settings=SessionSettings(model=model))
    # Anthropic's API wants the tools with calls.
    read_file = Tool("read_file", "Reads a file.", json.dumps({"type": "object"}))
    client.set_system_prompt(session.id, system_prompt=SystemPrompt(tools=[read_file]))
    options: dict[str, Any] = {"api_base": "", "api_key": "sk-ant-test"}
    if tools is not None:
        options["tools"] = tools
    with FakeProvider(max_request_bytes=BYTE_LIMIT) as provider:
        options["api_base"] = provider.url
        for turn in range(16):
            provider.script(call(f"toolu_{turn}", "read_file", path=f"f{turn}.py"))
            client.append_entries(session.id, entries=[user(f"read file {turn}")])
            asked = complete_turn(client, session.id, model=model, **options)
            (tool_call,) = asked.tool_calls
            result = ToolResultBlock(tool_call.id, file_text(f"f{turn}.py"))
            client.append_entries(session.id, entries=[Entry(role=Role.TOOL, content=[result])])
            provider.script(reply(f"read file {turn}"))
            answered = complete_turn(client, session.id, model=model, **options)
            assert answered.text == f"read file {turn}"
        return session.id, list(provider.requests)


def overflow_reports(client: Client, session_id: str) -> list[OverflowReported]:
    return [
        e.event for e in client.read_events(session_id) if isinstance(e.event, OverflowReported)
    ]


def test_a_limit_in_bytes_is_learned_so_no_later_request_exceeds_it(
    client: Client, server: RunningServer
) -> None:
    """A request refused for its bytes (HTTP 413) taught nothing: the prompt shrank,
    grew back over the limit a few turns later, and the provider refused it again,
    every few turns. The refused request's size, as the client sent it, is now a limit
    the requests keep under."""
    session_id, requests = play_against_a_byte_limit(client)
    refused = [n for n, r in enumerate(requests) if r.refused]
    assert refused and refused[0] < 20, "the conversation never reached the limit"
    assert [requests[n].refused for n in refused] == ["too_large"]
    assert all(r.size <= BYTE_LIMIT for r in requests[refused[0] + 1 :])
    # The lesson is recorded with the report, from the client's figure: its measure of
    # the request it sent, within a few percent of the body the provider got.
    (report,) = overflow_reports(client, session_id)
    assert report.kind == "request_too_large" and report.learned_window_tokens == 0
    refused_size = requests[refused[0]].size
    assert abs(report.request_bytes_sent - refused_size) < refused_size * 0.1
    assert report.learned_request_bytes > BYTE_LIMIT * 0.7
    context = client.get_context_report(session_id)
    assert context.learned_request_bytes == report.learned_request_bytes
    assert context.request_bytes_allowed == int(report.learned_request_bytes * 0.8)
    # No window was learned from it: the model's stays in force.
    assert (context.window.window_tokens, context.window.source) == (200_000, "model")


def test_a_limit_in_bytes_holds_for_a_request_larger_than_the_view(
    client: Client, server: RunningServer
) -> None:
    """The client sends tools of its own, which the store's rendering of the view does
    not hold: the request it sends is much larger than the view. Learned from the
    store's rendering, the limit left too little room below it, and the provider
    refused a request again once the conversation grew back; learned from the request
    as sent, it keeps every later request under the limit."""
    described = "Runs a step of the build. " * 150  # about 4 KB each, 80 KB in all
    tools = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": described,
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
        for name in ["read_file", *(f"build_step_{n}" for n in range(19))]
    ]
    session_id, requests = play_against_a_byte_limit(client, tools)
    refused = [n for n, r in enumerate(requests) if r.refused]
    assert [requests[n].refused for n in refused] == ["too_large"], [
        (n, requests[n].size) for n in refused
    ]
    assert all(r.size <= BYTE_LIMIT for r in requests[refused[0] + 1 :])
    (report,) = overflow_reports(client, session_id)
    # What the client added is in its figure, and taken off the view's limit.
    assert report.request_bytes_sent > BYTE_LIMIT
    assert report.learned_request_bytes < report.request_bytes_sent - 80_000


def test_a_bad_request_that_is_no_overflow_raises_the_providers_error(
    server: RunningServer, provider: FakeProvider
) -> None:
    options = {"api_base": provider.openai_base, "api_key": "sk-test"}

    async def run() -> None:
        async with AsyncClient(f"127.0.0.1:{server.port}") as aclient:
            session = await aclient.create_session(settings=SessionSettings(model="gpt-4o"))
            await aclient.append_entries(session.id, entries=[user("hello")])
            provider.script(fail("bad_request"))
            with pytest.raises(litellm.BadRequestError, match="temperature"):
                await acomplete_turn(aclient, session.id, model="openai/gpt-4o", **options)
            events = [e.event async for e in aclient.read_events(session.id)]
            assert not [e for e in events if isinstance(e, OverflowReported)]

    asyncio.run(run())
    client = Client(f"127.0.0.1:{server.port}")
    session = client.create_session(settings=SessionSettings(model="gpt-4o"))
    client.append_entries(session.id, entries=[user("hello")])
    provider.script(fail("bad_request"))
    with pytest.raises(litellm.BadRequestError, match="temperature"):
        complete_turn(client, session.id, model="openai/gpt-4o", **options)
    assert len(provider.requests) == 2  # one try each, no retry after the refusal


def test_anthropic_protocol_and_asyncio(server: RunningServer, provider: FakeProvider) -> None:
    async def run() -> None:
        async with AsyncClient(f"127.0.0.1:{server.port}") as client:
            model = "anthropic/claude-sonnet-4-5"
            session = await client.create_session(settings=SessionSettings(model=model))
            # The stored tools go with every turn (Anthropic's API wants them with calls).
            ls = Tool("ls", "Lists files.", json.dumps({"type": "object", "properties": {}}))
            await client.set_system_prompt(
                session.id, system_prompt=SystemPrompt(text="Be brief.", tools=[ls])
            )
            await client.append_entries(session.id, entries=[user("list the files")])
            options = {"api_base": provider.url, "api_key": "sk-ant-test"}
            provider.script(call("toolu_1", "ls", path="."), reply("two files"))
            asked = await acomplete_turn(client, session.id, model=model, **options)
            (tool_call,) = asked.tool_calls
            result = ToolResultBlock(tool_call.id, "a.py\nb.py")
            await client.append_entries(
                session.id, entries=[Entry(role=Role.TOOL, content=[result])]
            )
            answered = await acomplete_turn(client, session.id, model=model, **options)
            assert answered.text == "two files"
        last = provider.requests[-1]
        assert last.path == "/v1/messages"
        assert [t["name"] for t in last.body["tools"]] == ["ls"]
        kinds = [
            b["type"] for m in last.messages if isinstance(m["content"], list) for b in m["content"]
        ]
        assert "tool_use" in kinds and "tool_result" in kinds

    asyncio.run(run())


def test_an_empty_answer_and_arguments_cut_short_are_stored(
    client: Client, provider: FakeProvider
) -> None:
    session = client.create_session(settings=SessionSettings(model="gpt-4o"))
    client.append_entries(session.id, entries=[user("hello")])
    options = {"api_base": provider.openai_base, "api_key": "sk-test"}
    provider.script(reply(""))
    empty = complete_turn(client, session.id, model="openai/gpt-4o", **options)
    assert empty.text == EMPTY_ANSWER and empty.response.choices[0].message.content == ""
    stored = client.get_entry(session.id, entry_id=empty.entry.id)
    assert stored.metadata["empty_answer"] == "true"
    assert stored.usage is not None and stored.usage.input_tokens > 0

    client.append_entries(session.id, entries=[user("read it")])
    provider.script(cut_short("call_x", "read_file", '{"path": "REA'))
    cut = complete_turn(client, session.id, model="openai/gpt-4o", **options)
    (tool_call,) = cut.tool_calls
    assert tool_call.arguments_json == "{}"
    stored = client.get_entry(session.id, entry_id=cut.entry.id)
    assert stored.metadata["finish_reason"] == "length"
    assert json.loads(stored.metadata["unparsed_arguments"]) == {"call_x": '{"path": "REA'}
    assert client.get_session(session.id).version == cut.version


def test_an_empty_answer_is_stored_with_asyncio(
    server: RunningServer, provider: FakeProvider
) -> None:
    async def run() -> None:
        async with AsyncClient(f"127.0.0.1:{server.port}") as client:
            session = await client.create_session(settings=SessionSettings(model="gpt-4o"))
            await client.append_entries(session.id, entries=[user("hello")])
            options = {"api_base": provider.openai_base, "api_key": "sk-test"}
            provider.script(reply(""))
            turn = await acomplete_turn(client, session.id, model="openai/gpt-4o", **options)
            assert turn.text == EMPTY_ANSWER
            assert (await client.get_session(session.id)).version == turn.version

    asyncio.run(run())
