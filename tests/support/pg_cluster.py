"""A PostgreSQL cluster of one's own, for tests that stop and start the database.

The machine's shared server on 5432 must never be stopped (other suites use
it), so a test that takes the database away runs initdb into a temporary
folder and serves it on a free port. PostgreSQL refuses to run as root: when
root, every initdb and pg_ctl runs as the postgres user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

PROGRAMS = ("initdb", "pg_ctl")


def find_bin_dir() -> Path | None:
    """The folder holding initdb and pg_ctl: from PATH, else Debian's versioned folders."""
    found = [shutil.which(program) for program in PROGRAMS]
    if all(found):
        return Path(str(found[0])).resolve().parent
    # Debian and Ubuntu keep them off PATH; the newest installed version wins.
    folders = [Path(folder) for folder in glob.glob("/usr/lib/postgresql/*/bin")]
    for folder in sorted(folders, key=_major_version, reverse=True):
        if all((folder / program).is_file() for program in PROGRAMS):
            return folder
    return None


def _major_version(bin_dir: Path) -> int:
    version = bin_dir.parent.name.split(".")[0]
    return int(version) if version.isdigit() else 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    """A PostgreSQL cluster in a folder, run as the postgres user when root."""

    def __init__(self, folder: Path, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.data = folder / "data"
        self.port = free_port()
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.data.mkdir()
        if self._as:
            shutil.chown(folder, "postgres")
            shutil.chown(self.data, "postgres")
        self._run("initdb", "-D", str(self.data), "--auth=trust", "-U", "postgres", "-N")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def log_path(self) -> Path:
        return self.data / "server.log"

    def start(self) -> None:
        # fsync off: the tests stop the server, never the machine, and speed counts.
        options = (
            f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c max_connections=200"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log_path), "-w", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        """pg_ctl stop: fast rolls back open transactions; immediate is a crash."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """The server's processes stopped (SIGSTOP) for the block, as a server whose
        storage hangs or whose VM is paused: connections are taken and every packet
        acknowledged by the kernel, and nothing is answered. Continued (SIGCONT)
        however the block ends: a cluster left stopped would hang its removal."""
        postmaster = int((self.data / "postmaster.pid").read_text().splitlines()[0])
        stopped: list[int] = []
        try:
            # The postmaster first, so that it forks no backend after the others.
            for pid in (postmaster, *_children(postmaster)):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
            yield
        finally:
            for pid in reversed(stopped):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def _run(self, program: str, *arguments: str) -> None:
        command = [*self._as, str(self.bin_dir / program), *arguments]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(
                f"{program} failed ({done.returncode}): {done.stderr.strip() or done.stdout}"
            )

    def discard(self) -> None:
        """Stops the server if it runs, without waiting for anyone."""
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self.stop("immediate")


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # The command's name, in parentheses, may hold spaces: the fields after it.
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                children.append(int(stat.parent.name))
    return children


@contextlib.contextmanager
def running_cluster(prefix: str = "sessionstore-pg-") -> Iterator[Cluster]:
    """A started cluster in a temporary folder; stopped and removed afterwards.

    Raises RuntimeError, saying so, when initdb and pg_ctl are not installed.
    """
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise RuntimeError(
            "PostgreSQL's initdb and pg_ctl are neither on PATH nor in /usr/lib/postgresql/*/bin"
        )
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        cluster = Cluster(folder, bin_dir)
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.discard()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def cluster_for_test(prefix: str) -> Iterator[Cluster]:
    """A cluster of the test's own. Without initdb and pg_ctl the test is skipped on
    a developer's machine and fails in CI (CI set), where PostgreSQL tests never skip."""
    import pytest  # here: the stress runs use this module without the test tools

    if find_bin_dir() is None:
        reason = "this test needs PostgreSQL's initdb and pg_ctl: install the server package"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with running_cluster(prefix=prefix) as cluster:
        yield cluster
