"""The store as `make run` starts it: ``python -m services.grpc.server`` in a process.

An in-process server cannot be killed; a process can, with SIGKILL, and be
started again on the same port, so clients that know its address find it back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.pg_cluster import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
# Poll every few ms: gRPC's default reconnect backoff (1 s and up) would make a
# start look seconds slower than it is.
_EAGER_RECONNECT = [
    ("grpc.initial_reconnect_backoff_ms", 10),
    ("grpc.min_reconnect_backoff_ms", 10),
    ("grpc.max_reconnect_backoff_ms", 50),
]


class ServerProcess:
    """One server on a fixed port; its stderr goes to a log file, read when it fails."""

    def __init__(self, database_url: str, **settings: str) -> None:
        self.port = free_port()
        self.env = {
            **os.environ,
            "SESSIONSTORE_ADDRESS": self.address,
            "SESSIONSTORE_DATABASE_URL": database_url,
            **{f"SESSIONSTORE_{name.upper()}": value for name, value in settings.items()},
        }
        handle, log = tempfile.mkstemp(prefix="sessionstore-server-", suffix=".log")
        os.close(handle)
        self.log_path = Path(log)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, within: float = 60) -> None:
        """Spawns the server and returns once its health check answers SERVING."""
        # Appended to, so the log of a killed run survives its restart.
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "services.grpc.server"],
                cwd=REPO_ROOT,
                env=self.env,
                stdout=log,
                stderr=log,
            )
        try:
            self._wait_serving(within)
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, in-flight calls die with the process."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """SIGTERM, as a deployment would; SIGKILL if it does not exit within 20 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()

    def exited_unasked(self) -> int | None:
        """The exit code if the process ended by itself, else None."""
        return None if self.process is None else self.process.poll()

    def log_tail(self, characters: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-characters:]
        except OSError:
            return ""

    def remove_log(self) -> None:
        with contextlib.suppress(OSError):
            self.log_path.unlink()

    def _wait_serving(self, within: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + within
        with grpc.insecure_channel(self.address, options=_EAGER_RECONNECT) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"server on port {self.port} exited with {self.process.returncode}: "
                        f"{self.log_tail()}"
                    )
                with contextlib.suppress(grpc.RpcError):
                    answer = health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                    if answer.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                time.sleep(0.02)
        raise TimeoutError(f"server on port {self.port} not SERVING within {within} s")
