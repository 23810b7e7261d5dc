"""What the benchmarks write: realistic agent turns, and long sessions built fast.

A turn of a coding agent is a user message, an assistant tool call, the tool's
result and the assistant's answer. Texts are drawn from fixed pools (seeded, so
every run writes the same bytes) of roughly the sizes seen in agent
transcripts: user messages of a few sentences, tool results of about a
kilobyte, answers of a paragraph.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import grpc

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc

Stub = pb_grpc.SessionStoreStub
# Entries per AppendEntries when building long sessions (the API allows 10,000).
BUILD_BATCH = 2_500

_VOCABULARY = (
    "the session store keeps every turn of the agent as an event so that views can be "
    "replayed at any version compaction summarises older turns while pruning trims tool "
    "output in the prompt only tokens are counted once at ingest with the model tokenizer "
    "read file write patch test failed passed function class module import return value "
    "error retry budget context window cache latency throughput database index schema"
)
_WORDS = _VOCABULARY.split()
_CODE = (
    "def handler(request):\n    session = store.get(request.session_id)\n"
    "    for entry in session.entries:\n        if entry.role == 'tool':\n"
    "            yield entry.content[:1500]\n    return None\n"
)
_POOL = 64


def _sentences(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words).capitalize() + "."


@dataclass(frozen=True)
class _Texts:
    user: tuple[str, ...]
    answer: tuple[str, ...]
    tool_output: tuple[str, ...]


def _texts() -> _Texts:
    rng = random.Random(20240601)
    return _Texts(
        user=tuple(_sentences(rng, rng.randint(120, 320)) for _ in range(_POOL)),
        answer=tuple(_sentences(rng, rng.randint(200, 600)) for _ in range(_POOL)),
        tool_output=tuple(
            (_CODE * 4)[: rng.randint(300, 900)] + _sentences(rng, rng.randint(100, 500))
            for _ in range(_POOL)
        ),
    )


TEXTS = _texts()


def user(n: int) -> pb.Entry:
    text = TEXTS.user[n % _POOL]
    return pb.Entry(role=pb.ROLE_USER, content=[pb.ContentBlock(text=pb.TextBlock(text=text))])


def answer(n: int) -> pb.Entry:
    text = TEXTS.answer[n % _POOL]
    return pb.Entry(
        role=pb.ROLE_ASSISTANT,
        content=[pb.ContentBlock(text=pb.TextBlock(text=text))],
        usage=pb.Usage(input_tokens=1_200 + n % 500, output_tokens=90, cache_read_tokens=1_000),
    )


def tool_call(n: int, call_id: str) -> pb.Entry:
    arguments = json.dumps({"path": f"src/module_{n % 97}.py", "limit": 200})
    return pb.Entry(
        role=pb.ROLE_ASSISTANT,
        content=[
            pb.ContentBlock(
                tool_call=pb.ToolCallBlock(id=call_id, name="read", arguments_json=arguments)
            )
        ],
        usage=pb.Usage(input_tokens=1_100 + n % 500, output_tokens=25, cache_read_tokens=1_000),
    )


def tool_result(n: int, call_id: str) -> pb.Entry:
    return pb.Entry(
        role=pb.ROLE_TOOL,
        content=[
            pb.ContentBlock(
                tool_result=pb.ToolResultBlock(
                    tool_call_id=call_id, content=TEXTS.tool_output[n % _POOL]
                )
            )
        ],
    )


def agent_turn(n: int, call_prefix: str = "c") -> list[pb.Entry]:
    """user, assistant tool call, tool result, assistant answer: 4 entries."""
    call_id = f"{call_prefix}{n}"
    return [user(n), tool_call(n, call_id), tool_result(n, call_id), answer(n)]


def tool_step(n: int, call_prefix: str = "t") -> list[pb.Entry]:
    """The assistant half of a turn: tool call, result, answer (one append)."""
    call_id = f"{call_prefix}{n}"
    return [tool_call(n, call_id), tool_result(n, call_id), answer(n)]


# The window of the sessions the benchmarks write, unless a group sets its own.
# The context engine compacts a session whose prompt goes over 0.8 of its
# window (gpt-4o's 128,000 tokens by default): the groups that measure the
# store itself (appends by length, views of long histories, replay, peers)
# would then measure the summariser as well, at a point that depends on how
# fast the session grew. In this window the engine checks every view and
# append but never needs to compact; group "engine" measures compaction.
STORE_WINDOW_TOKENS = 10_000_000


def create(stub: Stub, session_id: str = "", **settings: object) -> str:
    settings.setdefault("context_window_tokens", STORE_WINDOW_TOKENS)
    created = stub.CreateSession(
        pb.CreateSessionRequest(
            session_id=session_id,
            settings=pb.SessionSettings(model="gpt-4o", **settings),  # type: ignore[arg-type]
        )
    )
    return str(created.id)


def append(stub: Stub, session_id: str, entries: list[pb.Entry]) -> pb.AppendEntriesResponse:
    return stub.AppendEntries(pb.AppendEntriesRequest(session_id=session_id, entries=entries))


# -- long sessions ------------------------------------------------------------------------


@dataclass
class BuiltSession:
    """A session built in big batches, and the ids a benchmark may need."""

    session_id: str
    entries: int = 0
    # Per agent turn: (user entry id, tool result entry id).
    turns: list[tuple[str, str]] = field(default_factory=list)
    compactions: int = 0
    prunes: int = 0
    next_turn: int = 0


def _batches(start_turn: int, turns: int, batch_entries: int) -> Iterator[list[pb.Entry]]:
    per_batch = max(1, batch_entries // 4)
    for first in range(start_turn, start_turn + turns, per_batch):
        last = min(first + per_batch, start_turn + turns)
        yield [e for n in range(first, last) for e in agent_turn(n)]


def grow(stub: Stub, built: BuiltSession, entries: int, batch: int = BUILD_BATCH) -> None:
    """Appends agent turns in batches until the session holds ``entries`` entries."""
    turns = max(0, (entries - built.entries) // 4)
    for request in _batches(built.next_turn, turns, batch):
        answer_ = append(stub, built.session_id, request)
        ids = list(answer_.entry_ids)
        built.turns.extend((ids[i], ids[i + 2]) for i in range(0, len(ids), 4))
        built.entries += len(ids)
    built.next_turn += turns


def compact(stub: Stub, built: BuiltSession, keep_fraction: float) -> None:
    """Records a compaction that keeps the last ``keep_fraction`` of the entries.

    The cut is at a user entry, which is always a valid cut in these sessions:
    every tool call is answered within its own turn.
    """
    turn = int(len(built.turns) * (1 - keep_fraction))
    stub.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=built.session_id,
            summary=f"## Goal\nBenchmark session.\n## Progress\n{turn} turns summarised. "
            + TEXTS.answer[turn % _POOL],
            first_kept_entry_id=built.turns[turn][0],
            tokens_before=100_000,
            tokens_after=2_000,
            reason="threshold",
            summarizer_model="gpt-4o-mini",
        )
    )
    built.compactions += 1


def prune(stub: Stub, built: BuiltSession, from_fraction: float, count: int) -> None:
    """Soft-trims and hard-clears ``count`` tool results after ``from_fraction`` of the turns."""
    first = int(len(built.turns) * from_fraction)
    chosen = built.turns[first : first + count]
    stub.RecordPrune(
        pb.RecordPruneRequest(
            session_id=built.session_id,
            entries=[
                pb.PrunedEntry(
                    entry_id=result_id,
                    action=pb.PRUNE_ACTION_SOFT_TRIM if i % 2 else pb.PRUNE_ACTION_HARD_CLEAR,
                    head_chars=200,
                    tail_chars=100,
                )
                for i, (_, result_id) in enumerate(chosen)
            ],
            reason="cache-ttl",
        )
    )
    built.prunes += 1


def build_with_history(stub: Stub, entries: int) -> BuiltSession:
    """A session of ``entries`` entries with two compactions and prunes in its history.

    Half is written, compacted (keeping the newest 60%), and pruned; then the
    rest, then pruned again and compacted to keep the newest ~30%, then a last
    prune inside what is kept. The prompt view is thus the summary, ~30% of
    the entries and some trimmed or cleared tool results.
    """
    built = BuiltSession(create(stub))
    grow(stub, built, entries // 2)
    compact(stub, built, keep_fraction=0.6)
    prune(stub, built, from_fraction=0.5, count=20)
    grow(stub, built, entries)
    prune(stub, built, from_fraction=0.6, count=20)
    compact(stub, built, keep_fraction=0.3)
    prune(stub, built, from_fraction=0.75, count=40)
    return built


def build_compacted(stub: Stub, size: int, kept: int) -> BuiltSession:
    """A session of ``size`` entries whose latest compaction keeps about ``kept``.

    Built in big batches, but the newest entries one agent turn per append, as
    agents write them; an earlier compaction and prunes sit in its history.
    """
    built = BuiltSession(create(stub))
    grow(stub, built, size // 2)
    compact(stub, built, keep_fraction=0.6)
    prune(stub, built, from_fraction=0.5, count=20)
    grow(stub, built, size - 2 * kept)
    grow(stub, built, size, batch=4)
    compact(stub, built, keep_fraction=kept / size)
    prune(stub, built, from_fraction=1 - kept / size / 2, count=10)
    return built


def pipelined(
    stub: Stub, requests: Iterator[pb.AppendEntriesRequest], window: int = 16
) -> list[pb.AppendEntriesResponse]:
    """Sends appends with up to ``window`` in flight on one channel, in order of sending.

    For building many-event sessions fast: the server queues a session's writers
    on its lock, so the order in which they land is not the order sent; the
    caller must not rely on parents or tool-call pairing across requests.
    """
    in_flight: list[grpc.Future] = []
    done: list[pb.AppendEntriesResponse] = []
    for request in requests:
        in_flight.append(stub.AppendEntries.future(request))
        if len(in_flight) >= window:
            done.append(in_flight.pop(0).result())
    done.extend(f.result() for f in in_flight)
    return done


def timed(call: Callable[[], object]) -> float:
    """Seconds one call takes."""
    import time

    started = time.perf_counter()
    call()
    return time.perf_counter() - started
