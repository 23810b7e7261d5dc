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

import grpc

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from tests.stress.config import StressConfig
from tests.stress.faults import run_faults
from tests.stress.readside import ReadSideChecks, check_read_models
from tests.stress.report import Run, judge, render
from tests.stress.verify import verify
from tests.stress.workload import (
    CHANNEL_OPTIONS,
    RETRYABLE,
    WorkerPlan,
    own_session_ids,
    shared_session_ids,
    start_load,
)
from tests.support.pg_cluster import find_bin_dir, running_cluster
from tests.support.server_process import ServerProcess

# Time for the client processes to start (each imports gRPC) before the load begins.
CLIENT_START_SECONDS = 4.0
# Far beyond what the run writes: the context engine never compacts, so every
# event is an append the clients made.
WINDOW_TOKENS = 10_000_000


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
            sessions = _create_sessions(addresses[0], run, config)
            start_at = time.time() + CLIENT_START_SECONDS
            plans = _plans(run, addresses, config, start_at)
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


def _create_sessions(address: str, run: str, config: StressConfig) -> list[str]:
    ids = [
        *(
            session_id
            for client in range(config.clients)
            for session_id in own_session_ids(run, client, config.own_sessions_per_client)
        ),
        *shared_session_ids(run, config.shared_sessions),
    ]
    settings = pb.SessionSettings(context_window_tokens=WINDOW_TOKENS)
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.SessionStoreStub(channel)
        for session_id in ids:
            request = pb.CreateSessionRequest(session_id=session_id, settings=settings)
            for attempt in range(20):
                try:
                    stub.CreateSession(request, timeout=10)
                    break
                except grpc.RpcError as error:
                    if error.code() not in RETRYABLE or attempt == 19:
                        raise
                    time.sleep(0.1)
    return ids


def _plans(
    run: str, addresses: list[str], config: StressConfig, start_at: float
) -> list[WorkerPlan]:
    stop_at = start_at + config.seconds
    return [
        WorkerPlan(
            run=run,
            addresses=addresses,
            clients=list(range(n, config.clients, config.client_processes)),
            own_sessions=config.own_sessions_per_client,
            shared_sessions=config.shared_sessions,
            shared_ratio=config.shared_ratio,
            seed=config.seed,
            start_at=start_at,
            stop_at=stop_at,
            give_up_at=stop_at + config.drain_seconds,
        )
        for n in range(config.client_processes)
    ]


if __name__ == "__main__":
    sys.exit(main())
