"""`make stress`: servers, clients and faults on a PostgreSQL cluster of the run's own.

A private cluster (initdb into a temporary folder, on a free port) is started,
and on it several server processes. Clients append with idempotency keys,
retrying on another server when one fails them, while poison requests are
sent, one server is killed with SIGKILL and restarted, the database is
stopped and started twice, and another server gets SIGTERM while queries wait
on stalled read models. The read models must then catch up, quarantining
nothing.
Then every session is read back and compared with what the clients were
told. Exits 1 when anything acknowledged is missing, doubled or out of place,
or when the run made too little progress. STRESS_* variables shape the run
(see config.py); STRESS_SECONDS sets the length of the load.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter

from tests.stress.config import StressConfig
from tests.stress.faults import run_faults
from tests.stress.readside import ReadSideChecks, check_read_models
from tests.stress.report import Run, judge, render
from tests.stress.verify import verify
from tests.stress.workload import CLIENT_START_SECONDS, create_sessions, plan_load, start_load
from tests.support.pg_cluster import find_bin_dir, running_cluster
from tests.support.server_process import ServerProcess


def main() -> int:
    config = StressConfig.from_env()
    if find_bin_dir() is None:
        print(
            "make stress needs PostgreSQL's initdb and pg_ctl (on PATH or in "
            "/usr/lib/postgresql/*/bin): install the PostgreSQL server package",
            file=sys.stderr,
        )
        return 1
    began = time.monotonic()
    run = uuid.uuid4().hex[:6]
    print(f"stress: a PostgreSQL cluster of its own, {config.servers} servers", flush=True)
    with running_cluster(prefix="sessionstore-stress-") as cluster:
        servers = [ServerProcess(cluster.url) for _ in range(config.servers)]
        try:
            for server in servers:
                server.start()
            addresses = [server.address for server in servers]
            sessions = create_sessions(addresses[0], run, config)
            start_at = time.time() + CLIENT_START_SECONDS
            plans = plan_load(run, addresses, config, start_at)
            pool, futures = start_load(plans)
            read_side = ReadSideChecks()
            try:
                moments = run_faults(
                    cluster, servers, start_at, config.seconds, sessions[-1], read_side
                )
            finally:
                results = [future.result() for future in futures]
                pool.shutdown()
            check_read_models(addresses[0], read_side)
            print("  reading every session back", flush=True)
            outcomes = [outcome for result in results for outcome in result.outcomes]
            verdict = verify(addresses, cluster.url, sessions, outcomes)
            crashed = [
                f"{server.address} (exit {code}): {server.log_tail(1500)}"
                for server in servers
                if (code := server.exited_unasked()) is not None
            ]
        finally:
            for server in servers:
                server.stop()
    codes: Counter[str] = Counter()
    for result in results:
        codes.update(result.codes)
    outcome = Run(
        config=config,
        moments=moments,
        outcomes=outcomes,
        codes=codes,
        cancelled_at=[at for result in results for at in result.cancelled_at],
        odd_answers={
            code: details for result in results for code, details in result.odd_answers.items()
        },
        resends=sum(result.resends for result in results),
        resend_failures=[failure for result in results for failure in result.resend_failures],
        verdict=verdict,
        crashed=crashed,
        read_side=read_side,
        total_seconds=time.monotonic() - began,
    )
    reasons = judge(outcome)
    print(render(outcome, reasons), flush=True)
    if not reasons:
        for server in servers:
            server.remove_log()
    else:
        print("server logs: " + " ".join(str(s.log_path) for s in servers), file=sys.stderr)
    return 1 if reasons else 0


if __name__ == "__main__":
    sys.exit(main())
