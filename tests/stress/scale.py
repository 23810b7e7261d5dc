"""`make scale`: the stress workload on three servers and the projection worker,
spread by gRPC's own round-robin policy.

A private PostgreSQL cluster (as `make stress`) serves three server processes
that leave the read models to two workers (one leads, one waits). The clients
of the stress workload each open one channel to all three addresses
(``ipv4:a,b,c`` with the service config ``round_robin``), so every client's
calls go to every server in turn, as a client of the headless Service does in
Kubernetes. No faults: the run checks that spreading the calls changes
nothing. Every session is read back and must hold every acknowledged append
once, whole, in order, without gaps (the stress run's verification); the read
models must catch up with nothing quarantined; each server must have done a
share of the work and one worker alone must have led. SCALE_SECONDS sets the
load's length (40 by default); the STRESS_* knobs shape the clients.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

from tests.stress.config import StressConfig
from tests.stress.readside import ReadSideChecks, check_read_models
from tests.stress.report import EXPECTED_CODES
from tests.stress.verify import verify
from tests.stress.workload import CLIENT_START_SECONDS, create_sessions, plan_load, start_load
from tests.support.pg_cluster import find_bin_dir, running_cluster
from tests.support.server_process import ServerProcess
from tests.support.worker_process import LEADING, WorkerProcess

SERVERS = 3
WORKERS = 2
ROUND_ROBIN = json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})
# Round robin gives each server a third of the calls; each must have spent at
# least this share of the busiest one's CPU time.
LEAST_CPU_SHARE = 0.3


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    config = dataclasses.replace(
        StressConfig.from_env(),
        seconds=float(os.environ.get("SCALE_SECONDS", "40")),
        servers=SERVERS,
    )
    if find_bin_dir() is None:
        print("make scale needs PostgreSQL's initdb and pg_ctl", file=sys.stderr)
        return 1
    began = time.monotonic()
    run = uuid.uuid4().hex[:6]
    print(f"scale: a PostgreSQL cluster of its own, {SERVERS} servers, {WORKERS} workers")
    with running_cluster(prefix="sessionstore-scale-") as cluster:
        servers = [ServerProcess(cluster.url, projections="worker") for _ in range(SERVERS)]
        workers: list[WorkerProcess] = []
        try:
            for server in servers:
                server.start()
            workers = [WorkerProcess(cluster.url) for _ in range(WORKERS)]
            addresses = [server.address for server in servers]
            target = "ipv4:" + ",".join(addresses)
            sessions = create_sessions(addresses[0], run, config)
            cpu_before = [cpu_seconds(s.process.pid) for s in servers if s.process]
            start_at = time.time() + CLIENT_START_SECONDS
            print(f"  {config.clients} clients, one channel each process to {target}, round robin")
            pool, futures = start_load(plan_load(run, [target], config, start_at, ROUND_ROBIN))
            results = [future.result() for future in futures]
            pool.shutdown()
            cpu = [
                cpu_seconds(s.process.pid) - before
                for s, before in zip(servers, cpu_before, strict=True)
                if s.process
            ]
            read_side = ReadSideChecks()
            check_read_models(addresses[0], read_side)
            print("  reading every session back", flush=True)
            outcomes = [outcome for result in results for outcome in result.outcomes]
            verdict = verify(addresses, cluster.url, sessions, outcomes)
            led = [n for n, worker in enumerate(workers) if worker.said(LEADING)]
            crashed = [
                f"{s.address} (exit {code})" for s in servers if (code := s.exited_unasked())
            ]
        finally:
            for worker in workers:
                worker.stop()
            for server in servers:
                server.stop()

    codes: Counter[str] = Counter()
    for result in results:
        codes.update(result.codes)
    states = Counter(outcome.state for outcome in outcomes)
    acknowledged = states["acknowledged"]
    reasons = [f"{name}: {count}" for name, count in verdict.failures.items()]
    reasons += [
        f"status {code} answered {n} times"
        for code, n in codes.items()
        if code not in EXPECTED_CODES
    ]
    reasons += [f"{n} append(s) {state}" for state, n in states.items() if state != "acknowledged"]
    if acknowledged < config.min_appends_per_second * config.seconds:
        reasons.append(f"too little progress: {acknowledged} appends acknowledged")
    resend_failures = [f for result in results for f in result.resend_failures]
    if resend_failures:
        reasons.append(f"{len(resend_failures)} resent append(s) not answered as a replay")
    if min(cpu) < LEAST_CPU_SHARE * max(cpu):
        reasons.append(f"the calls were not spread: server CPU seconds {cpu}")
    if len(led) != 1:
        reasons.append(f"{len(led)} workers led, not one")
    reasons += read_side.reasons() + [f"server exited unasked: {c}" for c in crashed]

    print(
        "\n".join(
            [
                "",
                f"scale: {config.seconds:g} s of load, {SERVERS} servers (round robin), "
                f"{WORKERS} workers, {config.clients} clients, {verdict.sessions} sessions",
                f"  appends acknowledged: {acknowledged:,} "
                f"({acknowledged / config.seconds:,.0f}/s)",
                "  server CPU seconds during the load: "
                + ", ".join(f"{seconds:.1f}" for seconds in cpu),
                f"  status codes seen: {dict(codes.most_common())}",
                f"  read back: {verdict.events:,} events, {verdict.entries:,} entries; lost "
                f"{verdict.lost}, duplicated {verdict.duplicated}, gaps {verdict.gaps}, partial "
                f"{verdict.partial}, misreported {verdict.misreported}, unexpected "
                f"{verdict.unexpected}, durable log mismatches {verdict.log_mismatches}",
                f"  read models caught up, nothing quarantined: "
                f"{'no' if read_side.read_models else 'yes'}; workers that led: "
                f"{', '.join(f'#{n + 1}' for n in led) or 'none'} of {WORKERS}",
                f"  total time: {time.monotonic() - began:.0f} s",
                *[f"  ! {problem}" for problem in verdict.problems],
                "FAILED: " + "; ".join(reasons)
                if reasons
                else "PASSED: spread over three servers, every acknowledged append stored once, "
                "whole, in order",
            ]
        ),
        flush=True,
    )
    for process in [*servers, *workers]:
        if reasons:
            print(f"log: {process.log_path}", file=sys.stderr)
        else:
            process.log_path.unlink(missing_ok=True)
    return 1 if reasons else 0


if __name__ == "__main__":
    sys.exit(main())
