"""Group "peers": the same conversation stored by LangGraph, the OpenAI Agents SDK and us.

Each system gets the same turns (a user message and an assistant reply) on
the same PostgreSQL, one conversation at a time, and after each write reads
back what the next model call would need. A peer's cost per turn grows with
the conversation (each reads the whole history back), so the figures are the
throughput *at* 1,000 and at 10,000 turns: each run's conversation gets all
but its last 50 turns in one bulk write through the system's own API, then
those 50 are timed one by one. (Writing all 10,000 turn by turn, five times
per system, would take far too long: LangGraph's turn 1,000 takes ~0.1 s.)
Before the timed turns the store's read models catch up with the bulk write,
as they would have long before a real conversation's turn 1,000.

* LangGraph's PostgresSaver, used as a graph with ``MessagesState`` uses it:
  the ``messages`` channel holds the whole list (add_messages' result), one
  checkpoint is put per turn, and the latest checkpoint is read back with
  get_tuple(). A real ``graph.invoke`` writes more than this per turn (an
  input checkpoint, a loop checkpoint and the tasks' pending writes), so
  this is the cheapest honest form of a turn; LangGraph itself is not
  installed, only its checkpointer.
* The Agents SDK's SQLAlchemySession over asyncpg: add_items() with the two
  items, then get_items().
* The store through gRPC: one AppendEntries with the two entries that asks
  for the view after it (view_after_append) naming the view the client holds
  (held_version, held_hash), so the answer carries only the messages appended
  since; the client decodes them and adds them to the messages it keeps, so
  it too holds the whole conversation. The same turn as two calls
  (AppendEntries, then GetPromptView with the held view) is reported
  alongside, without a target.

The peers are imported here, lazily, so nothing else depends on them.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from domain.session_appends import MAX_ENTRIES_PER_APPEND
from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.bench import turns
from tests.bench.config import Context
from tests.bench.report import Result, Target, median
from tests.bench.server import POSTGRES_URL, Database, database

SYSTEMS = ("sessionstore (gRPC)", "LangGraph PostgresSaver", "Agents SDK SQLAlchemySession")
# The store's turn as two calls: reported, compared with nothing.
TWO_CALLS = "sessionstore (gRPC), append then view"


# -- the store ----------------------------------------------------------------------------


class _HeldView:
    """What a client of the store keeps between turns: the messages of the view it
    last sent, and that view's version and hash. Each GetPromptView names the held
    view, and the store answers only the messages appended since (or, when
    something before them changed, the whole view)."""

    def __init__(self, stub: turns.Stub, session_id: str) -> None:
        self.stub = stub
        self.session_id = session_id
        self.messages: list[Any] = []
        self.held: tuple[int, str] | None = None

    def refresh(self) -> list[Any]:
        request = pb.GetPromptViewRequest(session_id=self.session_id)
        if self.held is not None:
            request.held_version, request.held_hash = self.held
        return self._take(self.stub.GetPromptView(request))

    def append(self, entries: list[pb.Entry]) -> list[Any]:
        """One turn in one call: the append, answered with the view after it."""
        wanted = pb.ViewAfterAppend()
        if self.held is not None:
            wanted.held_version, wanted.held_hash = self.held
        request = pb.AppendEntriesRequest(
            session_id=self.session_id, entries=entries, view_after_append=wanted
        )
        response = self.stub.AppendEntries(request)
        assert not response.view_after_append_error, response.view_after_append_error
        return self._take(response.view_after_append)

    def _take(self, view: pb.PromptView) -> list[Any]:
        new = json.loads(view.messages_json)
        if view.appended:
            self.messages.extend(new)
        else:
            self.messages = new
        self.held = (view.version, view.request_hash)
        return self.messages


def _ours(stub: turns.Stub, before: int, count: int, *, one_call: bool = True) -> list[float]:
    session_id = turns.create(stub)
    chat = [e for n in range(before) for e in (turns.user(n), turns.answer(n))]
    for first in range(0, len(chat), MAX_ENTRIES_PER_APPEND):
        turns.append(stub, session_id, chat[first : first + MAX_ENTRIES_PER_APPEND])
    client = _HeldView(stub, session_id)
    client.refresh()
    # The build's own follow-up work settles first: the read models project
    # the bulk write in the background, ~15 ms of CPU for 1,000 turns, which
    # would otherwise land on the first timed turns (a peer's bulk write has
    # no follow-up). The timed turns' own projection still runs while timed.
    stub.ListSessions(pb.ListSessionsRequest(page_size=1, min_position=0))
    times: list[float] = []
    for n in range(before, before + count):
        began = time.perf_counter()
        if one_call:
            client.append([turns.user(n), turns.answer(n)])
        else:
            turns.append(stub, session_id, [turns.user(n), turns.answer(n)])
            client.refresh()
        times.append(time.perf_counter() - began)
    assert len(client.messages) == 2 * (before + count)
    return times


# -- LangGraph ----------------------------------------------------------------------------


def _langgraph(db: Database, before: int, count: int) -> list[float]:
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6
    from langgraph.checkpoint.postgres import PostgresSaver

    url = f"{POSTGRES_URL}?options=-csearch_path%3D{db.schema}"
    times: list[float] = []
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        thread: RunnableConfig = {
            "configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}
        }
        state: dict[str, Any] = {"config": thread, "messages": [], "version": None}

        def turn(first: int, last: int) -> None:
            # What add_messages does with new messages: ids given, appended to the list.
            new = [
                message
                for n in range(first, last)
                for message in (
                    HumanMessage(content=turns.TEXTS.user[n % 64], id=str(uuid.uuid4())),
                    AIMessage(content=turns.TEXTS.answer[n % 64], id=str(uuid.uuid4())),
                )
            ]
            messages = [*state["messages"], *new]
            version = saver.get_next_version(state["version"], None)
            checkpoint = empty_checkpoint()
            checkpoint["id"] = str(uuid6(clock_seq=last))
            checkpoint["channel_values"] = {"messages": messages}
            checkpoint["channel_versions"] = {"messages": version}
            checkpoint["versions_seen"] = {"chatbot": {"messages": version}}
            checkpoint["updated_channels"] = ["messages"]
            state["config"] = saver.put(
                state["config"],
                checkpoint,
                {"source": "loop", "step": last, "parents": {}},
                {"messages": version},
            )
            latest = saver.get_tuple(thread)
            assert latest is not None
            state["messages"] = latest.checkpoint["channel_values"]["messages"]
            state["version"] = version

        if before:
            turn(0, before)
        for n in range(before, before + count):
            began = time.perf_counter()
            turn(n, n + 1)
            times.append(time.perf_counter() - began)
        assert len(state["messages"]) == 2 * (before + count)
    return times


# -- OpenAI Agents SDK --------------------------------------------------------------------


def _agents(db: Database, before: int, count: int) -> list[float]:
    return asyncio.run(_agents_async(db, before, count))


def _agent_items(first: int, last: int) -> list[dict[str, Any]]:
    """The turns as the SDK stores them: an input item, then the model's output message."""
    items: list[dict[str, Any]] = []
    for n in range(first, last):
        items.append({"role": "user", "content": turns.TEXTS.user[n % 64]})
        items.append(
            {
                "id": f"msg_{uuid.uuid4().hex}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": turns.TEXTS.answer[n % 64], "annotations": []}
                ],
            }
        )
    return items


async def _agents_async(db: Database, before: int, count: int) -> list[float]:
    from agents.extensions.memory import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    url = POSTGRES_URL.replace("postgresql://", "postgresql+asyncpg://", 1)
    engine = create_async_engine(url, connect_args={"server_settings": {"search_path": db.schema}})
    times: list[float] = []
    try:
        session = SQLAlchemySession(uuid.uuid4().hex, engine=engine, create_tables=True)
        items: list[Any] = []
        if before:
            await session.add_items(_agent_items(0, before))  # type: ignore[arg-type]
        for n in range(before, before + count):
            began = time.perf_counter()
            await session.add_items(_agent_items(n, n + 1))  # type: ignore[arg-type]
            items = await session.get_items()
            times.append(time.perf_counter() - began)
        assert len(items) == 2 * (before + count)
    finally:
        await engine.dispose()
    return times


# -- the group ----------------------------------------------------------------------------


def peers(ctx: Context) -> None:
    if "postgres" not in ctx.backends:
        return
    for total in ctx.scale.peer_turns:
        _peers_at(ctx, total)


def _peers_at(ctx: Context, total: int) -> None:
    count = ctx.scale.peer_timed_turns
    before = total - count
    print(f"[peers] postgres: turns {before + 1:,} to {total:,} timed per run", flush=True)
    times: dict[str, list[list[float]]] = {name: [] for name in (*SYSTEMS, TWO_CALLS)}
    stub = ctx.shared("postgres")[1].stub()
    with database("postgres") as graph_db, database("postgres") as agents_db:
        runners: dict[str, Callable[[], list[float]]] = {
            SYSTEMS[0]: lambda: _ours(stub, before, count),
            SYSTEMS[1]: lambda: _langgraph(graph_db, before, count),
            SYSTEMS[2]: lambda: _agents(agents_db, before, count),
            TWO_CALLS: lambda: _ours(stub, before, count, one_call=False),
        }
        # Warm each once (imports, connections, table creation) outside the runs.
        _ours(stub, 0, 3)
        _ours(stub, 0, 3, one_call=False)
        _langgraph(graph_db, 0, 3)
        _agents(agents_db, 0, 3)
        # Rep-major: each rep runs all three, so drift affects them alike.
        for _ in range(ctx.scale.peer_reps):
            for name, run in runners.items():
                times[name].append(run())
    _report(ctx, times, total)


def _report(ctx: Context, times: dict[str, list[list[float]]], total: int) -> None:
    rates = {name: [len(run) / sum(run) for run in runs] for name, runs in times.items()}
    ours = SYSTEMS[0]
    at = f"at {total:,} turns"
    ctx.report.add(
        Result("peers", "postgres", f"{ours}, {at}", median(rates[ours]), "turns/s", rates[ours])
    )
    two = [t / o for t, o in zip(rates[TWO_CALLS], rates[ours], strict=True)]
    ctx.report.add(
        Result(
            "peers",
            "postgres",
            f"{TWO_CALLS}, {at}",
            median(rates[TWO_CALLS]),
            "turns/s",
            rates[TWO_CALLS],
            ratio=median(two),
            ratio_of="two calls/one call",
        )
    )
    for peer in SYSTEMS[1:]:
        ratios = [o / p for o, p in zip(rates[ours], rates[peer], strict=True)]
        ctx.report.add(
            Result(
                "peers",
                "postgres",
                f"{peer}, {at}",
                median(rates[peer]),
                "turns/s",
                rates[peer],
                target=Target(">=", 10.0, "ours >= 10x peer", on="ratio"),
                ratio=median(ratios),
                ratio_of="ours/peer",
            )
        )
    ctx.report.keep(
        f"peers.{total}",
        {
            "conversation_turns": total,
            "timed_turns_per_run": len(times[ours][0]),
            "turns_per_s": rates,
            "turn_ms": {
                n: [[round(x * 1e3, 3) for x in run] for run in runs] for n, runs in times.items()
            },
        },
    )
