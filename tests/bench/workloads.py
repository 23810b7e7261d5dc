"""Groups "ingest" and "length": how fast one-turn appends go, by clients and by length.

Clients are threads of this process, each with its own gRPC channel, as
separate agent processes would have. On a 2-core machine they share the CPUs
with the server and the database, which is part of what is measured.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from tests.bench import raw, turns
from tests.bench.config import Context
from tests.bench.report import Result, Target, median, percentile
from tests.bench.server import new_channel

# A turn-maker gets (client number, turn number) and returns the entries of one append.
TurnMaker = Callable[[int, int], list[pb.Entry]]


def user_turn(_client: int, n: int) -> list[pb.Entry]:
    return [turns.user(n)]


def assistant_turn(client: int, n: int) -> list[pb.Entry]:
    # Tool call ids must be unique within a session, and shared sessions have many clients.
    return turns.tool_step(n, call_prefix=f"k{client}-")


@dataclass
class ClientRun:
    appends: int
    seconds: float
    latencies: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.appends / self.seconds


# Turn numbers unique across runs: tool call ids may not repeat within a session.
# (next() on itertools.count is atomic under the GIL.)
_turn_numbers = itertools.count()


def connect(port: int, count: int) -> list[grpc.Channel]:
    """One channel per client, connected before any clock starts."""
    channels = [new_channel(port) for _ in range(count)]
    for channel in channels:
        grpc.channel_ready_future(channel).result(timeout=10)
    return channels


def run_clients(
    channels: list[grpc.Channel], session_ids: list[str], make_turn: TurnMaker, seconds: float
) -> ClientRun:
    """Each session id is one client thread appending turns back to back for ``seconds``.

    Client i uses channels[i]. The same id may appear several times: those
    clients share the session.
    """
    stubs = [pb_grpc.SessionStoreStub(c) for c in channels[: len(session_ids)]]
    start = threading.Barrier(len(session_ids) + 1)
    counts = [0] * len(session_ids)
    latencies: list[list[float]] = [[] for _ in session_ids]
    stop_at = [0.0]
    failures: list[BaseException] = []

    def client(i: int) -> None:
        stub, session_id, mine = stubs[i], session_ids[i], latencies[i]
        try:
            start.wait()
            n = 0
            while True:
                turn = make_turn(i, next(_turn_numbers))
                began = time.perf_counter()
                if began >= stop_at[0]:
                    break
                turns.append(stub, session_id, turn)
                mine.append(time.perf_counter() - began)
                n += 1
            counts[i] = n
        except BaseException as error:
            # One clear failure for the run, not a figure silently short of a client.
            failures.append(error)
            start.abort()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(session_ids))]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    stop_at[0] = began + seconds
    with contextlib.suppress(threading.BrokenBarrierError):
        start.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if failures:
        raise failures[0]
    return ClientRun(sum(counts), elapsed, [x for xs in latencies for x in xs])


# -- group "ingest" ----------------------------------------------------------------------


@dataclass(frozen=True)
class IngestCase:
    label: str
    clients: int
    shared: bool
    make_turn: TurnMaker
    entries_per_append: int


def ingest(ctx: Context) -> None:
    """Appends/s by client count, own sessions and one shared session, next to raw
    inserts by as many clients and to an empty gRPC call."""
    scale = ctx.scale
    cases = [
        IngestCase(f"{c} client(s), own sessions", c, False, user_turn, 1) for c in scale.clients
    ]
    cases += [
        IngestCase(f"{c} clients, one shared session", c, True, user_turn, 1)
        for c in scale.clients
        if c > 1
    ]
    cases.append(
        IngestCase("1 client, assistant+tool turn (3 entries)", 1, False, assistant_turn, 3)
    )
    for backend in ctx.backends:
        print(f"[ingest] {backend}", flush=True)
        db, server = ctx.shared(backend)
        stub = server.stub()
        own = [turns.create(stub) for _ in range(max(scale.clients))]
        shared = turns.create(stub)
        agent = turns.create(stub)
        channels = connect(server.port, max(scale.clients))
        try:
            run_clients(channels, own, user_turn, 0.3)  # warm connections and code paths
            empty_calls(channels[0], 0.3)
            baselines = Baselines({c: [] for c in scale.clients}, [])
            runs: dict[str, list[ClientRun]] = {c.label: [] for c in cases}
            # Rep-major order, so that drift over the run (disk, caches) hits every case alike.
            for _ in range(scale.reps):
                for clients in scale.clients:
                    baselines.raw[clients].append(
                        raw.inserts_per_second(db, scale.ingest_seconds, clients)
                    )
                baselines.empty.append(empty_calls(channels[0], scale.ingest_seconds))
                for case in cases:
                    if case.make_turn is assistant_turn:
                        ids = [agent]
                    elif case.shared:
                        ids = [shared] * case.clients
                    else:
                        ids = own[: case.clients]
                    runs[case.label].append(
                        run_clients(channels, ids, case.make_turn, scale.ingest_seconds)
                    )
        finally:
            for channel in channels:
                channel.close()
        _report_ingest(ctx, backend, cases, baselines, runs)


@dataclass
class Baselines:
    """What the store's appends are held against, per rep: raw inserts by client
    count, and one client's empty gRPC calls."""

    raw: dict[int, list[float]]
    empty: list[ClientRun]


def empty_calls(channel: grpc.Channel, seconds: float) -> ClientRun:
    """One client's back-to-back health checks: what any call to the server costs
    (the gRPC stacks on both sides, the server's layers), with nothing stored."""
    health = health_pb2_grpc.HealthStub(channel)
    request = health_pb2.HealthCheckRequest(service="")
    latencies: list[float] = []
    began = time.perf_counter()
    stop_at = began + seconds
    while (now := time.perf_counter()) < stop_at:
        health.Check(request)
        latencies.append(time.perf_counter() - now)
    return ClientRun(len(latencies), time.perf_counter() - began, latencies)


def _report_ingest(
    ctx: Context,
    backend: str,
    cases: list[IngestCase],
    baselines: Baselines,
    runs: dict[str, list[ClientRun]],
) -> None:
    report = ctx.report
    raw_runs = baselines.raw[1]
    for clients, rates in baselines.raw.items():
        label = "1 client" if clients == 1 else f"{clients} clients"
        report.add(
            Result("ingest", backend, f"raw insert, {label}", median(rates), "rows/s", rates)
        )
        key = "raw_rows_per_s" if clients == 1 else f"raw_rows_per_s_{clients}_clients"
        report.keep(f"ingest.{backend}.{key}", rates)
    empty_ms = [_mean_ms(r) for r in baselines.empty]
    report.add(
        Result("ingest", backend, "empty gRPC call, 1 client", median(empty_ms), "ms", empty_ms)
    )
    report.keep(f"ingest.{backend}.empty_call_ms", empty_ms)
    # The targets: one client's append within 2x what an empty call and a
    # raw insert cost together; several clients a share of the raw rate with as many.
    targets = {
        8: Target(">=", 0.5, ">= 0.5x raw x8", on="ratio"),
        32: Target(">=", 0.8, ">= 0.8x raw x32", on="ratio"),
    }
    for case in cases:
        case_runs = runs[case.label]
        rates = [r.rate for r in case_runs]
        own = not case.shared and case.entries_per_append == 1
        # Each run's rate over the raw rate of the same rep (with as many clients,
        # for own sessions): a same-run ratio.
        raw_same = baselines.raw.get(case.clients, raw_runs) if own else raw_runs
        ratios = [r / x for r, x in zip(rates, raw_same, strict=True)]
        report.add(
            Result(
                "ingest",
                backend,
                f"append, {case.label}",
                median(rates),
                "appends/s",
                rates,
                target=targets.get(case.clients) if own else None,
                ratio=median(ratios),
                ratio_of="raw" if case.clients == 1 or not own else f"raw x{case.clients}",
            )
        )
        p50s = [percentile(r.latencies, 50) * 1e3 for r in case_runs]
        p99s = [percentile(r.latencies, 99) * 1e3 for r in case_runs]
        report.keep(
            f"ingest.{backend}.{case.label}",
            {
                "clients": case.clients,
                "shared": case.shared,
                "entries_per_append": case.entries_per_append,
                "appends_per_s": rates,
                "ratio_to_raw": ratios,
                "p50_ms": p50s,
                "p99_ms": p99s,
                "latencies_ms_last_run": [round(x * 1e3, 3) for x in case_runs[-1].latencies],
            },
        )
        if own and case.clients == 1:
            # Mean against mean: an append, an empty call, one raw insert.
            means = [_mean_ms(r) for r in case_runs]
            floors = [e + 1e3 / x for e, x in zip(empty_ms, raw_runs, strict=True)]
            report.add(
                Result(
                    "ingest",
                    backend,
                    "append mean latency, 1 client",
                    median(means),
                    "ms",
                    means,
                    target=Target("<=", 2.0, "<= 2x call+insert", on="ratio"),
                    ratio=median([m / f for m, f in zip(means, floors, strict=True)]),
                    ratio_of="call+insert",
                )
            )
        if case.clients in (1, 8) and own:
            report.add(
                Result(
                    "ingest",
                    backend,
                    f"append p50/p99 latency, {case.clients} client(s)",
                    median(p50s),
                    "ms p50",
                    p50s,
                    note=f"p99 {median(p99s):.2f} ms",
                    ratio=median(p99s) / median(p50s),
                    ratio_of="p99/p50",
                )
            )


def _mean_ms(run: ClientRun) -> float:
    return sum(run.latencies) / len(run.latencies) * 1e3 if run.latencies else float("nan")


# -- group "length" ----------------------------------------------------------------------


def length(ctx: Context) -> None:
    """One-turn append rate at growing session lengths, built in big batches between."""
    scale = ctx.scale
    for backend in ctx.backends:
        print(f"[length] {backend}", flush=True)
        stub = ctx.shared(backend)[1].stub()
        long = turns.BuiltSession(turns.create(stub))
        rates: dict[int, list[float]] = {}
        # Runs at the first point taken right after each run at the last one:
        # the target's ratio pairs them, so that drift (disk, autovacuum, other
        # groups' leftovers) between the start and the end of the group cancels.
        paired: list[float] = []
        build_seconds: dict[int, float] = {}
        first, last = scale.lengths[0], scale.lengths[-1]

        for point in scale.lengths:
            rates[point] = []
            for rep in range(scale.reps):
                if point <= 1_000:
                    rates[point].append(_short_run(stub, point, scale.appends_per_point))
                    continue
                if rep == 0:
                    began = time.perf_counter()
                    turns.grow(stub, long, point)
                    build_seconds[point] = time.perf_counter() - began
                rates[point].append(_one_turn_rate(stub, long, scale.appends_per_point))
                if point == last:
                    paired.append(_short_run(stub, first, scale.appends_per_point))
        _report_length(ctx, backend, rates, paired, build_seconds, scale.appends_per_point)


def _short_run(stub: turns.Stub, length: int, appends: int) -> float:
    """A fresh session per run, so that the run's own appends do not move it far
    from the length it stands for."""
    session = turns.BuiltSession(turns.create(stub))
    turns.grow(stub, session, length)
    return _one_turn_rate(stub, session, appends)


def _one_turn_rate(stub: turns.Stub, session: turns.BuiltSession, appends: int) -> float:
    for n in range(5):  # warm the aggregate cache for this session
        turns.append(stub, session.session_id, [turns.user(n)])
    began = time.perf_counter()
    for n in range(appends):
        turns.append(stub, session.session_id, [turns.user(n)])
    elapsed = time.perf_counter() - began
    session.entries += appends + 5
    return appends / elapsed


def _report_length(
    ctx: Context,
    backend: str,
    rates: dict[int, list[float]],
    paired: list[float],
    build_seconds: dict[int, float],
    appends: int,
) -> None:
    points = sorted(rates)
    first, last = points[0], points[-1]
    reference = paired or rates[first]
    ratios = [r / f for r, f in zip(rates[last], reference, strict=True)]
    for point in points:
        is_last = point == last
        ctx.report.add(
            Result(
                "length",
                backend,
                f"append at entry {point:,} ({appends} appends)",
                median(rates[point]),
                "appends/s",
                rates[point],
                target=Target(">=", 0.90, f">= 0.90x @{first:,}", on="ratio") if is_last else None,
                ratio=median(ratios) if is_last else None,
                ratio_of=f"paired @{first:,}" if is_last else "",
            )
        )
    if paired:
        # The target's reference: shown, since it can differ from the first row by drift.
        ctx.report.add(
            Result(
                "length",
                backend,
                f"append at entry {first:,}, each run right after one @{last:,}",
                median(paired),
                "appends/s",
                paired,
            )
        )
    ctx.report.keep(
        f"length.{backend}",
        {
            "points": points,
            "appends_per_s": {str(p): rates[p] for p in points},
            "paired_first_point_appends_per_s": paired,
            "ratio_last_to_paired_first": ratios,
            "build_seconds_to_point": {str(p): s for p, s in build_seconds.items()},
        },
    )
