"""Group "coldwrite": the first append after a restart, next to a warm one.

The append carries a client-given entry id, which must be checked for
uniqueness against the whole session. Warm: the server that built the
session appends again. Cold: a fresh server process, warmed by one append to
a small session of its own (connections, tokenizer), then appends to the
session of 10,000 entries it has never seen: the check must not cost a read
of the whole history.
"""

from __future__ import annotations

import itertools
import time

from tests.bench import turns
from tests.bench.config import Context
from tests.bench.report import Result, median
from tests.bench.server import running

SESSION_ENTRIES = 10_000
WARM_APPENDS = 30
_ids = itertools.count()


def _append_ms(stub: turns.Stub, session_id: str) -> float:
    entry = turns.user(next(_ids))
    entry.id = f"client-{time.time_ns()}-{next(_ids)}"
    began = time.perf_counter()
    turns.append(stub, session_id, [entry])
    return (time.perf_counter() - began) * 1e3


def coldwrite(ctx: Context) -> None:
    for backend in ctx.backends:
        print(f"[coldwrite] {backend}", flush=True)
        db, server = ctx.shared(backend)
        stub = server.stub()
        built = turns.BuiltSession(turns.create(stub))
        turns.grow(stub, built, SESSION_ENTRIES)
        warm: list[float] = []
        cold: list[float] = []
        for _ in range(ctx.scale.reps):
            warm.append(median([_append_ms(stub, built.session_id) for _ in range(WARM_APPENDS)]))
            with running(db) as fresh:
                fresh_stub = fresh.stub()
                _append_ms(fresh_stub, turns.create(fresh_stub))
                cold.append(_append_ms(fresh_stub, built.session_id))
        label = f"{built.entries:,} entries, client-given entry id"
        ctx.report.add(
            Result("coldwrite", backend, f"warm append p50, {label}", median(warm), "ms", warm)
        )
        ctx.report.add(
            Result(
                "coldwrite",
                backend,
                f"cold first append after restart, {label}",
                median(cold),
                "ms",
                cold,
                ratio=median(cold) / median(warm),
                ratio_of="warm append",
            )
        )
        ctx.report.keep(f"coldwrite.{backend}", {"warm_ms": warm, "cold_ms": cold})
