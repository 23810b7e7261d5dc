"""A compiled LangGraph agent (a model node and a tool node) on the saver and a running
store: turns with a tool through a window small enough that the store compacts during
the run, the model fed the store's prompt view, checked valid every call; interrupt and
resume; the state's history; and going back to an earlier checkpoint (time travel)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from sessionstore_client import Client, CompactionPolicy
from sessionstore_client.langgraph import SessionStoreSaver

from services.grpc.server import RunningServer

FILE_CHARS = 15_000


@tool
def read_file(path: str) -> str:
    """Reads a file of the project."""
    return f"{path}:\n" + "".join(f"line {n} of {path}\n" for n in range(FILE_CHARS // 20))


def checked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request, after checking a provider takes it: each call answered right after
    the message that makes it, no result without its call."""
    waiting: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in waiting, f"a result without its call: {message}"
            waiting.discard(message["tool_call_id"])
            continue
        assert not waiting, f"calls {waiting} unanswered before {message}"
        waiting = {call["id"] for call in message.get("tool_calls") or ()}
    return messages


class Agent:
    """The graph, with a model that answers from the store's prompt view."""

    def __init__(self, saver: SessionStoreSaver, **compile_options: Any) -> None:
        self.saver = saver
        self.requests: list[list[dict[str, Any]]] = []
        builder = StateGraph(MessagesState)
        builder.add_node("model", self.model)
        builder.add_node("tools", ToolNode([read_file]))
        builder.add_edge(START, "model")
        builder.add_conditional_edges("model", tools_condition)
        builder.add_edge("tools", "model")
        self.graph: CompiledStateGraph[Any] = builder.compile(checkpointer=saver, **compile_options)

    def model(self, state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        sent = checked(self.saver.prompt_messages(config))
        self.requests.append(sent)
        last = sent[-1]
        if last["role"] == "tool":
            return {"messages": [AIMessage(content=f"read it ({len(self.requests)})")]}
        call = {"id": f"call_{len(self.requests)}", "name": "read_file", "args": {"path": "a.py"}}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    def turn(self, config: RunnableConfig, text: str | None) -> dict[str, Any]:
        given = {"messages": [HumanMessage(text)]} if text is not None else None
        result: dict[str, Any] = self.graph.invoke(given, config, durability="sync")
        return result


@pytest.fixture
def address(server: RunningServer) -> str:
    return f"127.0.0.1:{server.port}"


@pytest.fixture
def client(address: str) -> Iterator[Client]:
    with Client(address) as client:
        yield client


def thread(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def test_turns_with_a_tool_run_while_the_store_compacts(address: str, client: Client) -> None:
    saver = SessionStoreSaver(
        Client(address),
        model="gpt-4o",
        context_window_tokens=40_000,
        compaction=CompactionPolicy(keep_recent_tokens=4_000, threshold_ratio=0.3),
    )
    agent = Agent(saver)
    config = thread("graph-compacts")
    for turn in range(8):
        result = agent.turn(config, f"read file {turn}")
        assert result["messages"][-1].content == f"read it ({2 * turn + 2})"
    assert client.list_compactions("graph-compacts", min_position=0).compactions, "never compacted"
    later = agent.requests[-1]
    assert "compacted into the following summary" in later[0]["content"]
    assert len(json.dumps(later)) < 4 * FILE_CHARS  # not every file read so far
    # The graph's own state keeps every message; the checkpoints hold it all.
    assert len(agent.graph.get_state(config).values["messages"]) == 8 * 4


def test_interrupt_resume_history_and_time_travel(address: str) -> None:
    saver = SessionStoreSaver(Client(address))
    agent = Agent(saver, interrupt_before=["tools"])
    config = thread("graph-travels")

    agent.turn(config, "read a.py")
    assert agent.graph.get_state(config).next == ("tools",)  # interrupted before the tool
    done = agent.turn(config, None)  # resumed
    assert done["messages"][-1].content == "read it (2)"
    agent.turn(config, "and again")
    agent.turn(config, None)

    history = list(agent.graph.get_state_history(config))
    steps = [s.metadata["step"] for s in history if s.metadata]
    assert steps == sorted(steps, reverse=True) and len(history) >= 8
    # Back to the state after the first answer, saying something else there instead.
    first_answer = next(
        s for s in history if s.values.get("messages") and len(s.values["messages"]) == 4
    )
    branch = agent.graph.update_state(
        first_answer.config, {"messages": [HumanMessage("read b.py instead")]}, as_node=START
    )
    assert agent.graph.get_state(branch).next == ("model",)
    agent.turn(branch, None)  # the model asks for the tool: interrupted again
    agent.turn(config, None)  # resumed from the latest checkpoint, the branch's
    state = agent.graph.get_state(config).values["messages"]
    assert [m.content for m in state if isinstance(m, HumanMessage)] == [
        "read a.py",
        "read b.py instead",
    ]
    assert isinstance(state[-2], ToolMessage)
    # The model saw the branch, not the turn it replaced.
    seen = [m["content"] for m in agent.requests[-1] if m["role"] == "user"]
    assert seen == ["read a.py", "read b.py instead"]
    assert saver.prompt_messages(config)[-1]["content"] == state[-1].content


def test_a_new_message_while_a_call_waits_abandons_the_call(address: str, client: Client) -> None:
    saver = SessionStoreSaver(Client(address))
    agent = Agent(saver, interrupt_before=["tools"])
    config = thread("graph-moves-on")

    agent.turn(config, "read a.py")  # the model asks for the tool: interrupted before it
    agent.turn(config, "never mind, read b.py")  # the user moved on, the call unanswered
    state = agent.graph.get_state(config)
    assert [m.content for m in state.values["messages"] if isinstance(m, HumanMessage)] == [
        "read a.py",
        "never mind, read b.py",
    ]
    assert state.next == ("tools",)  # the second call waits, the checkpoint saved
    # The model was sent a prompt providers take: the first call closed, as never run.
    closed = agent.requests[-1][2]
    assert closed["role"] == "tool" and "abandoned" in closed["content"]
    assert client.get_session("graph-moves-on").open_tool_call_ids == ["call_2"]

    # The first call's result, given late, is kept in the state; the prompt, where the
    # call has its answer already, leaves it out (checked valid on the next turn).
    late = ToolMessage(content="a.py: nothing", tool_call_id="call_1")
    agent.graph.update_state(config, {"messages": [late]})
    assert agent.graph.get_state(config).values["messages"][-1] == late
    agent.turn(config, "thanks")
    assert [m["content"] for m in agent.requests[-1] if m["role"] == "user"][-1] == "thanks"


def test_a_blank_message_is_kept_as_given(address: str) -> None:
    saver = SessionStoreSaver(Client(address))
    agent = Agent(saver)
    config = thread("graph-blank")
    assert agent.turn(config, "  ")["messages"][-1].content == "read it (2)"
    assert agent.graph.get_state(config).values["messages"][0].content == "  "
    assert agent.requests[0][0] == {"role": "user", "content": "(empty message)"}
