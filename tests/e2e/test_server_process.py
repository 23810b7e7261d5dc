"""The server as `make run` starts it: a process that serves, logs and stops cleanly."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_serving(address: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                answer = health.Check(health_pb2.HealthCheckRequest(), timeout=1)
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)


def _server_env(tmp_path: Path, **variables: str) -> dict[str, str]:
    """This process's environment for a server on a free loopback port with a SQLite
    store in ``tmp_path``, ``variables`` set over it."""
    return {
        **os.environ,
        "SESSIONSTORE_ADDRESS": f"127.0.0.1:{_free_port()}",
        "SESSIONSTORE_DATABASE_URL": f"sqlite:///{tmp_path}/store.db",
        **variables,
    }


def _run_to_exit(
    env: dict[str, str], module: str = "services.grpc.server"
) -> subprocess.CompletedProcess[str]:
    """``module`` run with ``env`` until it exits by itself (a start refused), what it
    wrote kept as text; a minute at most."""
    return subprocess.run(
        [sys.executable, "-m", module], env=env, capture_output=True, text=True, timeout=60
    )


def _serve(address: str, tmp_path: Path) -> subprocess.Popen[str]:
    """A server on ``address`` logging JSON, its log readable from ``stderr``."""
    env = _server_env(tmp_path, SESSIONSTORE_ADDRESS=address, SESSIONSTORE_LOG_FORMAT="json")
    return subprocess.Popen(
        [sys.executable, "-m", "services.grpc.server"], env=env, stderr=subprocess.PIPE, text=True
    )


def test_the_server_serves_logs_json_and_stops_gracefully_on_sigterm(tmp_path: Path) -> None:
    address = f"127.0.0.1:{_free_port()}"
    server = _serve(address, tmp_path)
    try:
        _wait_until_serving(address)
        with grpc.insecure_channel(address) as channel:
            store = pb_grpc.SessionStoreStub(channel)
            created = store.CreateSession(pb.CreateSessionRequest(session_id="s-1"))
            assert created.version == 1
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    finally:
        if server.poll() is None:
            server.kill()
    assert server.stderr is not None
    events = [json.loads(line)["event"] for line in server.stderr.read().splitlines() if line]
    assert events[0] == "serving"
    assert events[-2:] == ["shutting down", "stopped"]
    assert (tmp_path / "store.db").exists()


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        (
            "SESSIONSTORE_DATABASE_URL",
            "mysql://somewhere/db",
            "use sqlite:///path.db, postgresql",
        ),
        ("SESSIONSTORE_MAX_WORKERS", "lots", "SESSIONSTORE_MAX_WORKERS='lots'"),
        ("SESSIONSTORE_ADDRESS", "localhost", "is not host:port"),
        ("SESSIONSTORE_ADDRESS", "127.0.0.1:99999", "is not host:port"),
        (
            "SESSIONSTORE_DATABASE_URL",
            "postgresql://postgres@127.0.0.1:5432/no_such_database_here",
            "database 'no_such_database_here' does not exist",
        ),
        (
            "SESSIONSTORE_DATABASE_URL",
            "postgresql://sessionstore_no_such_role@127.0.0.1:5432/test",
            "the credentials in the database URL were refused",
        ),
        (
            "SESSIONSTORE_DATABASE_URL",
            f"postgresql://postgres@127.0.0.1:{_free_port()}/test",
            "cannot connect to PostgreSQL at 127.0.0.1:",
        ),
    ],
)
def test_a_server_that_cannot_start_says_why_without_a_traceback(
    tmp_path: Path, variable: str, value: str, words: str
) -> None:
    env = _server_env(tmp_path, **{variable: value})
    started = time.monotonic()
    done = _run_to_exit(env)
    assert done.returncode == 1
    assert words in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    # Said at once, not after the connection pool's 10 s wait (which would come on top
    # of the interpreter's start, itself several seconds on a busy machine).
    assert time.monotonic() - started < 10


# Each of these once started a server that refused every call, spun a core or
# failed later with a traceback; now the start is refused in one line that names
# the variable to fix.
BAD_SETTINGS = [
    ("SESSIONSTORE_MAX_MESSAGE_MB", "0", "greater than 0"),
    ("SESSIONSTORE_MAX_MESSAGE_MB", "100000", "less than or equal to 2045"),
    ("SESSIONSTORE_MAX_ENTRY_BYTES", "-1", "greater than 0"),
    ("SESSIONSTORE_SNAPSHOT_INTERVAL", "0", "greater than 0"),
    ("SESSIONSTORE_MODEL_WINDOWS", '{"gpt-4o": -5}', "['gpt-4o']=-5: Input should be greater"),
    ("SESSIONSTORE_PROJECTION_POLL_SECONDS", "0", "greater than 0"),
    ("SESSIONSTORE_FOLLOW_POLL_SECONDS", "-1", "greater than 0"),
    ("SESSIONSTORE_CACHE_MAX_MB", "-1", "greater than 0"),
    ("SESSIONSTORE_COMPACTION_WORKERS", "0", "greater than 0"),
    ("SESSIONSTORE_MODEL_WINDOWS", "notjson", "is not valid JSON"),
    ("SESSIONSTORE_SESSION_DEFAULTS", "notjson", "is not valid JSON"),
    ("SESSIONSTORE_LOG_LEVEL", "bogus", "use one of DEBUG, INFO, WARNING, ERROR"),
    (
        "SESSIONSTORE_SESSION_DEFAULTS",
        '{"compaction": {"threshhold_ratio": 0.5}, "bogus": 1}',
        "unknown settings compaction.threshhold_ratio, bogus",
    ),
]


@pytest.mark.parametrize(("variable", "value", "words"), BAD_SETTINGS)
def test_a_setting_out_of_bounds_is_refused_at_start_in_one_line(
    tmp_path: Path, variable: str, value: str, words: str
) -> None:
    done = _run_to_exit(_server_env(tmp_path, **{variable: value}))
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"sessionstore: invalid configuration: {variable}")
    assert words in line
    assert not (tmp_path / "store.db").exists()


@pytest.mark.parametrize("window", ["[1]", '"lots"', "-5", "1.5"])
def test_a_providers_file_with_a_window_not_a_count_is_refused_in_one_line(
    tmp_path: Path, window: str
) -> None:
    """A list here ended the start with a TypeError's traceback."""
    providers = tmp_path / "providers.toml"
    providers.write_text(f"[local]\nwindow_tokens = {window}\n")
    env = _server_env(
        tmp_path, SESSIONSTORE_LOG_FORMAT="json", SESSIONSTORE_PROVIDERS_FILE=str(providers)
    )
    done = _run_to_exit(env)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    (line,) = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert "[local] window_tokens must be a whole number of tokens" in line["reason"]


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("SESSIONSTORE_SNAPSHOT_INTERVAL", "-1", "SESSIONSTORE_SNAPSHOT_INTERVAL='-1'"),
        ("SESSIONSTORE_MODEL_WINDOWS", "notjson", "SESSIONSTORE_MODEL_WINDOWS is not valid JSON"),
        ("SESSIONSTORE_DATABASE_URL", "mysql://x", "use sqlite:///path.db, postgresql"),
        (
            "SESSIONSTORE_DATABASE_URL",
            f"postgresql://postgres@127.0.0.1:{_free_port()}/test",
            "cannot connect to PostgreSQL at 127.0.0.1:",
        ),
    ],
)
def test_a_worker_that_cannot_start_says_why_in_one_line(
    tmp_path: Path, variable: str, value: str, words: str
) -> None:
    env = {
        **os.environ,
        "SESSIONSTORE_DATABASE_URL": f"sqlite:///{tmp_path}/store.db",
        variable: value,
    }
    done = _run_to_exit(env, "services.worker")
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert words in line


@pytest.mark.parametrize("module", ["services.grpc.server", "services.worker"])
def test_a_variable_no_setting_reads_is_warned_of_at_start(tmp_path: Path, module: str) -> None:
    """SESSIONSTORE_CACHE_MAX_MBS once left the cache at its default, silently."""
    env = _server_env(
        tmp_path,
        SESSIONSTORE_LOG_FORMAT="json",
        SESSIONSTORE_CACHE_MAX_MBS="64",
        SESSIONSTORE_TOKEN="the client's",
        # A database that refuses at once, so the process ends by itself.
        SESSIONSTORE_DATABASE_URL=f"postgresql://postgres@127.0.0.1:{_free_port()}/test",
    )
    done = _run_to_exit(env, module)
    assert done.returncode == 1
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    warned = [line for line in lines if line["event"].startswith("variable ignored")]
    assert [(w["level"], w["variable"], w["did_you_mean"]) for w in warned] == [
        ("warning", "SESSIONSTORE_CACHE_MAX_MBS", "SESSIONSTORE_CACHE_MAX_MB")
    ]


def test_a_second_server_on_a_taken_address_exits_instead_of_splitting_the_traffic(
    tmp_path: Path,
) -> None:
    address = f"127.0.0.1:{_free_port()}"
    first = _serve(address, tmp_path)
    try:
        _wait_until_serving(address)
        second = _serve(address, tmp_path / "other")
        assert second.wait(timeout=60) == 1
        assert second.stderr is not None
        # Ours are the JSON lines; gRPC's core logs the failed bind in its own words too.
        lines = second.stderr.read().splitlines()
        (line,) = [json.loads(line) for line in lines if line.startswith("{")]
        assert line["event"] == "cannot start"
        assert f"cannot listen on {address}: is another server using it?" in line["reason"]
        assert first.poll() is None
    finally:
        first.kill()
        first.wait()


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        (
            {"SESSIONSTORE_TLS_CERT_FILE": "bad.pem", "SESSIONSTORE_TLS_KEY_FILE": "bad.pem"},
            "are not a PEM certificate chain and its private key",
        ),
        (
            {
                "SESSIONSTORE_ADDRESS": "nohost.invalid:50051",
                "SESSIONSTORE_ALLOW_UNAUTHENTICATED_REMOTE": "true",
            },
            "cannot listen on nohost.invalid:50051: nohost.invalid does not resolve",
        ),
    ],
    ids=["bad certificate", "unresolvable host"],
)
def test_an_address_that_cannot_be_bound_says_why_not_blaming_another_server(
    tmp_path: Path, settings: dict[str, str], words: str
) -> None:
    """Both were reported as "is another server using it?"."""
    (tmp_path / "bad.pem").write_text("garbage\n")
    env = _server_env(
        tmp_path,
        SESSIONSTORE_LOG_FORMAT="json",
        **{k: str(tmp_path / v) if v == "bad.pem" else v for k, v in settings.items()},
    )
    done = _run_to_exit(env)
    assert done.returncode == 1
    (line,) = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert line["event"] == "cannot start"
    assert words in line["reason"]
    assert "another server" not in line["reason"]


def test_the_serving_line_names_the_port_bound_for_port_0(tmp_path: Path) -> None:
    server = _serve("127.0.0.1:0", tmp_path)
    try:
        assert server.stderr is not None
        serving = json.loads(server.stderr.readline())
        assert serving["event"] == "serving"
        host, _, port = serving["address"].rpartition(":")
        assert host == "127.0.0.1" and int(port) > 0
        _wait_until_serving(serving["address"])
    finally:
        server.kill()
        server.wait()


def test_repeated_stop_signals_still_stop_within_the_grace_period(tmp_path: Path) -> None:
    """`uv run` forwards SIGTERM while the process group gets one too: both arrive together."""
    address = f"127.0.0.1:{_free_port()}"
    server = _serve(address, tmp_path)
    try:
        _wait_until_serving(address)
        for stop in (signal.SIGTERM, signal.SIGTERM, signal.SIGINT, signal.SIGTERM):
            server.send_signal(stop)
        assert server.wait(timeout=15) == 0
    finally:
        if server.poll() is None:
            server.kill()
    assert server.stderr is not None
    events = [json.loads(line)["event"] for line in server.stderr.read().splitlines() if line]
    assert events[-2:] == ["shutting down", "stopped"]
