"""Groups "view" and "replay": how long a prompt view takes, now and as of the past.

Warm: the same server asked again and again, its session history cached.
Cold: a fresh server process asked once, right after its health check says
SERVING; that first view loads the session from the database. Server start
(spawn to SERVING) is reported on its own.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Iterator

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.bench import turns
from tests.bench.config import Context
from tests.bench.report import Result, Target, median, percentile
from tests.bench.server import running


def _view(stub: turns.Stub, session_id: str, version: int = 0) -> tuple[float, pb.PromptView]:
    request = pb.GetPromptViewRequest(session_id=session_id)
    if version:
        request.version = version
    began = time.perf_counter()
    view = stub.GetPromptView(request)
    return time.perf_counter() - began, view


# -- group "view" ------------------------------------------------------------------------


def view(ctx: Context) -> None:
    scale = ctx.scale
    for backend in ctx.backends:
        print(f"[view] {backend}", flush=True)
        db, server = ctx.shared(backend)
        stub = server.stub()
        warm: dict[int, list[list[float]]] = {size: [] for size in scale.view_sizes}
        shapes: dict[int, tuple[int, int, int]] = {}
        built = {size: turns.build_with_history(stub, size) for size in scale.view_sizes}
        for size, session in built.items():
            _, first = _view(stub, session.session_id)
            shapes[size] = (first.version, len(first.messages_json), session.entries)
        for _ in range(scale.reps):
            for size, session in built.items():
                warm[size].append(
                    [_view(stub, session.session_id)[0] for _ in range(scale.warm_views)]
                )
        cold: dict[int, list[float]] = {size: [] for size in scale.cold_sizes}
        starts: list[float] = []
        for _ in range(scale.reps):
            for size in scale.cold_sizes:
                # A fresh process on the same database; the shared server idles.
                with running(db) as fresh:
                    seconds, answer = _view(fresh.stub(), built[size].session_id)
                    starts.append(fresh.start_seconds)
                # The fresh server must answer what the warm one did.
                assert (answer.version, len(answer.messages_json)) == shapes[size][:2]
                cold[size].append(seconds)
        _report_view(ctx, backend, warm, cold, starts, shapes)


def _report_view(
    ctx: Context,
    backend: str,
    warm: dict[int, list[list[float]]],
    cold: dict[int, list[float]],
    starts: list[float],
    shapes: dict[int, tuple[int, int, int]],
) -> None:
    report = ctx.report
    raw: dict[str, object] = {}
    for size in sorted(warm):
        p50s = [percentile(run, 50) * 1e3 for run in warm[size]]
        p99s = [percentile(run, 99) * 1e3 for run in warm[size]]
        cold_ms = [s * 1e3 for s in cold.get(size, [])]
        is_10k = size == 10_000
        version, json_bytes, entries = shapes[size]
        label = f"{size:,} entries"
        report.add(
            Result(
                "view",
                backend,
                f"warm p50, {label}",
                median(p50s),
                "ms",
                p50s,
                target=Target("<", 5.0, "< 5 ms") if is_10k else None,
            )
        )
        report.add(Result("view", backend, f"warm p99, {label}", median(p99s), "ms", p99s))
        if cold_ms:
            report.add(
                Result(
                    "view",
                    backend,
                    f"cold first view, {label}",
                    median(cold_ms),
                    "ms",
                    cold_ms,
                    target=Target("<", 100.0, "< 100 ms") if is_10k else None,
                    ratio=median(cold_ms) / median(p50s),
                    ratio_of="warm p50",
                )
            )
        raw[str(size)] = {
            "entries": entries,
            "version": version,
            "messages_json_bytes": json_bytes,
            "warm_p50_ms": p50s,
            "warm_p99_ms": p99s,
            "warm_latencies_ms": [[round(x * 1e3, 3) for x in run] for run in warm[size]],
            "cold_ms": cold_ms,
        }
    report.add(
        Result(
            "view",
            backend,
            "server start (spawn to SERVING)",
            median(starts) * 1e3,
            "ms",
            [s * 1e3 for s in starts],
        )
    )
    raw["server_start_ms"] = [s * 1e3 for s in starts]
    report.keep(f"view.{backend}", raw)


# -- group "replay" ----------------------------------------------------------------------


def _replay_requests(session_id: str, first: int, last: int) -> Iterator[pb.AppendEntriesRequest]:
    """Appends of 1 or 2 entries, each complete in itself (a call travels with its result).

    Sent with several in flight, they may land in any order and still be valid.
    """
    for n in range(first, last):
        kind = n % 3
        if kind == 0:
            entries = [turns.user(n)]
        elif kind == 1:
            call_id = f"r{n}"
            entries = [turns.tool_call(n, call_id), turns.tool_result(n, call_id)]
        else:
            entries = [turns.answer(n)]
        yield pb.AppendEntriesRequest(session_id=session_id, entries=entries)


def build_many_events(stub: turns.Stub, events: int) -> tuple[str, list[float]]:
    """A session of about ``events`` events with a compaction and prunes among them.

    Returns the session id and the append rate of each fifth of the build.
    """
    session_id = turns.create(stub)
    appends = events - 4  # Started, a compaction and two prunes are events too
    bounds = [appends * i // 5 for i in range(6)]
    rates: list[float] = []
    for part, (first, last) in enumerate(itertools.pairwise(bounds)):
        began = time.perf_counter()
        turns.pipelined(stub, _replay_requests(session_id, first, last))
        rates.append((last - first) / (time.perf_counter() - began))
        if part == 1:
            kept = _compact_half(stub, session_id)
            _prune(stub, session_id, kept[:20])
    _prune(stub, session_id, kept[20:40])
    return session_id, rates


def _compact_half(stub: turns.Stub, session_id: str) -> list[str]:
    """Compacts away the older half; returns the tool results in the newest quarter."""
    log = stub.GetDurableLog(pb.GetViewRequest(session_id=session_id))
    users = [e.id for e in log.entries if e.role == pb.ROLE_USER]
    results = [e.id for e in log.entries if e.role == pb.ROLE_TOOL]
    # Every call is answered in its own append, so any user entry is a valid cut.
    stub.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session_id,
            summary="## Goal\nReplay benchmark.\n## Progress\n" + turns.TEXTS.answer[0],
            first_kept_entry_id=users[len(users) // 2],
            tokens_before=50_000,
            tokens_after=1_000,
            reason="threshold",
        )
    )
    return results[len(results) * 3 // 4 :]


def _prune(stub: turns.Stub, session_id: str, entry_ids: list[str]) -> None:
    stub.RecordPrune(
        pb.RecordPruneRequest(
            session_id=session_id,
            entries=[
                pb.PrunedEntry(entry_id=i, action=pb.PRUNE_ACTION_HARD_CLEAR) for i in entry_ids
            ],
            reason="cache-ttl",
        )
    )


def replay(ctx: Context) -> None:
    scale = ctx.scale
    for backend in ctx.backends:
        print(f"[replay] {backend}", flush=True)
        stub = ctx.shared(backend)[1].stub()
        session_id, build_rates = build_many_events(stub, scale.replay_events)
        _, latest = _view(stub, session_id)
        rng = random.Random(7)
        runs: list[list[float]] = []
        versions: list[list[int]] = []
        for _ in range(scale.reps):
            chosen = [rng.randint(2, latest.version) for _ in range(scale.replay_views)]
            versions.append(chosen)
            runs.append([_view(stub, session_id, v)[0] for v in chosen])
        p50s = [percentile(run, 50) * 1e3 for run in runs]
        p99s = [percentile(run, 99) * 1e3 for run in runs]
        label = f"{latest.version:,} events"
        ctx.report.add(
            Result(
                "replay",
                backend,
                f"view at random past version p50, {label}",
                median(p50s),
                "ms",
                p50s,
                target=Target("<", 20.0, "< 20 ms"),
            )
        )
        ctx.report.add(
            Result(
                "replay",
                backend,
                f"view at random past version p99, {label}",
                median(p99s),
                "ms",
                p99s,
            )
        )
        ctx.report.add(
            Result(
                "replay",
                backend,
                "build: 1-2 entry appends, 16 in flight",
                median(build_rates),
                "appends/s",
                build_rates,
                note="median of the build's five parts",
            )
        )
        ctx.report.keep(
            f"replay.{backend}",
            {
                "events": latest.version,
                "latest_messages_json_bytes": len(latest.messages_json),
                "p50_ms": p50s,
                "p99_ms": p99s,
                "versions": versions,
                "latencies_ms": [[round(x * 1e3, 3) for x in run] for run in runs],
                "build_appends_per_s": build_rates,
            },
        )


# -- group "coldcut" ---------------------------------------------------------------------


def coldcut(ctx: Context) -> None:
    """A cold view of a long session compacted down to a few hundred kept entries.

    The fresh server loads the session from its latest cut: the aggregate, the
    events from the one that appended the first kept entry on, and the few
    earlier ones still in force. For comparison, the same fresh server's first
    read of a compacted-away entry, which folds the whole session (what every
    cold view cost before).
    """
    scale = ctx.scale
    size = scale.view_sizes[-1]
    kept = 300
    for backend in ctx.backends:
        print(f"[coldcut] {backend}", flush=True)
        db, server = ctx.shared(backend)
        stub = server.stub()
        built = turns.build_compacted(stub, size, kept)
        _, warm = _view(stub, built.session_id)
        old_entry = built.turns[0][0]
        cut: list[float] = []
        whole: list[float] = []
        for _ in range(scale.reps):
            with running(db) as fresh:
                cold_stub = fresh.stub()
                seconds, answer = _view(cold_stub, built.session_id)
                assert (answer.version, list(answer.messages_json)) == (
                    warm.version,
                    list(warm.messages_json),
                )
                cut.append(seconds)
                began = time.perf_counter()
                cold_stub.GetEntry(
                    pb.GetEntryRequest(session_id=built.session_id, entry_id=old_entry)
                )
                whole.append(time.perf_counter() - began)
        cut_ms = [s * 1e3 for s in cut]
        whole_ms = [s * 1e3 for s in whole]
        log = stub.GetDurableLog(pb.GetViewRequest(session_id=built.session_id))
        label = f"{built.entries:,} entries, {len(log.entries):,} kept"
        ctx.report.add(
            Result(
                "coldcut",
                backend,
                f"cold view from the cut, {label}",
                median(cut_ms),
                "ms",
                cut_ms,
                target=Target("<", 20.0, "< 20 ms"),
                ratio=median(whole_ms) / median(cut_ms),
                ratio_of="full fold / from the cut",
            )
        )
        ctx.report.add(
            Result(
                "coldcut",
                backend,
                "full fold (compacted-away entry, first read after the cut load)",
                median(whole_ms),
                "ms",
                whole_ms,
                note="what a cold view cost when it decoded every event",
            )
        )
        ctx.report.keep(
            f"coldcut.{backend}",
            {
                "entries": built.entries,
                "version": warm.version,
                "messages": len(warm.messages_json),
                "cut_ms": cut_ms,
                "full_fold_ms": whole_ms,
            },
        )
