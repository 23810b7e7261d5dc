# ruff: noqa: RUF001 - the Chinese text here is punctuated as Chinese is written
"""What users say and what tools print in long agent sessions: the texts, with facts planted.

User messages come in English and Chinese, sometimes a brief "ok", and now and
then state a fact a summary must keep: an identifier of one of the kinds
agents meet (ticket ids, hashes, UUIDs, URLs, e-mail addresses, paths, names,
versions, numbers with units, error messages) or an explicit instruction
("Remember ...", "Never ...", "不要 ..."). Each planted value is unique to its
session (its number ``n``), so finding it later means it survived. Tool
outputs are source code, JSON, logs whose error is at the end, and Chinese
text, each full of identifiers of its own that compete for room.

Plain text only: the in-process fidelity sessions and the agent loop, which
talks to a server over gRPC, build their entries from it.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Planted:
    turn: int
    kind: str
    # The exact text that must be found in the summary.
    value: str
    # The identifiers in ``value`` that the anonymize policy replaces: (kind, text).
    anonymized: tuple[tuple[str, str], ...] = ()


# -- what the user states ---------------------------------------------------------------------


def hex_string(rng: random.Random, n: int) -> str:
    # At least one digit and one letter, as a real hash has.
    while True:
        value = "".join(rng.choice("0123456789abcdef") for _ in range(n))
        if any(c.isdigit() for c in value) and any(c.isalpha() for c in value):
            return value


def word(rng: random.Random) -> str:
    return rng.choice(
        ("ledger", "billing", "auth", "relay", "ingest", "search", "router", "vault", "queue")
    )


def identifier(rng: random.Random, n: int, nth: int) -> tuple[str, str]:
    """(kind, value) of an identifier unique to ``n``; the kinds are planted in turn, so
    that a long session plants every one of them."""
    w = word(rng)
    makers: list[tuple[str, Callable[[], str]]] = [
        ("ticket", lambda: f"INC-{40000 + n}"),
        ("ticket", lambda: f"JIRA-{n}"),
        ("ticket", lambda: f"GH-{700 + n}"),
        ("ticket", lambda: f"#{4700 + n}"),
        ("hash", lambda: hex_string(rng, 7)),
        ("hash", lambda: hex_string(rng, 40)),
        ("hash", lambda: "sha256:" + hex_string(rng, 64)),
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


def user_text(rng: random.Random, turn: int, n: int, said: list[Planted]) -> str:
    """The user's message of ``turn``; sometimes with a fact, appended to ``said``."""
    request = rng.choice(_REQUESTS).format(w=word(rng))
    if rng.random() < 0.15:
        return rng.choice(("ok", "go on", "继续", "yes, do it"))
    if rng.random() > 0.3:
        return request
    draw = rng.random()
    if draw < 0.4:
        value = rng.choice(_INSTRUCTIONS).format(n=n)
        path = f"config/prod-{n}.yaml"
        parts = (("path", path),) if path in value else ()
        said.append(Planted(turn, "instruction", value, parts))
        return f"{request} {value}" if rng.random() < 0.5 else f"{value}\n\n{request}"
    if draw < 0.5:
        quoted = rng.choice(_ERRORS).format(n=n)
        value = quoted.strip('"「」').replace('\\"', '"')
        host = f"db-{n}.internal:5432"
        parts = (("host", host),) if host in value else ()
        said.append(Planted(turn, "error", value, parts))
        text = f"It fails with {quoted.replace(chr(92), '')}"
        return f"{text}\n{request}"
    kind, value = identifier(rng, n, len(said))
    parts = ((kind, value),) if kind in ANONYMIZED else ()
    said.append(Planted(turn, kind, value, parts))
    return f"{request} {rng.choice(_SAYING).format(v=value)}"


# -- what the tools print ----------------------------------------------------------------------


def code_text(rng: random.Random, chars: int) -> str:
    w = word(rng)
    block = (
        f"def handle_{w}(request, retries=3):\n"
        f"    token = '{hex_string(rng, 12)}'\n"
        f"    return client_{w}.send(request, timeout=30)\n\n"
    )
    return (block * (chars // len(block) + 1))[:chars]


def json_text(rng: random.Random, chars: int) -> str:
    rows = []
    size = 0
    while size < chars:
        row = {
            "id": str(uuid.UUID(int=rng.getrandbits(128))),
            "commit": hex_string(rng, 40),
            "url": f"https://api.example.com/items/{rng.randint(1, 10**6)}",
            "latency_ms": rng.randint(1, 900),
            "status": rng.choice(("ok", "ok", "retry")),
        }
        rows.append(row)
        size += 190
    return json.dumps({"items": rows}, indent=1)


def log_text(rng: random.Random, chars: int, error: str) -> str:
    lines = []
    size = 0
    while size < chars:
        line = (
            f"2026-11-25T10:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z INFO "
            f"request {hex_string(rng, 16)} served in {rng.randint(1, 500)} ms"
        )
        lines.append(line)
        size += len(line) + 1
    lines.append(error)
    return "\n".join(lines)


def chinese_text(rng: random.Random, chars: int) -> str:
    phrase = "会话存储把每一轮对话记录为事件，压缩会把较早的轮次总结成摘要。"
    return (phrase * (chars // len(phrase) + 1))[:chars]
