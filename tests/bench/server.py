"""The store as a real server process, and the databases it runs on.

Each benchmark talks to ``python -m services.grpc.server`` over loopback gRPC, the
way a deployment does, so that "cold" means a fresh process and the figures
include serialisation, the gRPC stack and the interpreter's start-up work.
Databases are throwaway: a PostgreSQL schema created per use and dropped after,
or an SQLite file in a temporary directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import psutil
import psycopg
from grpc_health.v1 import health_pb2, health_pb2_grpc
from psycopg import sql

from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc

REPO_ROOT = Path(__file__).resolve().parents[2]
POSTGRES_URL = os.environ.get(
    "SESSIONSTORE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
BACKENDS = ("postgres", "sqlite")
# Big batches and long prompt views exceed gRPC's 4 MB default.
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.max_send_message_length", 64 << 20),
]


# -- databases ----------------------------------------------------------------------


@dataclass
class Database:
    """One isolated database: a URL for the store, plus what the raw baselines need."""

    backend: str
    url: str
    # PostgreSQL: the schema; SQLite: the file.
    schema: str = ""
    path: str = ""

    def psycopg_connect(self, autocommit: bool = False) -> psycopg.Connection:
        """A plain connection whose unqualified names resolve in this schema."""
        assert self.backend == "postgres"
        return psycopg.connect(
            POSTGRES_URL, options=f"-c search_path={self.schema}", autocommit=autocommit
        )


@contextlib.contextmanager
def database(backend: str) -> Iterator[Database]:
    """A fresh, empty database for ``backend``, removed afterwards."""
    if backend == "postgres":
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            yield Database(backend, f"{POSTGRES_URL}?schema={schema}", schema=schema)
        finally:
            with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
    elif backend == "sqlite":
        directory = tempfile.mkdtemp(prefix="sessionstore-bench-")
        path = f"{directory}/sessions.db"
        try:
            yield Database(backend, f"sqlite:///{path}", path=path)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    else:
        raise ValueError(f"unknown backend {backend!r}")


def postgres_version() -> str:
    with psycopg.connect(POSTGRES_URL) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "?"


# -- the server ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServerProcess:
    """A running ``python -m services.grpc.server`` and a channel to it."""

    process: subprocess.Popen[bytes]
    port: int
    # Seconds from spawning the process to the health check answering SERVING.
    start_seconds: float
    log_path: str
    channel: grpc.Channel = field(init=False)

    def __post_init__(self) -> None:
        self.channel = new_channel(self.port)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stub(self) -> pb_grpc.SessionStoreStub:
        return pb_grpc.SessionStoreStub(self.channel)

    def rss_bytes(self) -> int:
        return int(psutil.Process(self.process.pid).memory_info().rss)

    def check_alive(self) -> None:
        """Raises, saying how, if the server process is gone."""
        code = self.process.poll()
        if code is not None:
            raise RuntimeError(
                f"server on port {self.port} exited early ({_exit(code)}); "
                f"its log ends:\n{_tail(self.log_path)}"
            )

    def stop(self) -> None:
        """SIGTERM, as a deployment would, then wait for the graceful exit."""
        self.channel.close()
        code = self.process.poll()
        if code is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        else:
            print(f"server on port {self.port} had already exited ({_exit(code)})", file=sys.stderr)
        # Errors the server logged would otherwise vanish with its log file.
        log = _tail(self.log_path)
        if code is not None or "Traceback" in log or "error" in log.lower():
            print(f"server on port {self.port} logged:\n{log}", file=sys.stderr)
        with contextlib.suppress(OSError):
            os.unlink(self.log_path)


def _exit(code: int) -> str:
    if code < 0:
        return f"killed by {signal.Signals(-code).name}, not by this benchmark"
    return f"exit code {code}"


def run_threads(targets: list[Callable[[], None]], server: ServerProcess | None = None) -> None:
    """Runs each target in a thread of its own; re-raises the first failure after all end.

    A failing client should stop the run with one clear error, not leave the
    others' tracebacks and a silently wrong figure; a dead server is named.
    """
    failures: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        if server is not None:
            server.check_alive()
        raise failures[0]


def new_channel(port: int) -> grpc.Channel:
    return grpc.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS)


def spawn(
    db: Database,
    *,
    cache_max_mb: int = 512,
    env: dict[str, str] | None = None,
    module: str = "services.grpc.server",
    **settings: str,
) -> ServerProcess:
    """Starts a server on ``db`` and returns once its health check says SERVING.

    ``settings`` become SESSIONSTORE_* variables; ``env`` adds others (a
    provider key, say) to the server's environment; ``module`` is what runs
    (tests.bench.heap: the server with its heap traced).
    """
    port = free_port()
    env = {
        **os.environ,
        "SESSIONSTORE_ADDRESS": f"127.0.0.1:{port}",
        "SESSIONSTORE_DATABASE_URL": db.url,
        "SESSIONSTORE_CACHE_MAX_MB": str(cache_max_mb),
        # INFO: start and shutdown are logged (so is a refused request, which
        # the benchmarks never make); a server killed from outside shows as such.
        "SESSIONSTORE_LOG_LEVEL": "INFO",
        **{f"SESSIONSTORE_{k.upper()}": v for k, v in settings.items()},
        **(env or {}),
    }
    # The server's stderr goes to a file: a pipe nobody reads could fill and block it.
    handle, log_path = tempfile.mkstemp(prefix="sessionstore-bench-", suffix=".log")
    started = time.perf_counter()
    with os.fdopen(handle, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", module],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=log,
        )
    try:
        _wait_serving(process, port, log_path)
    except BaseException:
        process.kill()
        process.wait()
        raise
    return ServerProcess(process, port, time.perf_counter() - started, log_path)


# Retry connecting every 10 ms: gRPC's default reconnect backoff (1 s and up)
# would round the measured start time up to whole seconds.
_EAGER_RECONNECT = [
    ("grpc.initial_reconnect_backoff_ms", 10),
    ("grpc.min_reconnect_backoff_ms", 10),
    ("grpc.max_reconnect_backoff_ms", 50),
]


def _wait_serving(process: subprocess.Popen[bytes], port: int, log_path: str) -> None:
    deadline = time.monotonic() + 60
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=_EAGER_RECONNECT) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"server exited with {process.returncode}: {_tail(log_path)}")
            try:
                answer = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
            # Short sleeps: start time is one of the figures.
            time.sleep(0.01)
    raise TimeoutError(f"server did not answer SERVING within 60 s: {_tail(log_path)}")


def _tail(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")[-6000:]
    except OSError:
        return ""


@contextlib.contextmanager
def running(db: Database, **settings: object) -> Iterator[ServerProcess]:
    server = spawn(db, **settings)  # type: ignore[arg-type]
    try:
        yield server
    finally:
        server.stop()
