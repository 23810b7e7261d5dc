"""Long agent sessions with facts planted at random turns, and the summaries rolled over them.

A session of N turns (texts from :mod:`tests.support.texts`): each a user
message, sometimes stating a fact every summary must keep, an assistant reply
with one or two tool calls, and their outputs, now and then 100-300 KB. Facts
are also planted in tool outputs (an error at the end of a log, a deployment
id): those are incidental, reported apart.

:func:`roll` summarises a session the way compactions do: in chunks of a few
entries, each summary rolled forward from the previous one, within a bound.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from domain.content import Entry, Role, TextBlock, ToolCall, ToolResult
from domain.context.summary import summarize_offline
from tests.support.texts import (
    Planted,
    chinese_text,
    code_text,
    hex_string,
    json_text,
    log_text,
    user_text,
    word,
)


@dataclass
class Session:
    entries: list[Entry] = field(default_factory=list)
    # Stated by the user: every one must survive.
    said: list[Planted] = field(default_factory=list)
    # Printed by tools: kept while there is room.
    printed: list[Planted] = field(default_factory=list)


@dataclass(frozen=True)
class Rolled:
    summary: str
    compactions: int
    # The length of each summary written, in characters.
    sizes: tuple[int, ...]


def chars_over_four(text: str) -> int:
    return -(-len(text) // 4)


def roll(
    entries: Sequence[Entry],
    *,
    seed: int,
    chunk: tuple[int, int] = (2, 12),
    max_chars: int = 6_000,
    max_tokens: int | None = 1_500,
    count: Callable[[str], int] | None = chars_over_four,
    identifier_policy: str = "preserve",
) -> Rolled:
    """Summaries of ``entries`` in chunks of ``chunk`` entries, each rolled from the last."""
    rng = random.Random(seed)
    summary = ""
    sizes = []
    start = 0
    while start < len(entries):
        end = min(len(entries), start + rng.randint(*chunk))
        # A compaction never separates a tool call from its result.
        while end < len(entries) and entries[end].role is Role.TOOL:
            end += 1
        summary = summarize_offline(
            entries[start:end],
            previous_summary=summary,
            identifier_policy=identifier_policy,
            max_chars=max_chars,
            count=count,
            max_tokens=max_tokens,
        )
        sizes.append(len(summary))
        start = end
    return Rolled(summary, len(sizes), tuple(sizes))


def normalised(text: str) -> str:
    return " ".join(text.split())


def survivors(summary: str, planted: Sequence[Planted]) -> list[Planted]:
    text = normalised(summary)
    return [p for p in planted if normalised(p.value) in text]


def _tool_turn(rng: random.Random, turn: int, n: int, session: Session) -> list[Entry]:
    w = word(rng)
    calls = []
    results = []
    for k in range(rng.choice((1, 1, 2))):
        call_id = f"c{turn}-{k}"
        chars = rng.choice((300, 2_000, 8_000, 30_000))
        if rng.random() < 0.02:
            chars = rng.choice((100_000, 300_000))
        kind = rng.choice(("read", "bash", "fetch", "grep"))
        failed = False
        if kind == "read":
            arguments = {"path": f"services/{w}/core_{turn}.py"}
            output = code_text(rng, chars)
        elif kind == "fetch":
            arguments = {"url": f"https://api.example.com/{w}?page={turn}"}
            output = json_text(rng, chars)
        elif kind == "grep":
            arguments = {"pattern": f"{w}_timeout", "path": "services/"}
            output = chinese_text(rng, chars)
        else:
            arguments = {"command": f"pytest tests/{w} -x -q"}
            failed = rng.random() < 0.4
            error = (
                f"FAILED tests/{w}/test_{turn}.py::test_retry - AssertionError: deploy "
                f"dep-{n}-{hex_string(rng, 8)} expected 200, got 503"
                if failed
                else f"{rng.randint(20, 90)} passed in {rng.randint(1, 60)}.{turn % 10}s"
            )
            output = log_text(rng, chars, error)
            if failed:
                session.printed.append(Planted(turn, "tool error", error))
        calls.append(ToolCall(call_id, kind, json.dumps(arguments)))
        results.append(
            Entry(
                f"t{turn}-r{k}",
                None,
                None,
                Role.TOOL,
                (ToolResult(call_id, output, failed),),
            )
        )
    reply = rng.choice(
        (
            f"Reading the {w} code first.",
            f"I decided to move the retry loop into {w}/retry.py instead of duplicating it.",
            "Running the tests now.",
            f"The root cause is the {w} client timeout.",
            "我先看一下日志。",
        )
    )
    assistant = Entry(f"t{turn}-a", None, None, Role.ASSISTANT, (TextBlock(reply), *calls))
    return [assistant, *results]


def planted_session(seed: int, turns: int) -> Session:
    """A session of ``turns`` turns with facts planted at random ones."""
    rng = random.Random(seed)
    session = Session()
    # A unique number per planted fact: no two share a value, in any session of this seed.
    numbers = iter(rng.sample(range(100, 99_000), turns))
    for turn in range(turns):
        n = next(numbers)
        text = user_text(rng, turn, n, session.said)
        session.entries.append(Entry(f"t{turn}-u", None, None, Role.USER, (TextBlock(text),)))
        session.entries.extend(_tool_turn(rng, turn, n, session))
    return session
