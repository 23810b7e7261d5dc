"""The server bounds glibc's malloc arenas: threads taking turns on cached sessions
would otherwise each keep an arena, and its high-water mark, of their own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Threads that allocate, then glibc's own account of its arenas (one <heap> each).
SCRIPT = """
import ctypes, os, sys, tempfile, threading
from services.grpc.server import bound_malloc_arenas
print(bound_malloc_arenas())
def allocate():
    kept = [bytearray(200_000) for _ in range(20)]
    barrier.wait()
barrier = threading.Barrier(8)
threads = [threading.Thread(target=allocate) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
path = tempfile.mktemp()
handle = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(handle))
libc.fclose(ctypes.c_void_p(handle))
print(open(path).read().count("<heap nr="))
os.unlink(path)
"""


def _arenas(env: dict[str, str]) -> tuple[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    bound, arenas = done.stdout.split()
    return bound, int(arenas)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_threads_share_one_arena_unless_the_operator_chose() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    assert _arenas(env) == ("True", 1)
    # An operator's setting stands (glibc reads it at start).
    assert _arenas({**env, "MALLOC_ARENA_MAX": "3"}) == ("False", 3)
