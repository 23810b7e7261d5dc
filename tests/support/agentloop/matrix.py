"""One configuration of the agent loop, run end to end: a server process, the provider, the agent.

A configuration names the provider format, the model's real window, the ratio
of the provider's token count to o200k's (and, when given, a higher or lower
one for tool results), the database, the summariser
(offline, or a model on the loopback provider through a providers file), and
whether two CPU-bound processes run beside the server, or the session is left
to believe its model's metadata (a larger window than the provider serves),
so that the store must learn the real one from an overflow.

:func:`run` answers an :class:`Outcome`: the agent's run, what the provider
saw, and :meth:`Outcome.violations`, the promises broken (empty when the
store kept them all).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessionstore_client import Client
from sessionstore_client.types import (
    CompactionPolicy,
    CompactionRecord,
    SessionSettings,
    SummarizerChain,
)

from tests.support.agentloop.agent import Agent, Run
from tests.support.agentloop.provider import SUMMARIZER_MODEL, ModelProvider, Request
from tests.support.agentloop.script import Script, script
from tests.support.server_process import ServerProcess
from tests.support.texts import Planted

# The model each format's session names; its metadata states a larger window
# (128,000 and 200,000 tokens) than the windows tried here.
SESSION_MODELS = {"openai": "openai/gpt-4o", "anthropic": "anthropic/claude-sonnet-4-5"}
SUMMARIZER_WINDOW = 32_768
BUSY_PROCESSES = 2


@dataclass(frozen=True)
class Config:
    provider_format: str
    window: int
    ratio: float
    database: str = "sqlite"
    summarizer: str = "offline"
    busy: bool = False
    learn_window: bool = False
    turns: int = 200
    seed: int = 1
    # The provider's ratio for tool results (None: ``ratio``, as for everything else).
    result_ratio: float | None = None

    @property
    def name(self) -> str:
        parts = [
            self.provider_format,
            f"{self.window // 1024}k" if self.window < 1_000_000 else "1M",
            f"x{self.ratio:g}",
            self.database,
            self.summarizer,
        ]
        if self.result_ratio is not None:
            parts.insert(3, f"results-x{self.result_ratio:g}")
        parts += ["busy"] * self.busy + ["learn-window"] * self.learn_window
        return "-".join(parts)


@dataclass
class Outcome:
    config: Config
    run: Run
    # The agent's model requests, in order, as the provider counted and answered them.
    requests: list[Request]
    invalid: list[str]
    missing_turn: list[int]
    lost_tails: list[str]
    said: list[Planted]
    kept: list[Planted]
    compactions: list[CompactionRecord]
    # Why each compaction that fell back did: its summarisers' attempts.
    fallbacks: list[str]
    summarizer_requests: int
    summarizer_overflows: int

    @property
    def fidelity(self) -> float:
        return len(self.kept) / len(self.said) if self.said else 1.0

    def view_seconds(self, during_compaction: bool | None = None) -> list[float]:
        """Latencies of the calls that answered views; with ``during_compaction``, only
        those that did (or did not) overlap a compaction's run."""
        spans = [
            (c.timestamp.timestamp() - c.duration_ms / 1000, c.timestamp.timestamp())
            for c in self.compactions
            if c.timestamp is not None
        ]
        chosen = []
        for view in self.run.views:
            overlaps = view.waited_for_compaction or any(
                start <= view.started and view.started - view.seconds <= end for start, end in spans
            )
            if during_compaction is None or overlaps == during_compaction:
                chosen.append(view.seconds)
        return chosen

    def violations(self) -> list[str]:
        """Every promise the store broke in this run."""
        run, found = self.run, []
        if run.turns_done != self.config.turns:
            found.append(f"finished {run.turns_done} of {self.config.turns} turns")
        found += [f"intervention: {i}" for i in run.interventions]
        found += [f"stranded: {s}" for s in run.stranded]
        found += [f"over budget: {o}" for o in run.over_budget]
        found += [f"hash mismatch: {h}" for h in run.hash_mismatches]
        found += [f"invalid request: {i}" for i in self.invalid]
        if run.overflows > 1:
            found.append(f"{run.overflows} provider overflows (at most 1: the one that teaches)")
        if self.missing_turn:
            found.append(f"turn in progress missing from the request in turns {self.missing_turn}")
        found += [f"a log's last line never reached the model: {c}" for c in self.lost_tails]
        if self.summarizer_overflows:
            found.append(f"{self.summarizer_overflows} summariser requests over its window")
        if self.config.summarizer == "offline" and self.fidelity < 1.0:
            lost = [p.value for p in self.said if p not in self.kept]
            found.append(f"facts the user stated lost from the prompt: {lost}")
        return found

    def figures(self) -> dict[str, Any]:
        views = sorted(self.view_seconds())
        during = sorted(self.view_seconds(during_compaction=True))
        return {
            "config": self.config.name,
            "turns": self.run.turns_done,
            "interventions": len(self.run.interventions),
            "overflows": self.run.overflows,
            "missing_turn": len(self.missing_turn),
            "lost_tails": len(self.lost_tails),
            "fidelity": round(self.fidelity, 3),
            "compactions": len(self.compactions),
            "summarizer_requests": self.summarizer_requests,
            "view_p50_ms": _ms(views, 0.5),
            "view_p99_ms": _ms(views, 0.99),
            "during_compaction_views": len(during),
            "during_compaction_p50_ms": _ms(during, 0.5),
            "during_compaction_p99_ms": _ms(during, 0.99),
            "fallback_stages": sorted({c.fallback_stage for c in self.compactions}),
        }


def _ms(ordered: list[float], share: float) -> float:
    """The ``share`` percentile of ``ordered`` seconds, in milliseconds (nearest rank)."""
    if not ordered:
        return 0.0
    return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000, 1)


def settings_for(config: Config) -> SessionSettings:
    compaction = CompactionPolicy()
    if config.summarizer == "llm":
        compaction.summarizers = SummarizerChain([f"openai/{SUMMARIZER_MODEL}@loop"])
    return SessionSettings(
        model=SESSION_MODELS[config.provider_format],
        context_window_tokens=None if config.learn_window else config.window,
        compaction=compaction,
    )


def run(config: Config, database_url: str, workdir: Path, plan: Script | None = None) -> Outcome:
    """Plays ``config``'s session against a fresh server on ``database_url``: ``plan``,
    or the coding agent's script of ``config.turns`` turns."""
    if plan is None:
        plan = script(config.seed, config.turns, call_id_prefix=_call_prefix(config))
    with ModelProvider(
        plan,
        window_tokens=config.window,
        ratio=config.ratio,
        result_ratio=config.result_ratio,
        summarizer_window_tokens=SUMMARIZER_WINDOW,
    ) as provider:
        providers_file = workdir / f"providers-{config.name}.toml"
        providers_file.write_text(
            f'[loop]\napi_base = "{provider.url}/v1"\nwindow_tokens = {SUMMARIZER_WINDOW}\n'
        )
        server = ServerProcess(database_url, providers_file=str(providers_file))
        server.start()
        try:
            with busy(config.busy), Client(server.address, timeout=120) as client:
                agent = Agent(
                    client,
                    provider,
                    plan,
                    provider_format=config.provider_format,
                    settings=settings_for(config),
                )
                result = agent.play()
                compactions = _compactions(client, result.session_id, result.position)
                fallbacks = _fallbacks(client, result.session_id, compactions)
        finally:
            server.stop()
            server.remove_log()
        requests = provider.agent_requests()
        summarizer = provider.summarizer_requests()
    kept_text = " ".join(_texts(json.loads(result.final_messages)))
    normal = " ".join(kept_text.split())
    return Outcome(
        config=config,
        run=result,
        requests=requests,
        invalid=[r.refused for r in requests + summarizer if r.refused.startswith("invalid")],
        missing_turn=sorted({r.turn for r in requests if r.missing_turn}),
        lost_tails=[c for r in requests for c in r.lost_tails],
        said=plan.said,
        kept=[p for p in plan.said if " ".join(p.value.split()) in normal],
        compactions=compactions,
        fallbacks=fallbacks,
        summarizer_requests=len(summarizer),
        summarizer_overflows=sum(1 for r in summarizer if r.refused == "overflow"),
    )


def _call_prefix(config: Config) -> str:
    return "toolu" if config.provider_format == "anthropic" else "call"


def _compactions(client: Client, session_id: str, position: int) -> list[CompactionRecord]:
    records: list[CompactionRecord] = []
    token = ""
    while True:
        page = client.list_compactions(
            session_id, page_token=token, page_size=500, min_position=position
        )
        records += page.compactions
        token = page.next_page_token
        if not token:
            return records


def _fallbacks(client: Client, session_id: str, records: list[CompactionRecord]) -> list[str]:
    found = []
    for record in records:
        if record.fallback_stage in ("", "full"):
            continue
        receipt = client.get_compaction(session_id, version=record.version).compaction
        attempts = receipt.attempts if receipt else []
        tried = "; ".join(f"{a.summarizer} {a.outcome} ({a.reason})" for a in attempts)
        found.append(f"version {record.version} {record.fallback_stage}: {tried}")
    return found


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)


@contextmanager
def busy(on: bool) -> Iterator[None]:
    """Two processes spinning on the CPU beside the server while the block runs."""
    spinners = (
        [
            subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(BUSY_PROCESSES)
        ]
        if on
        else []
    )
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


K16, K32, K128, M1 = 16_384, 32_768, 131_072, 1_048_576

# make test: every window, format, database and summariser, the ratios' extremes, a
# learned window and a busy machine, in eight sessions of 200 turns.
TEST_MATRIX = (
    Config("openai", K16, 1.0, "sqlite", "offline"),
    Config("anthropic", K16, 1.4, "postgres", "llm"),
    Config("anthropic", K32, 1.3, "sqlite", "llm"),
    Config("openai", K32, 1.15, "postgres", "offline", busy=True),
    Config("openai", K32, 1.0, "sqlite", "offline", learn_window=True),
    Config("anthropic", K128, 0.8, "postgres", "offline"),
    Config("anthropic", K128, 1.4, "postgres", "llm", learn_window=True),
    Config("anthropic", M1, 1.0, "sqlite", "offline"),
)


def bench_matrix() -> tuple[Config, ...]:
    """make bench: every window x ratio x format, the database and the summariser
    alternating so that each of their pairs meets every window and ratio; then the
    learned window and the busy machine on both databases."""
    configs = []
    for w, window in enumerate((K16, K32, K128, M1)):
        for r, ratio in enumerate((0.8, 1.0, 1.15, 1.4)):
            for f, provider_format in enumerate(("openai", "anthropic")):
                pair = (w + r + 2 * f) % 4
                database = ("sqlite", "postgres")[pair % 2]
                summarizer = ("offline", "llm")[pair // 2]
                configs.append(Config(provider_format, window, ratio, database, summarizer))
    for database in ("sqlite", "postgres"):
        configs.append(Config("openai", K32, 1.15, database, "llm", busy=True))
        configs.append(Config("anthropic", K32, 1.3, database, "offline", busy=True))
        configs.append(Config("openai", K32, 1.0, database, "offline", learn_window=True))
        configs.append(Config("anthropic", K128, 1.3, database, "llm", learn_window=True))
    return tuple(configs)
