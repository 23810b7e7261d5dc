"""Group "fidelity": the share of planted facts the offline summariser keeps, in process.

Sessions of N turns (code, JSON, logs whose error is at the end, Chinese text,
outputs up to 300 KB) with the user's identifiers, errors and instructions
planted at random turns (tests/support/fidelity.py), summarised in chunks of
2-12 entries, each summary rolled from the last, as compactions do. Under each
bound - the offline summariser's (12,000 characters, 4,096 tokens counted as
characters / 4) and the hard drop's (6,000 characters) - the figures are:

* the share of the user's facts in the last summary, the lowest over the seeds
  (target 100%: every session, not the typical one);
* the share of facts printed by tools (an error at the end of a log): what is
  kept while there is room, no target;
* the largest summary written, against its bound, and the characters the
  user's lines take in the last one;
* the time one roll takes.

This measures the summariser itself. The agent-loop simulator measures the
share through the server, end to end, with a model summariser too.
"""

from __future__ import annotations

import time

from domain.context.summary import parse_summary
from domain.context.summary.layout import is_protected
from tests.bench.config import Context
from tests.bench.report import Result, Target, median
from tests.support.fidelity import planted_session, roll, survivors

# (name, max_chars, max_tokens): the offline summariser's default bound, and the hard drop's.
BOUNDS = (("offline", 12_000, 4_096), ("hard drop", 6_000, None))


def fidelity(ctx: Context) -> None:
    print("[fidelity] in-process", flush=True)
    report = ctx.report
    raw: dict[str, object] = {}
    for name, max_chars, max_tokens in BOUNDS:
        turn_counts = (
            ctx.scale.fidelity_turns if name == "offline" else ctx.scale.fidelity_turns[:1]
        )
        for turns in turn_counts:
            label = f"{turns} turns, {name} bound ({max_chars:,} chars)"
            said, printed, sizes, user_chars, planted, roll_ms = [], [], [], [], [], []
            for seed in range(ctx.scale.fidelity_seeds):
                session = planted_session(seed, turns)
                began = time.perf_counter()
                rolled = roll(
                    session.entries, seed=seed, max_chars=max_chars, max_tokens=max_tokens
                )
                roll_ms.append((time.perf_counter() - began) * 1e3 / rolled.compactions)
                said.append(100 * len(survivors(rolled.summary, session.said)) / len(session.said))
                printed.append(
                    100 * len(survivors(rolled.summary, session.printed)) / len(session.printed)
                )
                sizes.append(max(rolled.sizes))
                user_chars.append(_user_chars(rolled.summary))
                planted.append(len(session.said))
            bound = min(max_chars, 4 * max_tokens) if max_tokens else max_chars
            seeds = f"{len(said)} seeds, {median(planted):.0f} user facts planted (median)"
            report.add(
                Result(
                    "fidelity",
                    "-",
                    f"user facts kept, {label}",
                    min(said),
                    "%",
                    said,
                    target=Target(">=", 100, ">= 100% every seed"),
                    note=f"lowest of {seeds}",
                )
            )
            report.add(
                Result(
                    "fidelity",
                    "-",
                    f"tool-printed facts kept, {label}",
                    median(printed),
                    "%",
                    printed,
                    note="kept while there is room; trimmed before the user's",
                )
            )
            report.add(
                Result(
                    "fidelity",
                    "-",
                    f"largest summary, {label}",
                    max(sizes),
                    "chars",
                    sizes,
                    target=Target("<=", bound, f"<= {bound:,} chars"),
                )
            )
            report.add(
                Result(
                    "fidelity",
                    "-",
                    f"user lines in the last summary, {label}",
                    median(user_chars),
                    "chars",
                    user_chars,
                    ratio=median(user_chars) / bound,
                    ratio_of="of the bound",
                )
            )
            report.add(
                Result("fidelity", "-", f"one roll, {label}", median(roll_ms), "ms", roll_ms)
            )
            raw[label] = {
                "user_share": said,
                "printed_share": printed,
                "largest_summary": sizes,
                "user_chars": user_chars,
                "planted": planted,
                "roll_ms": roll_ms,
            }
    report.keep("fidelity", raw)


def _user_chars(summary: str) -> int:
    """The characters the user's instructions, identifiers and errors take, as lines."""
    return sum(
        len(item) + 3
        for items in parse_summary(summary).values()
        for item in items
        if is_protected(item)
    )
