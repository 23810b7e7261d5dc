# ruff: noqa: RUF001 - the Chinese text here is punctuated as Chinese is written
"""Long agent sessions with facts planted at random turns, and the summaries rolled over them.

A session of N turns: each a user message (English or Chinese, sometimes a
brief "ok"), an assistant reply with one or two tool calls, and their outputs
- source code, JSON, logs whose error is at the end, Chinese text, now and
then 100-300 KB - full of identifiers of their own (ids, hashes, URLs) that
compete for room in the summary. At random turns the user states a fact: an
identifier of one of the kinds a summary must keep (ticket ids, hashes, UUIDs,
URLs, e-mail addresses, paths, names, versions, numbers with units, error
messages) or an explicit instruction ("Remember ...", "Never ...", "不要 ...").
Each planted value is unique to its session, so finding it in the summary
means it survived. Facts are also planted in tool outputs (an error at the end
of a log, a deployment id): those are incidental, reported apart.

:func:`roll` summarises a session the way compactions do: in chunks of a few
entries, each summary rolled forward from the previous one, within a bound.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from domain.content import Entry, Role, TextBlock, ToolCall, ToolResult
from domain.context.summary import summarize_offline


@dataclass(frozen=True)
class Planted:
    turn: int
    kind: str
    # The exact text that must be found in the summary.
    value: str
    # The identifiers in ``value`` that the anonymize policy replaces: (kind, text).
    anonymized: tuple[tuple[str, str], ...] = ()


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


# -- what the user states ---------------------------------------------------------------------


def _hex(rng: random.Random, n: int) -> str:
    # At least one digit and one letter, as a real hash has.
    while True:
        value = "".join(rng.choice("0123456789abcdef") for _ in range(n))
        if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            return value


def _word(rng: random.Random) -> str:
    return rng.choice(
        ("ledger", "billing", "auth", "relay", "ingest", "search", "router", "vault", "queue")
    )


def _identifier(rng: random.Random, n: int, nth: int) -> tuple[str, str]:
    """(kind, value) of an identifier unique to ``n``; the kinds are planted in turn, so
    that a long session plants every one of them."""
    w = _word(rng)
    makers: list[tuple[str, Callable[[], str]]] = [
        ("ticket", lambda: f"INC-{40000 + n}"),
        ("ticket", lambda: f"JIRA-{n}"),
        ("ticket", lambda: f"GH-{700 + n}"),
        ("ticket", lambda: f"#{4700 + n}"),
        ("hash", lambda: _hex(rng, 7)),
        ("hash", lambda: _hex(rng, 40)),
        ("hash", lambda: "sha256:" + _hex(rng, 64)),
        ("id", lambda: str(uuid.UUID(int=rng.getrandbits(128)))),
        ("url", lambda: f"https://ci.example.com/{w}/runs/{n}?attempt=2"),
        ("url", lambda: f"https://github.com/acme/{w}/pull/{n}"),
        ("email", lambda: f"oncall.{w}{n}@example.org"),
        ("path", lambda: f"services/{w}/handlers/{w}_{n}.py"),
        ("path", lambda: f"/var/log/{w}/worker-{n}.log"),
        ("name", lambda: f"reconcile_{w}_{n}()"),
        ("type", lambda: f"{w.capitalize()}Retry{n}Policy"),
        ("version", lambda: f"v{n % 9 + 1}.{n % 17}.{n}"),
        ("version", lambda: f"{w}-client=={n % 5 + 1}.{n}.0"),
        ("quantity", lambda: f"{400 + n} ms"),
        ("quantity", lambda: f"{n % 9 + 1}.{n % 10} GB"),
        ("quantity", lambda: f"99.{n}%"),
        ("quantity", lambda: f"{n + 10} req/s"),
        ("quantity", lambda: f"{n + 5} s"),
        ("quantity", lambda: f"${n:,}"),
    ]
    kind, make = makers[nth % len(makers)]
    return kind, make()


_SAYING = (
    "Please look at {v} when you get to it.",
    "The failing run is {v}, can you check it?",
    "Context for later: {v} is what the customer reported.",
    "请查看 {v} 相关的问题。",
    "对照一下{v}的结果，然后继续。",
    "We measured {v} on the staging cluster yesterday.",
)

# Identifier kinds the anonymize policy replaces (the others say nothing of who or where).
ANONYMIZED = frozenset({"ticket", "hash", "id", "url", "email", "path", "name", "host"})

_INSTRUCTIONS = (
    "Remember that the staging database is called stg-{n}.",
    "Always run the lint job number {n} before you commit.",
    "Never push directly to the release-{n} branch.",
    "Don't touch the migrations in folder m{n}.",
    "Do not delete the fixtures of suite {n}.",
    "You must keep the public API of module m{n} stable.",
    "Make sure every answer mentions the on-call rota {n}.",
    "Keep in mind that client {n} pays per request.",
    "Note that the cache lives for {n} minutes at most.",
    "From now on, answer with the shortest diff for task {n}.",
    "记住：发布窗口是周五{n}点。",
    "以后所有的提交都要加上签名{n}。",
    "不要修改配置文件 config/prod-{n}.yaml。",
    "务必保留第{n}版的接口。",
    "一定要在合并前跑完测试套件{n}。",
    "别删除日志目录 logs{n}。",
    "必须使用补丁{n}的格式保存文件。",
    "始终用中文回答问题{n}。",
    "永远不要在生产环境运行脚本{n}。",
    "记得给客户{n}发邮件。",
)

_ERRORS = (
    '"ConnectionRefusedError: [Errno 111] Connection refused by db-{n}.internal:5432"',
    "TypeError: Cannot read properties of undefined (reading 'field{n}')",
    '"psql: error: FATAL: role \\"svc{n}\\" does not exist"',
    "「连接超时：节点{n}没有响应」",
)

_REQUESTS = (
    "Refactor the {w} module so the retry logic lives in one place.",
    "Find out why the {w} tests are flaky and fix them.",
    "Add metrics to the {w} worker and show me the diff.",
    "把 {w} 服务的日志格式统一一下。",
    "检查 {w} 模块的性能问题，给出结论。",
    "Continue with the {w} migration.",
)


def _user_turn(rng: random.Random, turn: int, n: int, session: Session) -> str:
    """The user's message of ``turn``; sometimes with a planted fact."""
    request = rng.choice(_REQUESTS).format(w=_word(rng))
    if rng.random() < 0.15:
        return rng.choice(("ok", "go on", "继续", "yes, do it"))
    if rng.random() > 0.3:
        return request
    draw = rng.random()
    if draw < 0.4:
        value = rng.choice(_INSTRUCTIONS).format(n=n)
        path = f"config/prod-{n}.yaml"
        parts = (("path", path),) if path in value else ()
        session.said.append(Planted(turn, "instruction", value, parts))
        return f"{request} {value}" if rng.random() < 0.5 else f"{value}\n\n{request}"
    if draw < 0.5:
        quoted = rng.choice(_ERRORS).format(n=n)
        value = quoted.strip('"「」').replace('\\"', '"')
        host = f"db-{n}.internal:5432"
        parts = (("host", host),) if host in value else ()
        session.said.append(Planted(turn, "error", value, parts))
        text = f"It fails with {quoted.replace(chr(92), '')}"
        return f"{text}\n{request}"
    kind, value = _identifier(rng, n, len(session.said))
    parts = ((kind, value),) if kind in ANONYMIZED else ()
    session.said.append(Planted(turn, kind, value, parts))
    return f"{request} {rng.choice(_SAYING).format(v=value)}"


# -- what the tools print ----------------------------------------------------------------------


def _code(rng: random.Random, chars: int) -> str:
    w = _word(rng)
    block = (
        f"def handle_{w}(request, retries=3):\n"
        f"    token = '{_hex(rng, 12)}'\n"
        f"    return client_{w}.send(request, timeout=30)\n\n"
    )
    return (block * (chars // len(block) + 1))[:chars]


def _json(rng: random.Random, chars: int) -> str:
    rows = []
    size = 0
    while size < chars:
        row = {
            "id": str(uuid.UUID(int=rng.getrandbits(128))),
            "commit": _hex(rng, 40),
            "url": f"https://api.example.com/items/{rng.randint(1, 10**6)}",
            "latency_ms": rng.randint(1, 900),
            "status": rng.choice(("ok", "ok", "retry")),
        }
        rows.append(row)
        size += 190
    return json.dumps({"items": rows}, indent=1)


def _log(rng: random.Random, chars: int, error: str) -> str:
    lines = []
    size = 0
    while size < chars:
        line = (
            f"2026-11-25T10:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z INFO "
            f"request {_hex(rng, 16)} served in {rng.randint(1, 500)} ms"
        )
        lines.append(line)
        size += len(line) + 1
    lines.append(error)
    return "\n".join(lines)


def _chinese(rng: random.Random, chars: int) -> str:
    phrase = "会话存储把每一轮对话记录为事件，压缩会把较早的轮次总结成摘要。"
    return (phrase * (chars // len(phrase) + 1))[:chars]


def _tool_turn(rng: random.Random, turn: int, n: int, session: Session) -> list[Entry]:
    w = _word(rng)
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
            output = _code(rng, chars)
        elif kind == "fetch":
            arguments = {"url": f"https://api.example.com/{w}?page={turn}"}
            output = _json(rng, chars)
        elif kind == "grep":
            arguments = {"pattern": f"{w}_timeout", "path": "services/"}
            output = _chinese(rng, chars)
        else:
            arguments = {"command": f"pytest tests/{w} -x -q"}
            failed = rng.random() < 0.4
            error = (
                f"FAILED tests/{w}/test_{turn}.py::test_retry - AssertionError: deploy "
                f"dep-{n}-{_hex(rng, 8)} expected 200, got 503"
                if failed
                else f"{rng.randint(20, 90)} passed in {rng.randint(1, 60)}.{turn % 10}s"
            )
            output = _log(rng, chars, error)
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
        text = _user_turn(rng, turn, n, session)
        session.entries.append(Entry(f"t{turn}-u", None, None, Role.USER, (TextBlock(text),)))
        session.entries.extend(_tool_turn(rng, turn, n, session))
    return session
