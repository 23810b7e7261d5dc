"""python -m tests.bench.heap: the server, its Python heap traced, for group "memory".

Runs ``services.grpc.server`` unchanged; with ``PYTHONTRACEMALLOC`` set,
tracemalloc traces from the interpreter's start, so imports are counted too.
A thread of this module answers the benchmark: when the file named by
``BENCH_HEAP_FILE`` plus ".ask" appears, it writes the live heap by package
and by file to ``BENCH_HEAP_FILE`` (JSON) and removes the ".ask". A file
rather than a signal: the server's main thread waits in sigwait, where no
Python signal handler runs. Tracing slows the server and costs memory of its
own, so the measured run never uses it.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import threading
import time
import tracemalloc
from collections import defaultdict
from pathlib import Path

ENV = "BENCH_HEAP_FILE"
_SITE = re.compile(r"(?:site|dist)-packages/([A-Za-z0-9_]+)")
_REPO = re.compile(r"/(domain|projections|services|proto|tests)/")
_STDLIB = re.compile(r"/lib/python3\.\d+/(?:([A-Za-z0-9_]+)/|([A-Za-z0-9_]+)\.py)")


def package(filename: str) -> str:
    """Where an allocation's innermost Python frame is: a package, ours, or stdlib."""
    if match := _SITE.search(filename):
        return match.group(1)
    if match := _REPO.search(filename):
        return match.group(1)
    if match := _STDLIB.search(filename):
        return f"stdlib {match.group(1) or match.group(2)}"
    return filename if filename.startswith("<") else "other"


def profile() -> dict[str, object]:
    snapshot = tracemalloc.take_snapshot()
    by_package: dict[str, int] = defaultdict(int)
    by_file: dict[str, int] = defaultdict(int)
    for stat in snapshot.statistics("filename"):
        name = stat.traceback[0].filename
        by_package[package(name)] += stat.size
        by_file[name] += stat.size
    traced, _ = tracemalloc.get_traced_memory()
    return {
        "traced_bytes": traced,
        "tracemalloc_overhead_bytes": tracemalloc.get_tracemalloc_memory(),
        "by_package": dict(sorted(by_package.items(), key=lambda kv: -kv[1])),
        "by_file": dict(sorted(by_file.items(), key=lambda kv: -kv[1])[:40]),
    }


def _answer(path: Path) -> None:
    ask = path.with_name(path.name + ".ask")
    while True:
        if ask.exists():
            temporary = path.with_name(path.name + ".tmp")
            temporary.write_text(json.dumps(profile()))
            temporary.replace(path)
            ask.unlink()
        time.sleep(0.05)


def ask(path: Path, timeout: float = 120.0) -> dict[str, object]:
    """The benchmark's side: the traced server's heap profile, now."""
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".ask").touch()
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the traced server wrote no heap profile")
        time.sleep(0.05)
    answer: dict[str, object] = json.loads(path.read_text())
    return answer


if __name__ == "__main__":
    if not tracemalloc.is_tracing():
        tracemalloc.start()
    threading.Thread(target=_answer, args=(Path(os.environ[ENV]),), daemon=True).start()
    runpy.run_module("services.grpc.server", run_name="__main__", alter_sys=True)
