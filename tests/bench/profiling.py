"""python -m tests.bench.profiling [--backend B]: where a server spends its time.

Not part of the suite (a profiler slows what it watches). Runs the servicer
in-process under cProfile, without the gRPC transport, for the operations the
suite found slow: one-turn appends, a 200-entry batch append, a warm prompt
view and a first (history-loading) prompt view of a 10,000-entry session.
Prints, per operation, the time by package (own time, so the shares add up)
and the heaviest functions by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import re
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.bootstrap import build_application
from services.config import Config
from services.grpc.servicer import SessionStoreServicer
from tests.bench import coldviews, turns
from tests.bench.server import BACKENDS, database

_SITE = re.compile(r"site-packages/([A-Za-z0-9_]+)")
_REPO = re.compile(r"/(domain|projections|services|proto)/")


def _package(filename: str) -> str:
    if match := _SITE.search(filename):
        return match.group(1)
    if match := _REPO.search(filename):
        return match.group(1)
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins (C calls: json, sockets, ...)"
    return "stdlib"


def _profile(name: str, calls: int, run: Callable[[], Any]) -> None:
    profiler = cProfile.Profile()
    began = time.perf_counter()
    profiler.enable()
    run()
    profiler.disable()
    elapsed = time.perf_counter() - began
    stats = pstats.Stats(profiler)
    by_package: dict[str, float] = defaultdict(float)
    entries: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (filename, _, _), (_, _, own, _, _) in entries.items():
        by_package[_package(filename)] += own
    total = sum(by_package.values()) or 1.0
    print(f"\n== {name}: {calls} call(s), {elapsed / calls * 1e3:.2f} ms each (profiled)")
    for package, seconds in sorted(by_package.items(), key=lambda kv: -kv[1])[:8]:
        print(f"   {seconds / total:6.1%}  {package}")
    print("   heaviest by cumulative time:")
    stats.sort_stats("cumulative").print_stats(r"domain|projections|services|eventsourcing", 14)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.profiling")
    parser.add_argument("--backend", choices=BACKENDS, default="postgres")
    parser.add_argument(
        "--only-cold", action="store_true", help="only the cold view of a compacted session"
    )
    args = parser.parse_args()
    backend = args.backend
    if args.only_cold:
        with database(backend) as db:
            _cold_compacted(db.url)
        return
    with database(backend) as db:
        app = build_application(Config(database_url=db.url))
        servicer = SessionStoreServicer(
            app.sessions, app.context, imports=app.imports, audit=app.audit, streams=app.streams
        )
        context: Any = _NoDeadline()
        try:
            create = pb.CreateSessionRequest(settings=pb.SessionSettings(model="gpt-4o"))
            session_id = servicer.CreateSession(create, context).id

            def one_turn(n: int) -> None:
                request = pb.AppendEntriesRequest(session_id=session_id, entries=[turns.user(n)])
                servicer.AppendEntries(request, context)

            for n in range(50):  # warm caches and connections
                one_turn(n)

            def one_turns() -> None:
                for n in range(500):
                    one_turn(n)

            _profile("one-turn append", 500, one_turns)

            chat = [turns.user(n) if n % 2 == 0 else turns.answer(n) for n in range(200)]

            def batch() -> None:
                for _ in range(40):
                    sid = servicer.CreateSession(create, context).id
                    servicer.AppendEntries(
                        pb.AppendEntriesRequest(session_id=sid, entries=chat), context
                    )

            _profile("create + 200-entry append", 40, batch)

            # ~1,000,000 tokens: a window the engine need not compact them in.
            wide = pb.CreateSessionRequest(
                settings=pb.SessionSettings(model="gpt-4o", context_window_tokens=2_000_000)
            )
            long_id = servicer.CreateSession(wide, context).id
            for first in range(0, 10_000, 2_500):
                entries = [
                    e for n in range(first // 4, (first + 2_500) // 4) for e in turns.agent_turn(n)
                ]
                servicer.AppendEntries(
                    pb.AppendEntriesRequest(session_id=long_id, entries=entries), context
                )
            view = pb.GetPromptViewRequest(session_id=long_id)
            servicer.GetPromptView(view, context)
            _profile(
                "warm prompt view, 10,000 entries",
                30,
                lambda: [servicer.GetPromptView(view, context) for _ in range(30)],
            )
        finally:
            app.close()
        # A new service: its history cache is empty, as in a fresh server process.
        app = build_application(Config(database_url=db.url))
        try:
            servicer = SessionStoreServicer(
                app.sessions, app.context, imports=app.imports, audit=app.audit, streams=app.streams
            )
            _profile(
                "first prompt view, 10,000 entries (history loaded from the database)",
                1,
                lambda: servicer.GetPromptView(view, context),
            )
        finally:
            app.close()
        _cold_compacted(db.url)


COLD_VIEWS = 20


def _cold_compacted(url: str) -> None:
    """Cold views of a 10,000-entry session compacted to ~300 kept entries, on a server
    that has served other requests: what it holds of the session is dropped before
    each view, as on a replica that has not read it."""
    app = build_application(Config(database_url=url))
    try:
        servicer = SessionStoreServicer(
            app.sessions, app.context, imports=app.imports, audit=app.audit, streams=app.streams
        )
        stub: Any = _Stub(servicer)
        session_id = turns.build_compacted(stub, 10_000, coldviews.KEPT).session_id
        view = pb.GetPromptViewRequest(session_id=session_id)
        sessions = app.sessions
        context: Any = _NoDeadline()

        def cold() -> None:
            sessions.forget(session_id)
            sessions.access.written.discard(session_id)
            servicer.GetPromptView(view, context)

        def colds() -> None:
            for _ in range(COLD_VIEWS):
                cold()

        for _ in range(3):
            cold()  # warm the pool's statements and the code paths
        _profile(
            "cold prompt view, 10,000 entries compacted to ~300 (from the cut)",
            COLD_VIEWS,
            colds,
        )
        _profile(
            "warm prompt view of the same session",
            COLD_VIEWS,
            lambda: [servicer.GetPromptView(view, context) for _ in range(COLD_VIEWS)],
        )
    finally:
        app.close()


class _Stub:
    """The servicer called as a stub is (request in, answer out), for the builders."""

    def __init__(self, servicer: SessionStoreServicer) -> None:
        self._servicer = servicer

    def __getattr__(self, name: str) -> Callable[[Any], Any]:
        method = getattr(self._servicer, name)
        context: Any = _NoDeadline()
        return lambda request: method(request, context)


class _NoDeadline:
    """The one part of a gRPC context the servicer reads: no deadline."""

    def time_remaining(self) -> None:
        return None


if __name__ == "__main__":
    main()
