"""Group "engine": what the context engine costs a client.

* Warm prompt view with the engine on: the default layered engine (window
  guard, pruning when configured, compaction when over budget) runs for every
  view of the current version. A session of 10,000 short entries (~50 tokens)
  in a window of 1,000,000 tokens stays under its budget, so the figure is
  the engine's check, not a compaction. Next to it, the same session's view
  as of its latest version, which reads without the engine.
* Offline compaction: ``Compact`` (force) on a session of ~200,000 tokens
  (tool calls and results among the entries) with the default offline
  summariser, timed by its caller; the receipt's figures are reported.
* Appends during a summariser call: a loopback provider speaking OpenAI's
  protocol takes 2 s per call; while ``Compact`` waits on it for one
  session, appends go on to another session and to the same one. Their p50
  is compared with appends while nothing compacts, on the same server.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.bench import turns
from tests.bench.config import Context
from tests.bench.report import Result, Target, median, percentile
from tests.bench.server import database, running
from tests.support.fake_provider import Behaviour, FakeProvider

# 1: view
VIEW_WINDOW_TOKENS = 1_000_000
# 2: offline compaction
COMPACT_WINDOW_TOKENS = 1_000_000
# 3: appends during a summariser call
SUMMARISER_DELAY_S = 2.0
SUMMARISER_MODEL = "openai/fake-summarizer"
SUMMARISER_WINDOW_TOKENS = 128_000
FILL_WINDOW_TOKENS = 100_000
# The budget is 80,000 tokens (0.8 of the window). The session is filled to
# 68% of the window; the appends measured on it are short user messages
# (~10 tokens), at most QUIET_APPENDS + DURING_APPENDS of them, so that they
# do not cross the budget on their own.
FILL_SHARE = 0.68
QUIET_APPENDS = 150
DURING_APPENDS = 700
# Appends are paced, as an agent's are: one every 10 ms at most, so that
# those made during a compaction span all of it.
APPEND_INTERVAL_S = 0.010

_ids = itertools.count()


# -- what is written ------------------------------------------------------------------------


def _short(entry: pb.Entry, chars: int) -> pb.Entry:
    """The entry with each text cut to ``chars`` characters."""
    for block in entry.content:
        kind = block.WhichOneof("block")
        if kind == "text":
            block.text.text = block.text.text[:chars]
        elif kind == "tool_result":
            block.tool_result.content = block.tool_result.content[:chars]
    return entry


def short_turn(n: int) -> list[pb.Entry]:
    """An agent turn of four entries of ~50 tokens each (texts cut to ~200 chars)."""
    return [_short(e, 200) for e in turns.agent_turn(n, call_prefix="s")]


def build(
    stub: turns.Stub, entries: int, make_turn: Callable[[int], list[pb.Entry]], **settings: Any
) -> str:
    """A session of ``entries`` entries, written in batches of 2,500."""
    session_id = turns.create(stub, **settings)
    per_batch = turns.BUILD_BATCH // 4
    made = 0
    while made < entries:
        batch = []
        for _ in range(min(per_batch, (entries - made) // 4)):
            batch.extend(make_turn(next(_ids)))
        if not batch:
            break
        turns.append(stub, session_id, batch)
        made += len(batch)
    return session_id


def _one_user_entry_ms(stub: turns.Stub, session_id: str) -> float:
    """One append of a short user message (~10 tokens)."""
    n = next(_ids)
    entry = pb.Entry(
        role=pb.ROLE_USER,
        content=[pb.ContentBlock(text=pb.TextBlock(text=f"Go on with step {n}."))],
    )
    began = time.perf_counter()
    turns.append(stub, session_id, [entry])
    return (time.perf_counter() - began) * 1e3


# -- 1: warm prompt view ---------------------------------------------------------------------


def _view_ms(stub: turns.Stub, session_id: str, version: int = 0) -> tuple[float, pb.PromptView]:
    request = pb.GetPromptViewRequest(session_id=session_id)
    if version:
        request.version = version
    began = time.perf_counter()
    answer = stub.GetPromptView(request)
    return (time.perf_counter() - began) * 1e3, answer


def _warm_view(ctx: Context, backend: str, stub: turns.Stub) -> None:
    scale = ctx.scale
    entries = scale.engine_view_entries
    session_id = build(stub, entries, short_turn, context_window_tokens=VIEW_WINDOW_TOKENS)
    _, first = _view_ms(stub, session_id)
    # The figure is the engine's check: nothing may have compacted or pruned.
    assert not first.actions, [a.kind for a in first.actions]
    assert first.estimated_tokens <= first.budget_tokens
    engine_runs: list[list[float]] = []
    plain_runs: list[list[float]] = []
    for _ in range(scale.reps):
        engine_runs.append([_view_ms(stub, session_id)[0] for _ in range(scale.warm_views)])
        plain_runs.append(
            [_view_ms(stub, session_id, first.version)[0] for _ in range(scale.warm_views)]
        )
    p50s = [percentile(run, 50) for run in engine_runs]
    p99s = [percentile(run, 99) for run in engine_runs]
    plain = [percentile(run, 50) for run in plain_runs]
    label = f"{entries:,} entries, ~{first.estimated_tokens // 1000:,}k tokens"
    ctx.report.add(
        Result(
            "engine",
            backend,
            f"warm view p50, engine on, {label}",
            median(p50s),
            "ms",
            p50s,
            target=Target("<", 5.0, "< 5 ms"),
            note=f"layered engine, window {VIEW_WINDOW_TOKENS:,}, budget "
            f"{first.budget_tokens:,}: no compaction",
        )
    )
    ctx.report.add(
        Result("engine", backend, f"warm view p99, engine on, {label}", median(p99s), "ms", p99s)
    )
    ctx.report.add(
        Result(
            "engine",
            backend,
            "warm view p50, as of latest version (no engine)",
            median(plain),
            "ms",
            plain,
            ratio=median(p50s) / median(plain),
            ratio_of="engine on / no engine",
        )
    )
    ctx.report.keep(
        f"engine.{backend}.view",
        {
            "entries": entries,
            "version": first.version,
            "estimated_tokens": first.estimated_tokens,
            "budget_tokens": first.budget_tokens,
            "messages_json_bytes": len(first.messages_json),
            "engine": first.engine,
            "p50_ms": p50s,
            "p99_ms": p99s,
            "as_of_latest_p50_ms": plain,
            "latencies_ms": [[round(x, 3) for x in run] for run in engine_runs],
            "as_of_latest_latencies_ms": [[round(x, 3) for x in run] for run in plain_runs],
        },
    )


# -- 2: offline compaction -------------------------------------------------------------------


def _offline_compaction(ctx: Context, backend: str, stub: turns.Stub) -> None:
    entries = ctx.scale.engine_compact_entries
    seconds: list[float] = []
    receipts: list[dict[str, Any]] = []
    for _ in range(ctx.scale.reps):
        session_id = build(
            stub, entries, turns.agent_turn, context_window_tokens=COMPACT_WINDOW_TOKENS
        )
        total = stub.GetSession(pb.GetSessionRequest(session_id=session_id)).total_tokens
        began = time.perf_counter()
        answer = stub.Compact(pb.CompactRequest(session_id=session_id, force=True))
        seconds.append(time.perf_counter() - began)
        assert answer.compacted, answer.reason
        c = answer.compaction
        receipts.append(
            {
                "session_tokens": total,
                "tokens_before": c.tokens_before,
                "tokens_after": c.tokens_after,
                "entries_covered": c.entries_covered,
                "chunks": c.chunks,
                "fallback_stage": c.fallback_stage,
                "summarizer_model": c.summarizer_model,
                "summary_tokens": c.summary_tokens,
                "duration_ms": c.duration_ms,
                "reason": answer.reason,
            }
        )
    r = receipts[len(receipts) // 2]
    ctx.report.add(
        Result(
            "engine",
            backend,
            f"offline Compact, {entries:,} entries, ~{int(r['tokens_before']) // 1000}k tokens",
            median(seconds) * 1e3,
            "ms",
            [s * 1e3 for s in seconds],
            target=Target("<", 1000.0, "< 1 s"),
            note=f"receipt: {r['tokens_before']:,} -> {r['tokens_after']:,} tokens, "
            f"{r['entries_covered']:,} entries covered, {r['chunks']} chunk(s), stage "
            f"{r['fallback_stage']}, summariser {r['summarizer_model'] or 'offline'}, "
            f"{r['duration_ms']} ms in the engine",
        )
    )
    ctx.report.keep(
        f"engine.{backend}.compact",
        {"entries": entries, "wall_ms": [s * 1e3 for s in seconds], "receipts": receipts},
    )


# -- 3: appends during a summariser call ---------------------------------------------------


class SlowProvider(FakeProvider):
    """The loopback provider, taking ``SUMMARISER_DELAY_S`` for every reply."""

    def _next(self) -> Behaviour:
        return Behaviour(delay=SUMMARISER_DELAY_S)


@dataclass
class _Phase:
    """Append latencies (ms) to one session, with and without a compaction running."""

    quiet: list[float] = field(default_factory=list)
    during: list[float] = field(default_factory=list)
    # Per run: p50 quiet, p50 during.
    quiet_p50: list[float] = field(default_factory=list)
    during_p50: list[float] = field(default_factory=list)
    during_max: list[float] = field(default_factory=list)
    quiet_max: list[float] = field(default_factory=list)


def _fill(stub: turns.Stub, provider: FakeProvider) -> str:
    """A session filled to ``FILL_SHARE`` of its window, summarised by the slow provider."""
    session_id = turns.create(
        stub,
        context_window_tokens=FILL_WINDOW_TOKENS,
        compaction=pb.CompactionPolicy(
            summarizer_model=SUMMARISER_MODEL,
            summarizer_api_base=provider.openai_base,
            summarizer_window_tokens=SUMMARISER_WINDOW_TOKENS,
        ),
    )
    goal = int(FILL_WINDOW_TOKENS * FILL_SHARE)
    tokens = 0
    while tokens < goal:
        # Agent turns are ~400 tokens: smaller batches near the goal.
        count = max(1, min(25, (goal - tokens) // 800))
        batch = [e for _ in range(count) for e in turns.agent_turn(next(_ids), call_prefix="f")]
        turns.append(stub, session_id, batch)
        tokens = stub.GetSession(pb.GetSessionRequest(session_id=session_id)).total_tokens
    return session_id


def _paced(stub: turns.Stub, session_id: str, next_at: float) -> tuple[float, float]:
    """Waits for ``next_at``, appends; returns the latency and when the next may start."""
    delay = next_at - time.perf_counter()
    if delay > 0:
        time.sleep(delay)
    began = time.perf_counter()
    return _one_user_entry_ms(stub, session_id), began + APPEND_INTERVAL_S


def _appends(stub: turns.Stub, session_id: str, count: int) -> list[float]:
    out: list[float] = []
    next_at = 0.0
    for _ in range(count):
        latency, next_at = _paced(stub, session_id, next_at)
        out.append(latency)
    return out


def _compactions(stub: turns.Stub, session_id: str) -> int:
    return int(stub.GetSession(pb.GetSessionRequest(session_id=session_id)).compaction_count)


def _appends_during_compact(
    stub: turns.Stub, target: str, compacted: str
) -> tuple[list[float], pb.CompactResponse, float]:
    """Appends to ``target`` back to back while ``Compact`` runs on ``compacted``
    (at most ``DURING_APPENDS``, so that the same session stays under its budget)."""
    answers: list[pb.CompactResponse] = []
    failures: list[BaseException] = []

    def compact() -> None:
        try:
            answers.append(stub.Compact(pb.CompactRequest(session_id=compacted, force=True)))
        except BaseException as error:
            failures.append(error)

    thread = threading.Thread(target=compact)
    began = time.perf_counter()
    thread.start()
    latencies: list[float] = []
    next_at = 0.0
    while thread.is_alive() and len(latencies) < DURING_APPENDS:
        latency, next_at = _paced(stub, target, next_at)
        latencies.append(latency)
    thread.join()
    elapsed = time.perf_counter() - began
    if failures:
        raise failures[0]
    # The last append may have started after the compaction ended; keep it (it
    # overlapped the compaction's recording).
    return latencies, answers[0], elapsed


def _appends_during_summary(ctx: Context, backend: str) -> None:
    reps = ctx.scale.reps
    other = _Phase()
    same = _Phase()
    receipts: list[dict[str, Any]] = []
    with (
        SlowProvider() as provider,
        database(backend) as db,
        running(db, env={"OPENAI_API_KEY": "sk-bench-loopback"}) as server,
    ):
        stub = server.stub()
        # A window no number of these appends fills: it never compacts.
        bystander = turns.create(stub, context_window_tokens=turns.STORE_WINDOW_TOKENS)
        # Warm: tokenizer, pool, and litellm's first call (imports, client).
        turns.append(stub, bystander, turns.agent_turn(next(_ids)))
        warm = _fill(stub, provider)
        stub.Compact(pb.CompactRequest(session_id=warm, force=True))
        for _ in range(reps):
            for phase, same_session in ((other, False), (same, True)):
                session_id = _fill(stub, provider)
                target = session_id if same_session else bystander
                quiet = _appends(stub, target, QUIET_APPENDS)
                # Only the requested compaction may run: none started on its own.
                assert _compactions(stub, session_id) == 0
                calls_before = len(provider.requests)
                during, answer, elapsed = _appends_during_compact(stub, target, session_id)
                assert answer.compacted, answer.reason
                assert _compactions(stub, session_id) == 1
                c = answer.compaction
                receipts.append(
                    {
                        "same_session": same_session,
                        "provider_calls": len(provider.requests) - calls_before,
                        "appends_during": len(during),
                        "compact_wall_ms": round(elapsed * 1e3, 1),
                        "tokens_before": c.tokens_before,
                        "tokens_after": c.tokens_after,
                        "chunks": c.chunks,
                        "fallback_stage": c.fallback_stage,
                        "summarizer_model": c.summarizer_model,
                        "duration_ms": c.duration_ms,
                    }
                )
                phase.quiet.extend(quiet)
                phase.during.extend(during)
                phase.quiet_p50.append(percentile(quiet, 50))
                phase.during_p50.append(percentile(during, 50))
                phase.during_max.append(max(during))
                phase.quiet_max.append(max(quiet))
    r = receipts[0]
    note = (
        f"{SUMMARISER_DELAY_S:.0f} s per summariser call on loopback; Compact made "
        f"{r['provider_calls']} call(s), {r['compact_wall_ms']:,.0f} ms, "
        f"{r['appends_during']} appends 10 ms apart during it; "
        f"{r['tokens_before']:,} -> {r['tokens_after']:,} tokens, stage {r['fallback_stage']}"
    )
    for phase, where in ((other, "another session"), (same, "the same session")):
        ctx.report.add(
            Result(
                "engine",
                backend,
                f"append p50 to {where}, no compaction",
                median(phase.quiet_p50),
                "ms",
                phase.quiet_p50,
            )
        )
        ctx.report.add(
            Result(
                "engine",
                backend,
                f"append p50 to {where}, during summariser call",
                median(phase.during_p50),
                "ms",
                phase.during_p50,
                target=Target("<=", 1.2, "<= 1.2x no compaction", on="ratio"),
                ratio=median(phase.during_p50) / median(phase.quiet_p50),
                ratio_of="no compaction",
                note=note,
            )
        )
        ctx.report.add(
            Result(
                "engine",
                backend,
                f"append max to {where}, during summariser call",
                median(phase.during_max),
                "ms",
                phase.during_max,
                ratio=median(phase.during_max) / median(phase.quiet_max),
                ratio_of="max with no compaction",
                note="the slowest append of each run: a stall while the summary is recorded "
                f"would show here (max with no compaction: {median(phase.quiet_max):.1f} ms)",
            )
        )
    ctx.report.keep(
        f"engine.{backend}.appends",
        {
            "summariser_delay_s": SUMMARISER_DELAY_S,
            "receipts": receipts,
            **{
                f"{name}_{key}": [round(x, 3) for x in getattr(phase, key)]
                for name, phase in (("other", other), ("same", same))
                for key in ("quiet", "during", "quiet_p50", "during_p50", "quiet_max", "during_max")
            },
        },
    )


# -- the group ---------------------------------------------------------------------------------


def engine(ctx: Context) -> None:
    for backend in ctx.backends:
        print(f"[engine] {backend}", flush=True)
        stub = ctx.shared(backend)[1].stub()
        _warm_view(ctx, backend, stub)
        _offline_compaction(ctx, backend, stub)
        _appends_during_summary(ctx, backend)
