"""python -m tests.bench [--quick] [--only GROUP] [--backend NAME]: run the benchmarks.

Prints each figure as it is measured, then the table, and writes
tests/bench/results/latest.json (every figure, its runs and the raw samples)
and tests/bench/results/latest.png.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from tests.bench import (
    agentloop,
    coldviews,
    coldwrite,
    engine,
    fidelity,
    hostile,
    memory,
    peers,
    recall,
    replicas,
    tokencount,
    views,
    workloads,
)
from tests.bench.config import FULL, QUICK, Context
from tests.bench.plot import write_png
from tests.bench.report import PARTIAL_DIR, RESULTS_DIR, Report
from tests.bench.server import BACKENDS, POSTGRES_URL, postgres_version

GROUPS: dict[str, Callable[[Context], None]] = {
    "ingest": workloads.ingest,
    "length": workloads.length,
    "view": views.view,
    "coldwrite": coldwrite.coldwrite,
    "replay": views.replay,
    "coldcut": views.coldcut,
    "coldview": coldviews.coldview,
    "coldlist": coldviews.coldlist,
    "roundrobin": coldviews.roundrobin,
    "tokens": tokencount.tokens,
    "memory": memory.memory,
    "peers": peers.peers,
    "engine": engine.engine,
    "fidelity": fidelity.fidelity,
    "large": hostile.large,
    "fuzz": hostile.fuzz,
    "agentloop": agentloop.agentloop,
    "replicas": replicas.replicas,
    "recall": recall.recall,
}
# Steps of the loop that says how fast this machine runs Python (about 0.1 s).
_SPEED_STEPS = 1_000_000
PACKAGES = (
    "eventsourcing",
    "grpcio",
    "psycopg",
    "tiktoken",
    "langgraph-checkpoint-postgres",
    "openai-agents",
    "sqlalchemy",
    "asyncpg",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a ~1 minute smoke run")
    parser.add_argument("--only", choices=sorted(GROUPS), action="append", help="run this group")
    parser.add_argument("--backend", choices=BACKENDS, action="append", help="only this backend")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="directory for latest.json and latest.png (default: results/ for a full "
        "run, results/partial/ for --quick, --only or --backend runs)",
    )
    args = parser.parse_args(argv)
    if args.out is None:
        # Only a full run replaces the results the README shows.
        partial = args.quick or args.only or args.backend
        args.out = PARTIAL_DIR if partial else RESULTS_DIR

    scale = QUICK if args.quick else FULL
    backends = tuple(args.backend or BACKENDS)
    groups = [g for g in GROUPS if not args.only or g in args.only]
    report = Report()
    report.meta = {
        "command": _command(argv),
        "scale": scale.name,
        "scale_settings": {k: v for k, v in vars(scale).items()},
        "groups": groups,
        "backends": backends,
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        "source": _source(),
        "packages": {p: _version(p) for p in PACKAGES},
        "group_seconds": {},
    }
    print(f"command: {report.meta['command']}")
    print(f"machine: {report.meta['machine']['summary']}")
    source = report.meta["source"]
    modified = len(source["modified_files"])
    dirty = f" + {modified} modified file(s)" if modified else ""
    print(f"source:  {source['commit'][:12]}{dirty}")
    print(f"scale:   {scale.name}; groups: {', '.join(groups)}; backends: {', '.join(backends)}")
    ctx = Context(scale, backends, report)
    began = time.perf_counter()
    try:
        for group in groups:
            started = time.perf_counter()
            GROUPS[group](ctx)
            seconds = time.perf_counter() - started
            report.meta["group_seconds"][group] = round(seconds, 1)
            print(f"  ({group}: {seconds:.0f} s)", flush=True)
    finally:
        ctx.close()  # SIGTERM the shared servers, drop their schemas
    total = time.perf_counter() - began
    report.meta["total_seconds"] = round(total, 1)
    # Servers are spawned from the working tree all through the run: say so if
    # the code changed under it.
    report.meta["source_at_end"] = _source()
    if report.meta["source_at_end"] != report.meta["source"]:
        print("warning: the source changed during the run; later groups ran newer code")

    print()
    print(report.table())
    print()
    json_path = args.out / "latest.json"
    png_path = args.out / "latest.png"
    report.write_json(json_path)
    write_png(report, png_path)
    passed = sum(r.status == "PASS" for r in report.results)
    short = sum(r.status == "SHORT" for r in report.results)
    print(f"targets: {passed} PASS, {short} SHORT; total {total:.0f} s")
    print(f"command: {report.meta['command']}")
    print(f"machine: {report.meta['machine']['summary']}")
    print(f"wrote {_shown(json_path)} and {_shown(png_path)}")
    # A benchmark reports; it does not fail the build over a SHORT figure.
    return 0


def _shown(path: Path) -> str:
    return str(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)


def _command(argv: list[str] | None) -> str:
    args = sys.argv[1:] if argv is None else argv
    return shlex.join(["python", "-m", "tests.bench", *args])


def _machine() -> dict[str, object]:
    try:
        postgres = postgres_version()
    except Exception as error:  # the report still says why PostgreSQL figures are missing
        postgres = f"unavailable ({error.__class__.__name__})"
    cores = os.cpu_count()
    python = platform.python_version()
    speed = _interpreter_speed()
    return {
        "cores": cores,
        "python": python,
        "interpreter_mips": speed,
        "postgres": postgres,
        "postgres_url": POSTGRES_URL,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "summary": f"{cores} cores ({speed:.1f} M Python loop steps/s), Python {python}, "
        f"PostgreSQL {postgres}, {platform.system()} {platform.release()}",
    }


def _interpreter_speed() -> float:
    """Millions of steps per second of a plain Python loop, the best of five.

    The server's costs are mostly interpreter time, and machines of one kind run
    it at speeds up to four times apart (seen here): runs are comparable only at
    similar speeds, and this says which speed a report was measured at."""
    best = float("inf")
    for _ in range(5):
        began = time.perf_counter()
        total = 0
        for step in range(_SPEED_STEPS):
            total += step
        best = min(best, time.perf_counter() - began)
    return _SPEED_STEPS / best / 1e6


def _source() -> dict[str, object]:
    """The commit measured, and whether the working tree differed from it."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", *args], capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout

    changed = git("status", "--porcelain", "--untracked-files=no").splitlines()
    return {
        "commit": git("rev-parse", "HEAD").strip(),
        # Porcelain lines are "XY path".
        "modified_files": [line[3:] for line in changed if line.strip()],
    }


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    sys.exit(main())
