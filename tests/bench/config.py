"""How big each benchmark is: the full run and the --quick smoke run.

The full run is sized to finish in about eight minutes on a 2-core machine,
and half an hour more for the agent loop's matrix (group "agentloop");
--quick keeps every group and every target but shrinks sessions, durations
and counts so the whole suite runs in about a minute.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from tests.bench.report import Report
from tests.bench.server import Database, ServerProcess, database, running


@dataclass(frozen=True)
class Scale:
    name: str
    # Runs per figure; each figure is the median of these.
    reps: int
    # Group "ingest": seconds of appending per run, and the client counts.
    ingest_seconds: float
    clients: tuple[int, ...]
    # Group "length": session lengths, and one-turn appends timed per run at each.
    lengths: tuple[int, ...]
    appends_per_point: int
    # Group "view": session sizes; those also viewed cold (a fresh server per run
    # and size); warm views per run.
    view_sizes: tuple[int, ...]
    cold_sizes: tuple[int, ...]
    warm_views: int
    # Group "replay": events in the session, and views at random versions per run.
    replay_events: int
    replay_views: int
    # Group "tokens": entries counted per run of each language.
    token_entries: int
    # Group "memory": sessions x entries, the cache cap, and which backends.
    memory_sessions: int
    memory_entries: int
    memory_cap_mb: int
    memory_backends: tuple[str, ...]
    # Group "peers": conversation lengths, how many of the last turns are timed,
    # and runs per system (more than other groups: a run of the store's 50
    # turns lasts ~0.1 s, short enough for one burst of the host's noise to
    # halve it, and the figure is the median of the runs' ratios).
    peer_turns: tuple[int, ...]
    peer_timed_turns: int
    peer_reps: int
    # Group "engine": entries of the viewed session, and of the compacted one.
    engine_view_entries: int
    engine_compact_entries: int
    # Group "fuzz": hostile requests per RPC and pass, passes, and the cache cap.
    fuzz_examples: int
    fuzz_passes: int
    fuzz_cap_mb: int
    # Group "fidelity": sessions (seeds) per figure, and their lengths in turns.
    fidelity_seeds: int
    fidelity_turns: tuple[int, ...]
    # Group "agentloop": the whole matrix (about half an hour), or two short sessions.
    agentloop_full: bool
    # Group "replicas": seconds of appending per run and layout.
    replica_seconds: float
    # Group "recall": entries of the searched session, and searches timed per run.
    recall_entries: int = 10_000
    recall_queries: int = 30
    # Group "coldview": session sizes, each whole and compacted.
    coldview_sizes: tuple[int, ...] = (10_000, 50_000)
    # Group "roundrobin": entries of the session, and turns timed per run and layout.
    roundrobin_entries: int = 10_000
    roundrobin_turns: int = 30


FULL = Scale(
    name="full",
    reps=3,
    ingest_seconds=1.0,
    clients=(1, 8, 32),
    lengths=(10, 1_000, 10_000, 50_000),
    appends_per_point=300,
    view_sizes=(1_000, 10_000, 50_000),
    cold_sizes=(1_000, 10_000, 50_000),
    warm_views=30,
    replay_events=10_000,
    replay_views=60,
    token_entries=2_000,
    # 2,000,000 entries through gRPC take minutes on 2 cores; on PostgreSQL only.
    memory_sessions=10_000,
    memory_entries=200,
    memory_cap_mb=256,
    memory_backends=("postgres",),
    peer_turns=(1_000, 10_000),
    peer_timed_turns=50,
    peer_reps=5,
    engine_view_entries=10_000,
    engine_compact_entries=2_500,
    fuzz_examples=100,
    fuzz_passes=3,
    fuzz_cap_mb=64,
    fidelity_seeds=5,
    fidelity_turns=(200, 500, 1_000),
    agentloop_full=True,
    replica_seconds=2.0,
)

QUICK = Scale(
    name="quick",
    reps=3,
    ingest_seconds=0.25,
    clients=(1, 8, 32),
    lengths=(10, 1_000, 10_000),
    appends_per_point=80,
    view_sizes=(1_000, 10_000),
    cold_sizes=(10_000,),
    warm_views=10,
    replay_events=1_000,
    replay_views=20,
    token_entries=300,
    # Scaled down with the cap, so that the cache still has to evict.
    memory_sessions=250,
    memory_entries=200,
    memory_cap_mb=16,
    memory_backends=("postgres",),
    peer_turns=(200, 1_000),
    peer_timed_turns=20,
    peer_reps=3,
    engine_view_entries=2_000,
    engine_compact_entries=500,
    fuzz_examples=15,
    fuzz_passes=2,
    fuzz_cap_mb=32,
    fidelity_seeds=2,
    fidelity_turns=(200,),
    agentloop_full=False,
    replica_seconds=0.5,
    recall_entries=2_000,
    recall_queries=10,
    coldview_sizes=(10_000,),
    roundrobin_entries=2_000,
    roundrobin_turns=12,
)


@dataclass
class Context:
    """What every group gets: the scale, the backends, the report, and shared servers."""

    scale: Scale
    backends: tuple[str, ...]
    report: Report
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _servers: dict[str, tuple[Database, ServerProcess]] = field(default_factory=dict)

    def shared(self, backend: str) -> tuple[Database, ServerProcess]:
        """One long-running server per backend, on its own database, for the groups
        that measure a warm server (ingest, length, warm views, replay, peers).

        Starting a server and warming it costs seconds on this machine; sharing
        one per backend pays that once instead of once per group. Groups use
        sessions of their own, so what they share is what a long-running server
        shares between its clients: its caches, pools and tables.
        """
        if backend not in self._servers:
            db = self._stack.enter_context(database(backend))
            server = self._stack.enter_context(running(db))
            # Warm it: the first create loads model metadata and opens the pool.
            pb_grpc.SessionStoreStub(server.channel).CreateSession(pb.CreateSessionRequest())
            self._servers[backend] = (db, server)
        return self._servers[backend]

    def close(self) -> None:
        self._stack.close()
