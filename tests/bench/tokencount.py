"""Group "tokens": counting tokens at ingest, in-process, for English, CJK and code.

The store counts every entry once, on append, with the session model's
tokenizer (tiktoken's o200k_base for gpt-4o). This measures that call alone,
and shows how far the chars/4 rule of thumb is from the exact count for
Chinese and Japanese text, where it undercounts.
"""

from __future__ import annotations

import math
import random
import time

from domain.content import Entry, Role, TextBlock, ToolResult
from services.adapters.tokenizers import CHARS_PER_TOKEN, tokenizer_for
from tests.bench import turns
from tests.bench.config import Context
from tests.bench.report import Result, median

_CJK_PHRASES = (
    "上下文窗口的管理需要精确地计算词元数量",
    "会话存储把每一轮对话记录为事件",
    "压缩会把较早的轮次总结成摘要",
    "工具调用的结果可以在提示中被裁剪",
    "请读取配置文件并检查数据库连接",
    "测试失败了。错误信息显示超时",
    "我们需要在不丢失历史的情况下重放任意版本",
    "セッションの履歴を要約してください",
    "このファイルの内容を確認してから修正します",
    "キャッシュの上限を超えると古い履歴が追い出されます",
)


def _cjk_texts(count: int) -> list[str]:
    rng = random.Random(11)
    texts = []
    for _ in range(count):
        parts = [rng.choice(_CJK_PHRASES) for _ in range(rng.randint(4, 12))]
        texts.append("。".join(parts) + "。")
    return texts


def _entries(kind: str, count: int) -> list[Entry]:
    if kind == "english":
        texts = [
            (turns.TEXTS.user + turns.TEXTS.answer)[n % (2 * len(turns.TEXTS.user))]
            for n in range(count)
        ]
        return [Entry("", None, None, Role.USER, (TextBlock(t),)) for t in texts]
    if kind == "cjk":
        return [Entry("", None, None, Role.USER, (TextBlock(t),)) for t in _cjk_texts(count)]
    outputs = turns.TEXTS.tool_output
    return [
        Entry("", None, None, Role.TOOL, (ToolResult(f"c{n}", outputs[n % len(outputs)]),))
        for n in range(count)
    ]


def tokens(ctx: Context) -> None:
    print("[tokens] in-process", flush=True)
    tokenizer = tokenizer_for("gpt-4o")
    tokenizer.count_text("warm up: loads the encoding")
    report = ctx.report
    raw: dict[str, object] = {"tokenizer": tokenizer.name}
    for kind in ("english", "cjk", "code"):
        entries = _entries(kind, ctx.scale.token_entries)
        entry_rates: list[float] = []
        token_rates: list[float] = []
        total = 0
        for _ in range(ctx.scale.reps):
            began = time.perf_counter()
            total = sum(tokenizer.count_entry(e) for e in entries)
            elapsed = time.perf_counter() - began
            entry_rates.append(len(entries) / elapsed)
            token_rates.append(total / elapsed)
        chars = sum(len(_text(e)) for e in entries)
        report.add(
            Result(
                "tokens", "-", f"count_entry, {kind}", median(token_rates), "tokens/s", token_rates
            )
        )
        report.add(
            Result(
                "tokens", "-", f"count_entry, {kind}", median(entry_rates), "entries/s", entry_rates
            )
        )
        # Text only, without the per-message overhead, to compare like with like.
        exact = sum(tokenizer.count_text(_text(e)) for e in entries)
        rule = sum(math.ceil(len(_text(e)) / CHARS_PER_TOKEN) for e in entries)
        report.add(
            Result(
                "tokens",
                "-",
                f"exact tokens / (chars/4), {kind}",
                exact / rule,
                "x",
                [exact / rule] * ctx.scale.reps,
                ratio=exact / rule,
                ratio_of="chars/4",
                note="deterministic: the same each run",
            )
        )
        raw[kind] = {
            "entries": len(entries),
            "chars": chars,
            "tokens_with_overhead": total,
            "tokens_text_only": exact,
            "chars_over_4": rule,
            "tokens_per_s": token_rates,
            "entries_per_s": entry_rates,
        }
    report.keep("tokens", raw)


def _text(entry: Entry) -> str:
    block = entry.content[0]
    return block.text if isinstance(block, TextBlock) else block.content  # type: ignore[union-attr]
