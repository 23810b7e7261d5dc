"""Group "replicas": appends per second from one server and from three, on one PostgreSQL.

Three server processes (their read models kept by one worker process) share a
fresh schema; the clients, threads of this process with a channel each, send
one-turn appends to sessions of their own, back to back. The layouts: all
clients on one server; every client round robin over the three (gRPC's
``round_robin`` policy on an ``ipv4:a,b,c`` target, as behind a headless
Service); and each client given one of the three, so that a session's
appends all reach the server that holds its latest copy. Each layout's rate is
compared with one server's in the same rep, and the servers' split of the
work is printed.

Beside them, the ceiling the database sets: plain autocommit inserts; the
store's own saves (its recorder, no server), from one connection and from
four, which take no lock another save waits for; and raw transactions that do
what a save did while the log was ordered by a table lock (lock the events
table, insert, notify, commit), which let one batch commit at a time.

What bounds the figures is printed with them: how busy the machine's CPUs were
during the runs, and the servers' CPU time per append. On a machine with few
cores the servers, the worker, PostgreSQL and the clients share the same CPUs,
so more servers show the contention between them, not how the store scales.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import grpc
import psutil

from tests.bench import raw, turns
from tests.bench.config import Context
from tests.bench.report import Result, median
from tests.bench.server import CHANNEL_OPTIONS, ServerProcess, database, spawn
from tests.bench.workloads import ClientRun, run_clients, user_turn
from tests.support.worker_process import LEADING, WorkerProcess

CLIENTS = 16
SERVERS = 3
# The database's ceilings: one client, and as many as the servers would be.
LOCKED_CONNECTIONS = (1, 4)
# Each channel's calls spread over every server.
ROUND_ROBIN: dict[str, object] = {"loadBalancingConfig": [{"round_robin": {}}]}


@dataclass(frozen=True)
class Layout:
    label: str
    servers: int
    # The clients' service config, on a target of every server; none: client i is
    # given server i % n alone.
    service_config: dict[str, object] | None

    def channels(self, addresses: list[str]) -> list[grpc.Channel]:
        used = addresses[: self.servers]
        if self.service_config is None:
            return [
                grpc.insecure_channel(used[n % len(used)], options=CHANNEL_OPTIONS)
                for n in range(CLIENTS)
            ]
        config = ("grpc.service_config", json.dumps(self.service_config))
        target = "ipv4:" + ",".join(used)
        return [
            grpc.insecure_channel(target, options=[*CHANNEL_OPTIONS, config])
            for _ in range(CLIENTS)
        ]


LAYOUTS = (
    Layout("1 server", 1, ROUND_ROBIN),
    Layout(f"{SERVERS} servers, round robin", SERVERS, ROUND_ROBIN),
    Layout(f"{SERVERS} servers, each client given one", SERVERS, None),
)


@dataclass
class Sample:
    run: ClientRun
    # The machine's CPUs, percent busy over the run (all cores together = 100).
    cpu_busy: float
    # The servers' CPU seconds over the run, per append, in ms.
    server_ms_per_append: float
    # Each server's share of the servers' CPU time over the run.
    shares: list[float]


def replicas(ctx: Context) -> None:
    """Appends/s from 16 clients on 1 server and on 3, round robin or each on one."""
    if "postgres" not in ctx.backends:
        return
    print("[replicas] postgres", flush=True)
    scale = ctx.scale
    with database("postgres") as db:
        servers = [spawn(db, projections="worker") for _ in range(SERVERS)]
        worker = WorkerProcess(db.url)
        channels: dict[str, list[grpc.Channel]] = {}
        try:
            worker.wait_for(LEADING, 60)
            addresses = [server.address for server in servers]
            sessions = [turns.create(servers[0].stub()) for _ in range(CLIENTS)]
            channels = {layout.label: layout.channels(addresses) for layout in LAYOUTS}
            samples: dict[str, list[Sample]] = {layout.label: [] for layout in LAYOUTS}
            inserts: list[float] = []
            locked: dict[int, list[float]] = {n: [] for n in LOCKED_CONNECTIONS}
            saves: dict[int, list[float]] = {n: [] for n in LOCKED_CONNECTIONS}
            for layout in LAYOUTS:  # connect, and warm every server's copy of the sessions
                run_clients(channels[layout.label], sessions, user_turn, 0.3)
            # Rep-major, so that drift over the run hits every layout alike.
            for _ in range(scale.reps):
                inserts.append(raw.inserts_per_second(db, scale.ingest_seconds))
                for n in LOCKED_CONNECTIONS:
                    locked[n].append(raw.locked_batches_per_second(db, scale.ingest_seconds, n))
                    saves[n].append(raw.store_saves_per_second(db, scale.ingest_seconds, n))
                for layout in LAYOUTS:
                    samples[layout.label].append(
                        _sample(servers, channels[layout.label], sessions, scale.replica_seconds)
                    )
        finally:
            for layout_channels in channels.values():
                for channel in layout_channels:
                    channel.close()
            worker.stop()
            worker.end()
            for server in servers:
                server.stop()
    _report(ctx, samples, inserts, locked, saves)


def _sample(
    servers: list[ServerProcess], channels: list[grpc.Channel], sessions: list[str], seconds: float
) -> Sample:
    processes = [psutil.Process(server.process.pid) for server in servers]
    before = [sum(p.cpu_times()[:2]) for p in processes]
    psutil.cpu_percent()  # starts the machine-wide measure
    run = run_clients(channels, sessions, user_turn, seconds)
    busy = psutil.cpu_percent()
    each = [sum(p.cpu_times()[:2]) - b for p, b in zip(processes, before, strict=True)]
    spent = sum(each)
    shares = [used / spent if spent else 0.0 for used in each]
    return Sample(run, busy, spent / max(run.appends, 1) * 1e3, shares)


def _report(
    ctx: Context,
    samples: dict[str, list[Sample]],
    inserts: list[float],
    locked: dict[int, list[float]],
    saves: dict[int, list[float]],
) -> None:
    ctx.report.add(
        Result(
            "replicas", "postgres", "raw insert, 1 connection", median(inserts), "rows/s", inserts
        )
    )
    for n, rates in locked.items():
        ctx.report.add(
            Result(
                "replicas",
                "postgres",
                f"raw batch (lock, insert, notify, commit), {n} connection(s)",
                median(rates),
                "commits/s",
                rates,
                ratio=median([r / o for r, o in zip(rates, inserts, strict=True)]),
                ratio_of="raw insert",
                note="as saves were: the table's lock lets one batch commit at a time",
            )
        )
    for n, rates in saves.items():
        ctx.report.add(
            Result(
                "replicas",
                "postgres",
                f"store save (its recorder, no server), {n} connection(s)",
                median(rates),
                "saves/s",
                rates,
                ratio=median([r / o for r, o in zip(rates, locked[n], strict=True)]),
                ratio_of=f"raw batch with the lock, {n} connection(s)",
                note="no lock between saves: their commits share the WAL's flushes",
            )
        )
    one = [s.run.rate for s in samples[LAYOUTS[0].label]]
    busiest = 0.0
    for layout in LAYOUTS:
        runs = samples[layout.label]
        rates = [s.run.rate for s in runs]
        busy = median([s.cpu_busy for s in runs])
        busiest = max(busiest, busy)
        cpu_ms = median([s.server_ms_per_append for s in runs])
        shares = "/".join(
            f"{median([s.shares[n] for s in runs]) * 100:.0f}" for n in range(SERVERS)
        )
        ctx.report.add(
            Result(
                "replicas",
                "postgres",
                f"append, {CLIENTS} clients, {layout.label}",
                median(rates),
                "appends/s",
                rates,
                ratio=median([r / o for r, o in zip(rates, one, strict=True)]),
                ratio_of="1 server",
                note=f"CPUs {busy:.0f}% busy; servers {cpu_ms:.2f} ms CPU/append, split {shares}%",
            )
        )
        ctx.report.keep(
            f"replicas.postgres.{layout.label}",
            {
                "appends_per_s": rates,
                "cpu_busy_percent": [s.cpu_busy for s in runs],
                "server_cpu_ms_per_append": [s.server_ms_per_append for s in runs],
                "server_cpu_shares": [s.shares for s in runs],
            },
        )
    cores = os.cpu_count() or 1
    print(
        f"  what bounds these: {cores} cores, {busiest:.0f}% busy at most during the runs, "
        "shared by the servers, the worker, PostgreSQL and the clients; "
        + (
            "the figures show the contention between them, not how the store scales"
            if cores <= 4
            else "compare the servers' CPU per append to see what a replica adds"
        ),
        flush=True,
    )
