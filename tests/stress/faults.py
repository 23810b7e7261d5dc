"""The faults, at fixed fractions of the load: a poison request, a server killed, the
database stopped twice, a server stopped (SIGTERM) while queries wait on stalled read
models.

Each fault ends with the system whole again before the next begins, and the
last leaves a stretch of quiet load, so the run also shows the store serving
at full pace after everything came back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tests.stress.readside import ReadSideChecks, send_poison, sigterm_with_waiters
from tests.support.pg_cluster import Cluster
from tests.support.server_process import ServerProcess

KILLED_SERVER_DOWN_SECONDS = 4.0
DATABASE_DOWN_SECONDS = 5.0
# When each fault begins, as a fraction of the load's duration.
POISON_AT = 0.1
KILL_AT = 0.2
FAST_STOP_AT = 0.45
IMMEDIATE_STOP_AT = 0.7
SIGTERM_AT = 0.78


@dataclass(frozen=True)
class Moment:
    """Something the run did, at a wall-clock time."""

    at: float
    what: str
    # A fault is over here: the system should be whole again. The last of these
    # starts the stretch in which appends must still be acknowledged.
    fault: bool = False


def run_faults(
    cluster: Cluster,
    servers: list[ServerProcess],
    start_at: float,
    seconds: float,
    poisoned_session: str,
    checks: ReadSideChecks,
) -> list[Moment]:
    """Runs the faults against the load; answers what happened when. What the read-side
    steps find wrong goes into ``checks``."""
    moments = [Moment(start_at, "load starts")]

    def at(fraction: float) -> None:
        time.sleep(max(0.0, start_at + fraction * seconds - time.time()))

    def happened(what: str, fault: bool = False) -> None:
        moments.append(Moment(time.time(), what, fault))
        print(f"  +{moments[-1].at - start_at:5.1f} s  {what}", flush=True)

    at(POISON_AT)
    send_poison([server.address for server in servers], poisoned_session, checks)
    happened(f"poison requests sent to every server ({len(checks.poison)} not refused)", fault=True)

    victim = servers[0]
    at(KILL_AT)
    victim.kill()
    happened(f"SIGKILL server 1 ({victim.address})")
    time.sleep(KILLED_SERVER_DOWN_SECONDS)
    victim.start()
    happened("server 1 restarted and SERVING", fault=True)

    for fraction, mode in ((FAST_STOP_AT, "fast"), (IMMEDIATE_STOP_AT, "immediate")):
        at(fraction)
        cluster.stop(mode)
        happened(f"database stopped (pg_ctl stop -m {mode})")
        time.sleep(DATABASE_DOWN_SECONDS)
        cluster.start()
        happened("database started again", fault=True)

    at(SIGTERM_AT)
    stopped = servers[1]
    sigterm_with_waiters(stopped, cluster.url, checks)
    happened(
        f"SIGTERM server 2 ({stopped.address}) with queries waiting on stalled read models: "
        f"exited in {checks.sigterm_exit_seconds:.1f} s",
        fault=True,
    )
    stopped.start()
    happened("server 2 restarted and SERVING")

    at(1.0)
    happened("load stops (unanswered appends still retried)")
    return moments
