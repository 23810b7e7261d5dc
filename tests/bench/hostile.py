"""Groups "large" and "fuzz": one very large entry, and memory under hostile requests.

"large": one append of a single 15 MiB message to a fresh session, through
gRPC, timed from the client (counting, sealing, encoding and the insert are
all in it; the window is large enough that the engine never compacts). The
target is under 2 s.

"fuzz": the property-based fuzzer of tests/e2e/test_fuzz.py sends every RPC
its hostile requests (huge and wide strings, deep JSON, extreme numbers), in
passes over all RPCs, to a server whose cache is capped small, and the
server's resident memory is sampled after each RPC's batch. The target is
RSS at most the cap plus a fixed overhead: the idle server (interpreter,
gRPC, tiktoken's tables, ~180 MB), litellm, which the first overflow report
imports (~120 MB), and the native memory the largest requests leave in the
allocator's arenas of 32 worker threads (~200 MB: tracemalloc finds the
Python heap some 200 MB below RSS after a pass, and malloc_trim gives none
of it back). Passes after the first that grew past it would be a leak: the
growth of the last pass over the first is reported.
"""

from __future__ import annotations

import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.bench.config import Context
from tests.bench.report import Result, Target, median
from tests.bench.server import ServerProcess, database, running

LARGE_TARGET_SECONDS = 2.0
LARGE_ENTRY_BYTES = 15 << 20
FUZZ_OVERHEAD_MB = 500
_PROSE = "The store counts, seals and keeps every entry, however long it is. "


def large(ctx: Context) -> None:
    text = (_PROSE * (LARGE_ENTRY_BYTES // len(_PROSE) + 1))[:LARGE_ENTRY_BYTES]
    for backend in ctx.backends:
        print(f"[large] {backend}: one append of {LARGE_ENTRY_BYTES >> 20} MiB", flush=True)
        _, server = ctx.shared(backend)
        stub = server.stub()
        seconds: list[float] = []
        for _ in range(ctx.scale.reps):
            session = stub.CreateSession(
                pb.CreateSessionRequest(
                    settings=pb.SessionSettings(
                        max_entry_bytes=LARGE_ENTRY_BYTES + (64 << 10),
                        context_window_tokens=100_000_000,
                    )
                )
            )
            request = pb.AppendEntriesRequest(
                session_id=session.id,
                entries=[
                    pb.Entry(
                        role=pb.ROLE_USER, content=[pb.ContentBlock(text=pb.TextBlock(text=text))]
                    )
                ],
            )
            began = time.perf_counter()
            stub.AppendEntries(request, timeout=120)
            seconds.append(time.perf_counter() - began)
        ctx.report.add(
            Result(
                "large",
                backend,
                f"append of one {LARGE_ENTRY_BYTES >> 20} MiB message",
                median(seconds) * 1000,
                "ms",
                [s * 1000 for s in seconds],
                target=Target("<", LARGE_TARGET_SECONDS * 1000, "< 2 s"),
            )
        )


def fuzz(ctx: Context) -> None:
    from tests.e2e.test_fuzz import SERVICE
    from tests.e2e.test_fuzz import Target as FuzzTarget

    scale = ctx.scale
    cap = scale.fuzz_cap_mb
    for backend in ctx.backends:
        print(
            f"[fuzz] {backend}: {scale.fuzz_passes} passes of {scale.fuzz_examples} hostile "
            f"requests per RPC, cache cap {cap} MB",
            flush=True,
        )
        with database(backend) as db, running(db, cache_max_mb=cap) as server:
            target = FuzzTarget(server.stub())
            passes: list[list[float]] = []
            codes: dict[str, int] = {}
            for _ in range(scale.fuzz_passes):
                samples: list[float] = []
                for method in SERVICE.methods_by_name:
                    _hostile_batch(server, target, method, scale.fuzz_examples, codes)
                    samples.append(server.rss_bytes() / 2**20)
                passes.append(samples)
            ctx.report.keep(f"fuzz.{backend}.rss_mb_by_pass", passes)
            ctx.report.keep(f"fuzz.{backend}.status_codes", codes)
            _report_fuzz(ctx, backend, passes, codes)


def _hostile_batch(
    server: ServerProcess, target: Any, method: str, examples: int, codes: dict[str, int]
) -> None:
    """``examples`` hostile requests of one RPC, counting the status codes answered."""
    from tests.e2e.test_fuzz import SERVICE, call, message_of

    request_type = SERVICE.methods_by_name[method].input_type

    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def send(data: st.DataObject) -> None:
        code, _ = call(server.channel, method, data.draw(message_of(request_type, target)))
        codes[code.name] = codes.get(code.name, 0) + 1

    send()


def _report_fuzz(
    ctx: Context, backend: str, passes: list[list[float]], codes: dict[str, int]
) -> None:
    cap = ctx.scale.fuzz_cap_mb
    peak = max(max(p) for p in passes)
    report = ctx.report
    report.add(
        Result(
            "fuzz",
            backend,
            f"server RSS peak, {sum(codes.values()):,} hostile requests",
            peak,
            "MB",
            [max(p) for p in passes],
            target=Target("<=", cap + FUZZ_OVERHEAD_MB, f"<= cap+{FUZZ_OVERHEAD_MB} MB"),
            ratio=peak / cap,
            ratio_of="cap",
        )
    )
    if len(passes) > 1:
        growth = max(passes[-1]) - max(passes[0])
        report.add(
            Result("fuzz", backend, "RSS growth, last pass over first", growth, "MB", [growth])
        )
    bad = codes.get("INTERNAL", 0) + codes.get("UNKNOWN", 0)
    report.add(
        Result(
            "fuzz",
            backend,
            "answers INTERNAL or UNKNOWN",
            bad,
            "calls",
            [bad],
            target=Target("<=", 0, "none"),
        )
    )
