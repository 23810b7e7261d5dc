"""The client installs by itself: into an empty virtual environment, `pip install
./clients/python` brings grpcio and protobuf and nothing of the server."""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER_ONLY = {
    "litellm",
    "eventsourcing",
    "sqlalchemy",
    "psycopg",
    "tiktoken",
    "structlog",
    "click",
}


def test_pip_install_of_the_client_pulls_no_server_dependency(tmp_path: Path) -> None:
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    python = environment / "bin" / "python"
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            ROOT / "clients/python",
        ],
        check=True,
        timeout=600,
    )
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze"], check=True, capture_output=True, text=True
    ).stdout
    installed = {line.split("==")[0].lower() for line in listed.splitlines()}
    assert {"sessionstore-client", "grpcio", "protobuf"} <= installed
    assert not installed & SERVER_ONLY, installed & SERVER_ONLY
    # Run outside the repository, so only what was installed can be imported.
    subprocess.run([python, "-c", "import sessionstore_client"], check=True, cwd=tmp_path)
    for server_package in ("domain", "services", "proto"):
        found = subprocess.run([python, "-c", f"import {server_package}"], cwd=tmp_path)
        assert found.returncode != 0, f"{server_package} is importable"
