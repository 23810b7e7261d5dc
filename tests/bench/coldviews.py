"""Groups "coldview" and "roundrobin": views on a server that has not read the session.

Behind a round-robin load balancer a session's next turn mostly lands on a
server that has not read it lately, so a cold view is the common case.

coldview: sessions of 10,000 and 50,000 entries, whole (no compaction: the
prompt holds every entry) and compacted to a few hundred kept entries, each
viewed warm (the server that wrote it, asked again and again) and cold (a
server that has never read it). Each cold view has a server of its own,
started afresh, which first serves a view of a small session, so that the
figure is the cost of a session it has not read, not of its own start (group
"view" has that) nor of the view served before it.

roundrobin: turns (an agent turn appended, then the prompt view) on a long
compacted session, each turn on the next of three server processes sharing
one database, against the same turns all on one server. Each server finds
its copy two turns behind: its write fails on the version the others took
and is made again on a fresh copy, and its view catches up from the store.
Then the same round robin with the turn's assistant entries naming the view
they answered (``prompt_ref``, as the client's litellm turn sets it): the
server then knows its copy is stale and reads the store's before saving.
"""

from __future__ import annotations

import json
import time

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.bench import turns
from tests.bench.config import Context
from tests.bench.report import Result, Target, median, percentile
from tests.bench.server import Database, ServerProcess, database, running, spawn
from tests.support.worker_process import LEADING, WorkerProcess

# What a compacted session keeps: about this many entries since its cut.
KEPT = 300
SERVERS = 3
COLD_MS = 20.0
COLD_OVER_WARM = 3.0
SQLITE_PROJECTING = "projecting; on SQLite"


def _view_ms(stub: turns.Stub, session_id: str) -> tuple[float, pb.PromptView]:
    began = time.perf_counter()
    view = stub.GetPromptView(pb.GetPromptViewRequest(session_id=session_id))
    return (time.perf_counter() - began) * 1e3, view


def _build_whole(stub: turns.Stub, size: int) -> turns.BuiltSession:
    built = turns.BuiltSession(turns.create(stub))
    turns.grow(stub, built, size)
    return built


# -- group "coldview" --------------------------------------------------------------------


# A whole 50,000-entry prompt view is some 22 MB, over the server's default 16 MB.
MESSAGE_MB = "64"


def coldview(ctx: Context) -> None:
    for backend in ctx.backends:
        print(f"[coldview] {backend}", flush=True)
        with database(backend) as db, running(db, max_message_mb=MESSAGE_MB) as server:
            _coldview(ctx, backend, db, server)


def _coldview(ctx: Context, backend: str, db: Database, server: ServerProcess) -> None:
    scale = ctx.scale
    stub = server.stub()
    sessions: dict[tuple[int, str], turns.BuiltSession] = {}
    for size in scale.coldview_sizes:
        sessions[size, "whole"] = _build_whole(stub, size)
        sessions[size, "compacted"] = turns.build_compacted(stub, size, KEPT)
    small = turns.BuiltSession(turns.create(stub))
    turns.grow(stub, small, 40, batch=4)
    shapes: dict[tuple[int, str], tuple[int, str]] = {}
    warm: dict[tuple[int, str], list[float]] = {key: [] for key in sessions}
    cold: dict[tuple[int, str], list[float]] = {key: [] for key in sessions}
    for key, built in sessions.items():
        _, view = _view_ms(stub, built.session_id)
        shapes[key] = (view.version, view.messages_json)
    keys = list(sessions)
    for _ in range(scale.reps):
        for key in keys:
            runs = [_view_ms(stub, sessions[key].session_id)[0] for _ in range(scale.warm_views)]
            warm[key].append(percentile(runs, 50))
        # Each cold view on a server of its own, which has read only a small
        # session: the figure is that session's, not what a bigger view just
        # before it left in the heap (a whole 50,000-entry view, say).
        for key in keys:
            with running(db, max_message_mb=MESSAGE_MB) as fresh:
                fresh_stub = fresh.stub()
                _view_ms(fresh_stub, small.session_id)  # its own start paid here
                ms, view = _view_ms(fresh_stub, sessions[key].session_id)
                assert (view.version, view.messages_json) == shapes[key]
                cold[key].append(ms)
    _report_coldview(ctx, backend, sessions, shapes, warm, cold)


def _report_coldview(
    ctx: Context,
    backend: str,
    sessions: dict[tuple[int, str], turns.BuiltSession],
    shapes: dict[tuple[int, str], tuple[int, str]],
    warm: dict[tuple[int, str], list[float]],
    cold: dict[tuple[int, str], list[float]],
) -> None:
    report = ctx.report
    raw: dict[str, object] = {}
    for (size, kind), built in sessions.items():
        messages = len(json.loads(shapes[size, kind][1]))
        label = f"{size:,} entries, " + (
            "whole" if kind == "whole" else f"compacted, {messages:,} messages in view"
        )
        warm_ms, cold_ms = median(warm[size, kind]), median(cold[size, kind])
        ratios = [c / w for c, w in zip(cold[size, kind], warm[size, kind], strict=True)]
        compacted = kind == "compacted"
        report.add(
            Result("coldview", backend, f"warm view p50, {label}", warm_ms, "ms", warm[size, kind])
        )
        report.add(
            Result(
                "coldview",
                backend,
                f"cold view, {label}",
                cold_ms,
                "ms",
                cold[size, kind],
                target=Target("<", COLD_MS, f"< {COLD_MS:.0f} ms") if compacted else None,
                ratio=median(ratios),
                ratio_of="warm",
            )
        )
        if compacted:
            report.add(
                Result(
                    "coldview",
                    backend,
                    f"cold / warm view, {label}",
                    median(ratios),
                    "x",
                    ratios,
                    target=Target("<=", COLD_OVER_WARM, f"<= {COLD_OVER_WARM:.0f}x warm"),
                )
            )
        raw[f"{size}.{kind}"] = {
            "entries": built.entries,
            "version": shapes[size, kind][0],
            "messages": messages,
            "warm_p50_ms": warm[size, kind],
            "cold_ms": cold[size, kind],
        }
    report.keep(f"coldview.{backend}", raw)


# -- group "coldlist" --------------------------------------------------------------------

# A listing's page, as a console shows it: sessions of a few turns, every tenth
# past a snapshot (100 events) with events after it.
LIST_PAGE = 100


def coldlist(ctx: Context) -> None:
    """ListSessions pages of 100 on a server that has read none of their sessions (a
    replica after a restart, or a deploy) and on one that has listed them before."""
    for backend in ctx.backends:
        print(f"[coldlist] {backend}", flush=True)
        with database(backend) as db, running(db) as server:
            stub = server.stub()
            position = 0
            for n in range(LIST_PAGE):
                session_id = turns.create(stub, title=f"session {n}")
                for turn in range(n % 7 + (130 if n % 10 == 0 else 0)):
                    position = turns.append(stub, session_id, [turns.user(turn)]).position
            request = pb.ListSessionsRequest(page_size=LIST_PAGE, min_position=position)
            assert len(stub.ListSessions(request, timeout=60).sessions) == LIST_PAGE
            cold: list[float] = []
            warm: list[float] = []
            for _ in range(ctx.scale.reps):
                with running(db) as fresh:
                    fresh_stub = fresh.stub()
                    fresh_stub.ListSessions(pb.ListSessionsRequest(page_size=1))  # its start
                    cold.append(_list_ms(fresh_stub, request))
                    runs = [_list_ms(fresh_stub, request) for _ in range(ctx.scale.warm_views)]
                    warm.append(percentile(runs, 50))
        label = f"ListSessions page of {LIST_PAGE}"
        report = ctx.report
        report.add(Result("coldlist", backend, f"{label}, cold server", median(cold), "ms", cold))
        report.add(Result("coldlist", backend, f"{label}, warm p50", median(warm), "ms", warm))


def _list_ms(stub: turns.Stub, request: pb.ListSessionsRequest) -> float:
    began = time.perf_counter()
    stub.ListSessions(request)
    return (time.perf_counter() - began) * 1e3


# -- group "roundrobin" ------------------------------------------------------------------


def roundrobin(ctx: Context) -> None:
    scale = ctx.scale
    for backend in ctx.backends:
        print(f"[roundrobin] {backend}: {SERVERS} servers on one database", flush=True)
        with database(backend) as db:
            servers, worker = _start(db)
            try:
                built = turns.build_compacted(servers[0].stub(), scale.roundrobin_entries, KEPT)
                stubs = [s.stub() for s in servers]
                one: list[float] = []
                spread: list[float] = []
                answering: list[float] = []
                _turns(built, stubs, SERVERS)  # every server reads the session once
                for _ in range(scale.reps):
                    one.append(percentile(_turns(built, stubs[:1], scale.roundrobin_turns), 50))
                    spread.append(percentile(_turns(built, stubs, scale.roundrobin_turns), 50))
                    answering.append(
                        percentile(_turns(built, stubs, scale.roundrobin_turns, True), 50)
                    )
            finally:
                worker.stop()
                worker.end()
                for server in servers:
                    server.stop()
        _report_roundrobin(ctx, backend, built, one, spread, answering)


def _turns(
    built: turns.BuiltSession, stubs: list[turns.Stub], count: int, answering: bool = False
) -> list[float]:
    """Milliseconds of each of ``count`` turns, turn n on server n mod len(stubs).
    ``answering``: the turn's assistant entries name the view the last turn got."""
    times = []
    answered: pb.PromptRef | None = None
    for n in range(count):
        stub = stubs[n % len(stubs)]
        entries = turns.agent_turn(built.next_turn, "rr")
        if answered is not None:
            for entry in entries:
                if entry.role == pb.ROLE_ASSISTANT:
                    entry.prompt_ref.CopyFrom(answered)
        began = time.perf_counter()
        turns.append(stub, built.session_id, entries)
        view = stub.GetPromptView(pb.GetPromptViewRequest(session_id=built.session_id))
        times.append((time.perf_counter() - began) * 1e3)
        if answering:
            answered = pb.PromptRef(
                version=view.version, format=pb.PROMPT_FORMAT_OPENAI, hash=view.request_hash
            )
        built.next_turn += 1
        built.entries += 4
    return times


def _start(db: Database) -> tuple[list[ServerProcess], WorkerProcess]:
    """Three servers whose read models one worker keeps, as a deployment runs them."""
    servers: list[ServerProcess] = []
    worker = WorkerProcess(db.url)
    try:
        servers.extend(spawn(db, projections="worker") for _ in range(SERVERS))
        # On SQLite the one worker projects without an election.
        worker.wait_for(LEADING if db.backend == "postgres" else SQLITE_PROJECTING, 60)
    except BaseException:
        worker.stop()
        worker.end()
        for server in servers:
            server.stop()
        raise
    return servers, worker


def _report_roundrobin(
    ctx: Context,
    backend: str,
    built: turns.BuiltSession,
    one: list[float],
    spread: list[float],
    answering: list[float],
) -> None:
    label = f"{built.entries:,}-entry session compacted to ~{KEPT}"
    ratios = [s / o for s, o in zip(spread, one, strict=True)]
    ctx.report.add(
        Result("roundrobin", backend, f"turn p50 on one server, {label}", median(one), "ms", one)
    )
    ctx.report.add(
        Result(
            "roundrobin",
            backend,
            f"turn p50, round robin of {SERVERS} servers, {label}",
            median(spread),
            "ms",
            spread,
            ratio=median(ratios),
            ratio_of="one server",
            note="turn: an agent turn appended, then the prompt view",
        )
    )
    ctx.report.add(
        Result(
            "roundrobin",
            backend,
            f"turn p50, round robin of {SERVERS} servers, answers naming their view, {label}",
            median(answering),
            "ms",
            answering,
            ratio=median([a / o for a, o in zip(answering, one, strict=True)]),
            ratio_of="one server",
            note="the assistant entries carry prompt_ref: the view the last turn got",
        )
    )
    ctx.report.keep(
        f"roundrobin.{backend}",
        {
            "one_server_p50_ms": one,
            "round_robin_p50_ms": spread,
            "round_robin_answering_p50_ms": answering,
        },
    )
