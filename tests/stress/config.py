"""The run's shape, from STRESS_* environment variables (defaults fit 2 cores, ~2.5 min)."""

from __future__ import annotations

import os
from dataclasses import dataclass


def _number(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    try:
        return float(raw) if raw else default
    except ValueError:
        raise SystemExit(f"{name}={raw!r} is not a number") from None


@dataclass(frozen=True)
class StressConfig:
    # Seconds of load; the faults fall at fixed fractions of it.
    seconds: float
    servers: int
    clients: int
    # Client threads are spread over this many processes. Measured on 2 cores
    # (30 s runs): 1 process 435 appends/s before the first fault, 2 processes
    # 464/s, 8 processes 404/s: the servers, not the clients' GIL, set the pace,
    # and more processes only take CPU from them.
    client_processes: int
    own_sessions_per_client: int
    shared_sessions: int
    # Share of appends that go to a shared session (the rest to the client's own).
    shared_ratio: float
    # Below this many acknowledged appends per second of load the run fails: a
    # stuck store must not pass by losing nothing because it stored nothing.
    min_appends_per_second: float
    # After the load ends, unfinished appends get this long to be acknowledged.
    drain_seconds: float
    seed: int

    @classmethod
    def from_env(cls) -> StressConfig:
        config = cls(
            seconds=_number("STRESS_SECONDS", 100),
            servers=int(_number("STRESS_SERVERS", 3)),
            clients=int(_number("STRESS_CLIENTS", 32)),
            client_processes=int(_number("STRESS_CLIENT_PROCESSES", 2)),
            own_sessions_per_client=int(_number("STRESS_OWN_SESSIONS", 2)),
            shared_sessions=int(_number("STRESS_SHARED_SESSIONS", 4)),
            shared_ratio=_number("STRESS_SHARED_RATIO", 0.3),
            min_appends_per_second=_number("STRESS_MIN_APPENDS_PER_SECOND", 50),
            drain_seconds=_number("STRESS_DRAIN_SECONDS", 30),
            seed=int(_number("STRESS_SEED", 1)),
        )
        if config.seconds < 45:
            # A restarted server takes up to 10 s to serve on 2 busy cores; the
            # load must outlast the last fault to show the store serving again.
            raise SystemExit("STRESS_SECONDS must be at least 45: the faults need room")
        if config.servers < 2:
            raise SystemExit("STRESS_SERVERS must be at least 2: one is killed")
        if not 1 <= config.client_processes <= config.clients:
            raise SystemExit("STRESS_CLIENT_PROCESSES must be between 1 and STRESS_CLIENTS")
        return config
