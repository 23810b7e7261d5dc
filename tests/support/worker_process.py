"""The projection worker as a deployment runs it: ``python -m services.worker``
in a process of its own, its JSON log in a file the caller reads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support.server_process import REPO_ROOT

# What the worker logs when it starts projecting, and when another leads.
LEADING = "leading: projecting"
WAITING = "waiting for the lead"


class WorkerProcess:
    def __init__(self, database_url: str, **settings: str) -> None:
        handle, path = tempfile.mkstemp(prefix="sessionstore-worker-", suffix=".log")
        self.log_path = Path(path)
        env = {
            **os.environ,
            "SESSIONSTORE_DATABASE_URL": database_url,
            "SESSIONSTORE_LOG_FORMAT": "json",
            # Any other setting, by its name in the settings object (retention_file=...).
            **{f"SESSIONSTORE_{name.upper()}": value for name, value in settings.items()},
        }
        with os.fdopen(handle, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "services.worker"],
                cwd=REPO_ROOT,
                env=env,
                stderr=log,
            )

    def said(self, event: str) -> bool:
        """Whether the worker has logged an event that starts so."""
        return bool(self.logged(event))

    def logged(self, event: str) -> list[dict[str, Any]]:
        """The worker's log records whose event starts so, oldest first."""
        records = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue  # a line still being written
        return [r for r in records if str(r.get("event", "")).startswith(event)]

    def wait_for(self, event: str, within: float) -> float:
        """Seconds until the worker logged ``event``; fails after ``within``."""
        began = time.monotonic()
        while not self.said(event):
            if self.process.poll() is not None:
                raise RuntimeError(f"worker exited: {self.log_path.read_text()}")
            if time.monotonic() - began > within:
                raise TimeoutError(f"no {event!r} in {within} s: {self.log_path.read_text()}")
            time.sleep(0.05)
        return time.monotonic() - began

    def stop(self) -> int:
        """SIGTERM, and the exit code (SIGKILL after 30 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()

    def end(self) -> None:
        """Kills it if it still runs, and removes its log."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.log_path.unlink(missing_ok=True)
