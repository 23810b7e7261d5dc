"""Group "memory": does the server's resident memory stay within its cache cap?

Many sessions are written (each in one batched append) and read (one prompt
view each, which loads and caches its history) through one server whose
history cache is capped by SESSIONSTORE_CACHE_MAX_MB. Far more history is
read than the cap holds, so the cache must evict. The target is RSS at most
the cap plus a fixed overhead: the interpreter, gRPC, model metadata,
tiktoken's encodings and connection pools, which do not grow with sessions.

Then where the memory goes: a second, smaller pass (a tenth of the sessions
and of the cap, so the cache still evicts) through a server whose Python heap
is traced from its start (tests.bench.heap), profiled idle and after the pass,
by package. Tracing slows the server and costs memory of its own, so the
figures above come from the untraced server.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.readmodels.admin import migrate_database
from tests.bench import heap, turns
from tests.bench.config import Context
from tests.bench.report import Result, Target, median
from tests.bench.server import (
    Database,
    ServerProcess,
    database,
    new_channel,
    run_threads,
    running,
)

FIXED_OVERHEAD_MB = 150
CLIENT_THREADS = 4
# RSS is sampled this many times over the write+read pass, for the JSON and plot.
SAMPLES = 20
# The traced pass: this share of the sessions and of the cap; packages printed.
TRACED_SHARE = 10
TOP_PACKAGES = 14


def _template(entries: int) -> pb.AppendEntriesRequest:
    """One session's worth of chat: alternating user and assistant messages."""
    chat = [turns.user(n) if n % 2 == 0 else turns.answer(n) for n in range(entries)]
    return pb.AppendEntriesRequest(entries=chat)


def memory(ctx: Context) -> None:
    scale = ctx.scale
    for backend in scale.memory_backends:
        if backend not in ctx.backends:
            continue
        print(
            f"[memory] {backend}: {scale.memory_sessions:,} sessions x {scale.memory_entries} "
            f"entries, cache cap {scale.memory_cap_mb} MB",
            flush=True,
        )
        with (
            database(backend) as db,
            _migrated(db),
            running(db, cache_max_mb=scale.memory_cap_mb) as server,
        ):
            stub = server.stub()
            turns.create(stub)  # warm: model metadata, connection pool
            idle = [_pause_then(server.rss_bytes) / 2**20 for _ in range(scale.reps)]
            ids = [f"mem-{i}" for i in range(scale.memory_sessions)]
            rates, samples = _write_and_read(server, ids, _template(scale.memory_entries))
            # Steady state: more reads at random, each run evicting and reloading;
            # RSS after each run is one sample of the figure.
            rng = random.Random(3)
            after: list[float] = []
            for _ in range(scale.reps):
                chosen = rng.sample(ids, max(1, len(ids) // 20))
                _read_all(server, chosen)
                after.append(server.rss_bytes() / 2**20)
        _report(ctx, backend, idle, after, rates, samples)
        _heap_profile(ctx, backend)


@contextlib.contextmanager
def _migrated(db: Database) -> Iterator[None]:
    """The read models' tables migrated before the server starts, as a deployment's
    migration job does: a server that migrates keeps alembic in memory."""
    migrate_database(db.url)
    yield


def _pause_then(read: Callable[[], int]) -> int:
    time.sleep(0.2)
    return read()


def _write_and_read(
    server: ServerProcess, ids: list[str], template: pb.AppendEntriesRequest
) -> tuple[list[float], list[tuple[int, float]]]:
    """Creates, fills and views every session; returns sessions/s per tenth, RSS samples."""
    done = [0]
    lock = threading.Lock()
    tenth = max(1, len(ids) // 10)
    marks: list[float] = [time.perf_counter()]
    samples: list[tuple[int, float]] = []

    def work(mine: list[str]) -> None:
        with new_channel(server.port) as channel:
            stub = turns.Stub(channel)
            for session_id in mine:
                turns.create(stub, session_id)
                request = pb.AppendEntriesRequest()
                request.CopyFrom(template)
                request.session_id = session_id
                stub.AppendEntries(request)
                stub.GetPromptView(pb.GetPromptViewRequest(session_id=session_id))
                with lock:
                    done[0] += 1
                    if done[0] % tenth == 0:
                        marks.append(time.perf_counter())
                    if done[0] % max(1, len(ids) // SAMPLES) == 0:
                        samples.append((done[0], server.rss_bytes() / 2**20))

    run_threads([partial(work, ids[i::CLIENT_THREADS]) for i in range(CLIENT_THREADS)], server)
    rates = [tenth / (b - a) for a, b in itertools.pairwise(marks)]
    return rates, samples


def _read_all(server: ServerProcess, ids: list[str]) -> None:
    def work(mine: list[str]) -> None:
        with new_channel(server.port) as channel:
            stub = turns.Stub(channel)
            for session_id in mine:
                stub.GetPromptView(pb.GetPromptViewRequest(session_id=session_id))

    run_threads([partial(work, ids[i::CLIENT_THREADS]) for i in range(CLIENT_THREADS)], server)


def _report(
    ctx: Context,
    backend: str,
    idle: list[float],
    after: list[float],
    rates: list[float],
    samples: list[tuple[int, float]],
) -> None:
    scale = ctx.scale
    cap = scale.memory_cap_mb
    rss = median(after)
    idle_mb = median(idle)
    report = ctx.report
    label = f"{scale.memory_sessions:,} sessions x {scale.memory_entries}"
    report.add(
        Result(
            "memory",
            backend,
            f"server RSS, {label} touched",
            rss,
            "MB",
            after,
            target=Target("<=", cap + FIXED_OVERHEAD_MB, f"<= cap+{FIXED_OVERHEAD_MB} MB"),
            ratio=rss / cap,
            ratio_of="cap",
        )
    )
    report.add(
        Result(
            "memory", backend, "cache cap (SESSIONSTORE_CACHE_MAX_MB)", cap, "MB", note="configured"
        )
    )
    report.add(
        Result(
            "memory",
            backend,
            "RSS - cap (overhead beyond the cap)",
            rss - cap,
            "MB",
            [a - cap for a in after],
        )
    )
    report.add(
        Result(
            "memory",
            backend,
            "idle server RSS (after first create)",
            idle_mb,
            "MB",
            idle,
            note="before any session was written",
        )
    )
    # What the sessions themselves cost: real memory over the cache's own estimate.
    report.add(
        Result(
            "memory",
            backend,
            "RSS - idle RSS (growth from sessions)",
            rss - idle_mb,
            "MB",
            [a - idle_mb for a in after],
            ratio=(rss - idle_mb) / cap,
            ratio_of="cap",
        )
    )
    # Bounded means flat once the cache is full: growth over the last 80% of sessions.
    fifth = next((mb for done, mb in samples if done >= scale.memory_sessions // 5), None)
    if fifth is not None:
        report.add(
            Result(
                "memory",
                backend,
                "RSS growth over the last 80% of sessions",
                rss - fifth,
                "MB",
                [a - fifth for a in after],
                ratio=(rss - fifth) / cap,
                ratio_of="cap",
            )
        )
    report.add(
        Result(
            "memory",
            backend,
            f"write+view {scale.memory_entries}-entry sessions, {CLIENT_THREADS} clients",
            median(rates),
            "sessions/s",
            rates,
            note="median of the ten tenths of the pass",
        )
    )
    report.keep(
        f"memory.{backend}",
        {
            "sessions": scale.memory_sessions,
            "entries_per_session": scale.memory_entries,
            "cap_mb": cap,
            "fixed_overhead_mb": FIXED_OVERHEAD_MB,
            "idle_rss_mb": idle,
            "rss_after_runs_mb": after,
            "rss_during_pass_mb": samples,
            "sessions_per_s_by_tenth": rates,
        },
    )


def _heap_profile(ctx: Context, backend: str) -> None:
    """Where a server's memory goes, idle and once its cache evicts: its traced
    Python heap by package (the innermost Python frame of each allocation, so a C
    call's memory is its caller's), and what RSS holds beyond that heap."""
    scale = ctx.scale
    sessions = max(100, scale.memory_sessions // TRACED_SHARE)
    cap = max(4, scale.memory_cap_mb // TRACED_SHARE)
    print(f"[memory] {backend}: heap profile, {sessions:,} sessions, cap {cap} MB", flush=True)
    path = Path(tempfile.mkdtemp(prefix="sessionstore-heap-")) / "heap.json"
    env = {"PYTHONTRACEMALLOC": "1", heap.ENV: str(path)}
    with (
        database(backend) as db,
        _migrated(db),
        running(db, cache_max_mb=cap, module="tests.bench.heap", env=env) as server,
    ):
        turns.create(server.stub())
        time.sleep(0.2)
        idle, idle_rss = heap.ask(path), server.rss_bytes()
        ids = [f"heap-{i}" for i in range(sessions)]
        _write_and_read(server, ids, _template(scale.memory_entries))
        after, after_rss = heap.ask(path), server.rss_bytes()
    path.unlink(missing_ok=True)
    path.parent.rmdir()
    mb = 2**20
    idle_by: dict[str, int] = idle["by_package"]  # type: ignore[assignment]
    after_by: dict[str, int] = after["by_package"]  # type: ignore[assignment]
    print(f"  {'package (live Python heap)':<34} {'idle MB':>8} {'after MB':>9} {'growth':>8}")
    for name in list(after_by)[:TOP_PACKAGES]:
        was, now = idle_by.get(name, 0), after_by[name]
        print(f"  {name:<34} {was / mb:8.1f} {now / mb:9.1f} {(now - was) / mb:+8.1f}")
    for label, profile, rss in (("idle", idle, idle_rss), ("after", after, after_rss)):
        traced = int(profile["traced_bytes"])  # type: ignore[call-overload]
        overhead = int(profile["tracemalloc_overhead_bytes"])  # type: ignore[call-overload]
        rest = rss - traced - overhead
        print(
            f"  {label}: RSS {rss / mb:.0f} MB = traced heap {traced / mb:.0f} MB + "
            f"tracemalloc's own {overhead / mb:.0f} MB + the rest {rest / mb:.0f} MB"
            " (the interpreter, C libraries' own memory, allocator slack)",
            flush=True,
        )
    ctx.report.add(
        Result(
            "memory",
            backend,
            "traced Python heap, idle server",
            int(idle["traced_bytes"]) / mb,  # type: ignore[call-overload]
            "MB",
            note="heap profile pass (tests.bench.heap); by package in the JSON",
        )
    )
    ctx.report.keep(
        f"memory.{backend}.heap",
        {
            "sessions": sessions,
            "cap_mb": cap,
            "idle": idle,
            "after": after,
            "idle_rss_bytes": idle_rss,
            "after_rss_bytes": after_rss,
        },
    )
