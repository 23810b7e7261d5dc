"""The `sessionstore` command line end to end: a real server on loopback, driven as a person would.

One server (SQLite in a temporary directory) serves the whole module; each test
works in sessions of its own, so the tests do not depend on each other's order.
"""

from __future__ import annotations

import json
import re
import socket
import uuid
from collections.abc import Iterator

import pytest
import structlog.testing
from click.testing import CliRunner, Result

from services.cli import cli
from services.config import Config
from services.grpc.server import start


@pytest.fixture(scope="module")
def address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    database = tmp_path_factory.mktemp("cli") / "sessions.db"
    # Unconfigured, structlog prints to whatever sys.stdout is at the time, and
    # CliRunner swaps that for the command's output: the in-process server's
    # log lines would land in the CLI's stdout. Keep them out of it.
    with structlog.testing.capture_logs():
        running = start(Config(address="127.0.0.1:0", database_url=f"sqlite:///{database}"))  # type: ignore[call-arg]
        yield f"127.0.0.1:{running.port}"
        running.stop(0)


def run(address: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--address", address, *args])


def ok(address: str, *args: str) -> str:
    """Stdout of a command that must succeed."""
    result = run(address, *args)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def new_session(address: str) -> str:
    # Unique ids keep every test to its own sessions on the shared server.
    session = f"cli-{uuid.uuid4().hex[:12]}"
    assert f"created {session} (version 1)" in ok(address, "create", "--id", session)
    return session


def appended(output: str) -> tuple[str, int]:
    """The entry id and version an `append` printed."""
    match = re.search(r"appended (\S+) at version (\d+)", output)
    assert match, output
    return match.group(1), int(match.group(2))


def field(output: str, name: str) -> str:
    """A value from `show`'s aligned `name  value` lines."""
    match = re.search(rf"^{name}\s+(.+)$", output, re.MULTILINE)
    assert match, output
    return match.group(1)


def test_create_prints_the_id_version_and_window(address: str) -> None:
    output = ok(address, "create", "--id", "cli-created", "--title", "triage", "--window", "50000")

    assert "created cli-created (version 1)" in output
    assert "window 50,000 tokens (from session)" in output
    shown = ok(address, "show", "cli-created")
    assert field(shown, "title") == "triage"
    assert field(shown, "version") == "1"


def test_a_tool_call_and_its_result_are_appended_and_logged(address: str) -> None:
    session = new_session(address)

    user = ok(address, "append", session, "--role", "user", "list the files")
    call = ok(address, "append", session, "--tool-call", "ls", "--args", '{"path": "."}')
    call_id = re.search(r"tool call id (\S+)", call)
    assert call_id, call
    assert field(ok(address, "show", session), "open tool calls") == call_id.group(1)
    result = ok(address, "append", session, "--tool-result", call_id.group(1), "a.py\nb.py")

    assert [appended(o)[1] for o in (user, call, result)] == [2, 3, 4]
    log = ok(address, "log", session)
    assert re.search(r"#2\s+user\s+\S+\s+\d+\s+list the files", log)
    assert '→ ls({"path": "."})' in log
    assert f"← {call_id.group(1)}: a.py…" in log
    shown = ok(address, "show", session)
    assert field(shown, "entries") == "3"
    assert field(shown, "open tool calls") == "none"


def test_a_stale_expected_version_is_refused_with_the_current_version(address: str) -> None:
    session = new_session(address)
    ok(address, "append", session, "first")

    result = run(address, "append", session, "second", "--expected-version", "1")

    assert result.exit_code == 1
    assert "error: ABORTED:" in result.stderr
    assert "at version 2" in result.stderr
    assert "re-read" in result.stderr
    assert "Traceback" not in result.output
    assert field(ok(address, "show", session), "entries") == "1"


def test_a_retried_append_is_answered_from_the_first(address: str) -> None:
    session = new_session(address)
    args = ("append", session, "--role", "assistant", "done", "--idempotency-key", "turn-1")

    first = ok(address, *args)
    retry = ok(address, *args)

    assert appended(retry) == appended(first)
    assert "retry" not in first
    assert "(retry: answered from the first append)" in retry
    assert field(ok(address, "show", session), "entries") == "1"


def test_a_retried_tool_call_keeps_its_generated_call_id(address: str) -> None:
    session = new_session(address)
    args = ("append", session, "--tool-call", "ls", "--idempotency-key", "call-1")

    first = ok(address, *args)
    retry = ok(address, *args)

    assert "retry" in retry
    assert re.findall(r"tool call id (\S+)", first) == re.findall(r"tool call id (\S+)", retry)


def test_replay_shows_only_what_existed_at_that_version(address: str) -> None:
    session = new_session(address)
    _, then = appended(ok(address, "append", session, "an early question"))
    ok(address, "append", session, "a later question")

    replayed = ok(address, "replay", session, str(then))

    assert f"as of version {then} of {then + 1}" in replayed
    assert "an early question" in replayed
    assert "a later question" not in replayed
    now = ok(address, "prompt", session)
    assert "an early question" in now
    assert "a later question" in now


def test_log_at_an_earlier_version(address: str) -> None:
    session = new_session(address)
    ok(address, "append", session, "kept")
    ok(address, "append", session, "not yet")

    log = ok(address, "log", session, "--at-version", "2")

    assert "at version 2: 1 entry" in log
    assert "kept" in log
    assert "not yet" not in log


def test_json_output_is_the_api_response(address: str) -> None:
    session = new_session(address)
    empty = json.loads(ok(address, "--json", "show", session))
    assert empty["entryCount"] == 0  # zero counts are printed, not left out

    response = json.loads(ok(address, "--json", "append", session, "hi"))
    assert response["version"] == 2  # a number, though protobuf's JSON mapping says "2"
    assert len(response["entryIds"]) == 1

    shown = json.loads(ok(address, "--json", "show", session))
    assert shown["id"] == session
    assert shown["entryCount"] == 1

    events = [json.loads(line) for line in ok(address, "--json", "events", session).splitlines()]
    assert [e["version"] for e in events] == [1, 2]
    assert "started" in events[0]
    assert "entriesAppended" in events[1]


def test_events_without_follow_lists_every_event(address: str) -> None:
    session = new_session(address)
    ok(address, "append", session, "hello")
    _, version = appended(ok(address, "append", session, "--role", "assistant", "hi there"))

    lines = ok(address, "events", session).splitlines()

    assert len(lines) == version
    assert [line.split()[0] for line in lines] == [f"#{v}" for v in range(1, version + 1)]
    assert "started" in lines[0]
    assert "user" in lines[1]
    assert "hello" in lines[1]
    after = ok(address, "events", session, "--after", "2").splitlines()
    assert len(after) == 1
    assert "hi there" in after[0]


def test_compaction_prune_and_entry(address: str) -> None:
    session = new_session(address)
    ok(address, "append", session, "read the log")
    call = ok(address, "append", session, "--tool-call", "cat", "--call-id", "c1")
    result_id, _ = appended(ok(address, "append", session, "--tool-result", "c1", "x" * 500))
    kept_id, _ = appended(ok(address, "append", session, "--role", "assistant", "it says x"))
    assert "tool call id c1" in call

    pruned = ok(address, "prune", session, result_id, "--head", "10", "--tail", "10")
    assert "trimmed to first 10 and last 10 chars" in pruned
    assert f"pruned {result_id}" in ok(address, "prompt", session)

    compacted = ok(address, "compact", session, "--summary", "asked; x", "--first-kept", kept_id)
    assert "(manual)" in compacted
    log = ok(address, "log", session)
    assert "summary: asked; x" in log
    assert "read the log" not in log

    # The full output outlives both the prune and the compaction.
    assert "x" * 500 in ok(address, "entry", session, result_id)


def test_a_usage_mistake_is_refused_before_any_call(address: str) -> None:
    result = run(address, "append", "any", "--tool-call", "ls", "--args", "[1]")

    assert result.exit_code == 2
    assert "must be a JSON object" in result.output


def test_an_unknown_session_is_not_found(address: str) -> None:
    result = run(address, "show", "no-such-session")

    assert result.exit_code == 1
    assert result.stderr.startswith("error: NOT_FOUND: ")
    assert "no-such-session" in result.stderr
    assert result.stdout == ""


def test_an_unreachable_server_exits_2_naming_the_address() -> None:
    # A port that was free a moment ago: nothing listens there.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"127.0.0.1:{port}"

    result = run(address, "--timeout", "5", "list")

    assert result.exit_code == 2
    assert address in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
