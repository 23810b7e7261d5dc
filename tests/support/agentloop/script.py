"""The agent's script: what the user asks each turn, which tools the model calls, what they print.

A turn is a user message, then steps: in each the model calls one or two
tools at once, and after the last step it answers in text. Tool outputs are
1 KB to 300 KB of source code, JSON, Chinese text or logs whose last line is
an error or a total, generated when the agent runs the tool. The user states
facts (identifiers, instructions) at random turns; they must still be in the
prompt at the end.

Every user message ends with its turn's tag, ``[turn N]``, which is how the
model stand-in knows which request it is answering, and that it is seeing it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

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

# Output sizes in characters, and the share of calls that print 100-300 KB.
SIZES = (1_000, 2_000, 8_000, 30_000)
LARGE_SIZES = (100_000, 300_000)
LARGE_SHARE = 0.03


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, str]
    # What running it prints: its kind ("code", "json", "chinese", "log"), size and
    # the last line of a log (an error or a total), which must reach the model.
    kind: str
    chars: int
    seed: int
    last_line: str = ""
    failed: bool = False

    def output(self) -> str:
        rng = random.Random(self.seed)
        match self.kind:
            case "code":
                return code_text(rng, self.chars)
            case "json":
                return json_text(rng, self.chars)
            case "chinese":
                return chinese_text(rng, self.chars)
        return log_text(rng, self.chars, self.last_line)


@dataclass(frozen=True)
class Turn:
    number: int
    user: str
    # The calls of each step, in order; the answer comes after the last.
    steps: tuple[tuple[ToolCall, ...], ...]
    answer: str

    def tag(self) -> str:
        return tag(self.number)


@dataclass
class Script:
    turns: list[Turn] = field(default_factory=list)
    # Stated by the user: every one must be in the final prompt.
    said: list[Planted] = field(default_factory=list)


def tag(number: int) -> str:
    return f"[turn {number}]"


def script(seed: int, turns: int, *, call_id_prefix: str = "call") -> Script:
    """``turns`` turns of a coding agent's session, the same for the same seed."""
    rng = random.Random(seed)
    result = Script()
    numbers = iter(rng.sample(range(100, 99_000), turns))
    for number in range(1, turns + 1):
        n = next(numbers)
        text = f"{user_text(rng, number, n, result.said)} {tag(number)}"
        steps = _steps(rng, number, n, call_id_prefix)
        result.turns.append(Turn(number, text, steps, _answer(rng, number, steps)))
    return result


def _steps(
    rng: random.Random, number: int, n: int, prefix: str
) -> tuple[tuple[ToolCall, ...], ...]:
    if rng.random() < 0.15:
        return ()
    steps = []
    for s in range(rng.choice((1, 1, 2, 3))):
        steps.append(
            tuple(
                _call(rng, f"{prefix}_{number}_{s}_{k}", number, n)
                for k in range(rng.choice((1, 1, 2)))
            )
        )
    return tuple(steps)


def _call(rng: random.Random, call_id: str, number: int, n: int) -> ToolCall:
    w = word(rng)
    chars = rng.choice(LARGE_SIZES) if rng.random() < LARGE_SHARE else rng.choice(SIZES)
    seed = rng.getrandbits(32)
    kind = rng.choice(("read", "fetch", "grep", "bash", "bash"))
    if kind == "read":
        return ToolCall(
            call_id, "read", {"path": f"services/{w}/core_{number}.py"}, "code", chars, seed
        )
    if kind == "fetch":
        arguments = {"url": f"https://api.example.com/{w}?page={number}"}
        return ToolCall(call_id, "fetch", arguments, "json", chars, seed)
    if kind == "grep":
        arguments = {"pattern": f"{w}_timeout", "path": "services/"}
        return ToolCall(call_id, "grep", arguments, "chinese", chars, seed)
    failed = rng.random() < 0.4
    last_line = (
        f"FAILED tests/{w}/test_{number}.py::test_retry - AssertionError: deploy "
        f"dep-{n}-{hex_string(rng, 8)} expected 200, got 503"
        if failed
        else f"{rng.randint(20, 90)} passed in {rng.randint(1, 60)}.{number % 10}s"
    )
    arguments = {"command": f"pytest tests/{w} -x -q"}
    return ToolCall(call_id, "bash", arguments, "log", chars, seed, last_line, failed)


def _answer(rng: random.Random, number: int, steps: tuple[tuple[ToolCall, ...], ...]) -> str:
    w = word(rng)
    done = f"Done with {tag(number)}."
    if not steps:
        return f"{done} Noted; nothing to run for that."
    failed = [c for step in steps for c in step if c.failed]
    if failed:
        return f"{done} The {w} tests fail: {failed[-1].last_line}. I will fix the retry next."
    reads = ", ".join(json.dumps(c.arguments) for step in steps for c in step)
    return f"{done} I looked at {reads}; the {w} module needs its timeout raised."


TOOLS: list[dict[str, Any]] = [
    {
        "name": "read",
        "description": "Read a file of the repository.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
    {
        "name": "fetch",
        "description": "GET a URL and return its body.",
        "parameters": {"type": "object", "properties": {"url": {"type": "string"}}},
    },
    {
        "name": "grep",
        "description": "Search the repository for a pattern.",
        "parameters": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
        },
    },
    {
        "name": "bash",
        "description": "Run a shell command and return what it printed.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    },
]


def burst_script(
    *,
    before: int,
    prose_chars: int,
    burst_calls: int,
    burst_chars: int,
    after: int,
    after_chars: int,
    seed: int = 1,
    call_id_prefix: str = "call",
) -> Script:
    """``before`` turns of prose (the user writes ``prose_chars``, the model answers
    without tools), then one where the model calls ``burst_calls`` tools at once,
    each printing about ``burst_chars`` of JSON, then ``after`` turns of prose of
    ``after_chars``: with a provider that counts tool results higher than prose, the
    burst is counted far above the rate the prose taught."""
    rng = random.Random(seed)
    result = Script()
    for number in range(1, before + after + 2):
        chars = prose_chars if number <= before + 1 else after_chars
        steps: tuple[tuple[ToolCall, ...], ...] = ()
        if number == before + 1:
            steps = (
                tuple(
                    ToolCall(
                        f"{call_id_prefix}_{number}_0_{k}",
                        "fetch",
                        {"url": f"https://api.example.com/{word(rng)}?page={k}"},
                        "json",
                        burst_chars,
                        rng.getrandbits(32),
                    )
                    for k in range(burst_calls)
                ),
            )
        user = f"{_prose(rng, chars)} {tag(number)}"
        result.turns.append(Turn(number, user, steps, _answer(rng, number, steps)))
    return result


def _prose(rng: random.Random, chars: int) -> str:
    """English prose of about ``chars`` characters, as a user pastes notes or a design."""
    sentences = []
    size = 0
    while size < chars:
        w, other = word(rng), word(rng)
        sentence = rng.choice(
            (
                f"The {w} service calls {other} on every request and retries {rng.randint(2, 9)} "
                "times before it gives up.",
                f"We moved the {w} queue behind {other} last quarter, and latency went up.",
                f"Nobody owns the {w} dashboards since the {other} team was reorganised.",
                f"Keep the {w} client compatible with the {other} release we ship next week.",
            )
        )
        sentences.append(sentence)
        size += len(sentence) + 1
    return " ".join(sentences)
