"""Group "agentloop": an agent's 200 turns end to end, over the whole matrix.

Each configuration of ``tests.support.agentloop.matrix.bench_matrix`` (every
window of 16k, 32k, 128k and 1M tokens x provider ratio 0.8, 1.0, 1.15, 1.4 x
OpenAI and Anthropic format, the database and the summariser alternating so
each of their pairs meets every window and ratio; then a learned window and a
busy machine on both databases) is a fresh server, the loopback provider that
validates and counts, and the agent of ``tests.support.agentloop.agent``. Per
configuration it prints one line: client interventions (target 0), provider
overflows (target at most 1, the one that teaches a window), turns whose user
message was missing from the request (target 0), the share of the user's
facts in the final prompt (target 100% offline), compactions, and view latency
p50/p99, overall and while a compaction ran. The table gets the worst of each
over the matrix; ``latest.json`` keeps every line. ``--quick`` plays two
configurations of 60 turns.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from tests.bench.config import Context
from tests.bench.report import Result, Target, median
from tests.bench.server import database
from tests.support.agentloop.matrix import TEST_MATRIX, Config, Outcome, bench_matrix, run

QUICK_TURNS = 60


def agentloop(ctx: Context) -> None:
    configs = bench_matrix() if ctx.scale.agentloop_full else _quick()
    configs = tuple(c for c in configs if c.database in ctx.backends)
    print(f"[agentloop] {len(configs)} configurations of {configs[0].turns} turns", flush=True)
    print(f"  {'configuration':<44} {_HEADER}", flush=True)
    outcomes, broken = [], []
    for config in configs:
        try:
            with database(config.database) as db, tempfile.TemporaryDirectory() as workdir:
                outcome = run(config, db.url, Path(workdir))
        except Exception as error:  # one configuration's crash is reported, not fatal
            broken.append(f"{config.name}: {type(error).__name__}: {error}")
            print(f"  {config.name:<44} did not run: {broken[-1][:300]}", flush=True)
            continue
        outcomes.append(outcome)
        print(f"  {config.name:<44} {_line(outcome)}", flush=True)
        for violation in outcome.violations():
            print(f"    ! {violation[:300]}", flush=True)
    ctx.report.keep("agentloop_broken", broken)
    if outcomes:
        _report(ctx, outcomes)


def _quick() -> tuple[Config, ...]:
    return tuple(dataclasses.replace(c, turns=QUICK_TURNS) for c in TEST_MATRIX[:2])


_HEADER = "interv  overfl  missing  facts  compact  view p50/p99 ms  compacting p50/p99 ms"


def _line(outcome: Outcome) -> str:
    f = outcome.figures()
    return (
        f"{f['interventions']:>6}  {f['overflows']:>6}  {f['missing_turn']:>7}  "
        f"{100 * f['fidelity']:>4.0f}%  {f['compactions']:>7}  "
        f"{f['view_p50_ms']:>7.1f}/{f['view_p99_ms']:<7.1f}  "
        f"{f['during_compaction_p50_ms']:>9.1f}/{f['during_compaction_p99_ms']:<8.1f}"
    )


def _report(ctx: Context, outcomes: list[Outcome]) -> None:
    report = ctx.report
    figures = [o.figures() for o in outcomes]
    report.keep("agentloop", figures)
    count = f"worst of {len(outcomes)} configurations"

    def worst(metric: str, key: str, target: Target, unit: str = "") -> None:
        values = [float(f[key]) for f in figures]
        report.add(
            Result("agentloop", "-", metric, max(values), unit, values, target=target, note=count)
        )

    worst("client interventions per session", "interventions", Target("<=", 0, "0"))
    worst("provider overflows per session", "overflows", Target("<=", 1, "<= 1"))
    worst("turns missing their user message", "missing_turn", Target("<=", 0, "0"))
    worst("logs whose last line never reached the model", "lost_tails", Target("<=", 0, "0"))
    offline = [100 * o.fidelity for o in outcomes if o.config.summarizer == "offline"]
    if offline:
        report.add(
            Result(
                "agentloop",
                "-",
                "user facts in the final prompt, offline summariser",
                min(offline),
                "%",
                offline,
                target=Target(">=", 100, ">= 100% every session"),
                note=f"lowest of {len(offline)} sessions",
            )
        )
    with_model = [100 * o.fidelity for o in outcomes if o.config.summarizer == "llm"]
    if with_model:
        report.add(
            Result(
                "agentloop",
                "-",
                "user facts in the final prompt, model summariser",
                min(with_model),
                "%",
                with_model,
                note=f"lowest of {len(with_model)} sessions (the loopback model's summaries)",
            )
        )
    for share, key in ((50, "during_compaction_p50_ms"), (99, "during_compaction_p99_ms")):
        values = [float(f[key]) for f in figures if f["during_compaction_views"]]
        if values:
            report.add(
                Result(
                    "agentloop",
                    "-",
                    f"view p{share} while a compaction runs",
                    median(values),
                    "ms",
                    values,
                    note=f"median over configurations; worst {max(values):.0f} ms",
                )
            )
