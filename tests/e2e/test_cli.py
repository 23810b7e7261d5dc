"""The `sessionstore` command line end to end: a real server on loopback, driven as a person would.

One server (SQLite in a temporary directory) serves the whole module; each test
works in sessions of its own, so the tests do not depend on each other's order.
"""

from __future__ import annotations

import inspect
import json
import pathlib
import re
import socket
import time
import uuid
from collections.abc import Iterator

import click
import psycopg
import pytest
import structlog.testing
from click.testing import CliRunner, Result
from psycopg import sql

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
        running = start(
            Config(address="127.0.0.1:0", database_url=f"sqlite:///{database}", recall_index=True)  # type: ignore[call-arg]
        )
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
    # The prune audit shows the output's size before and what the trim kept.
    audited = ok(address, "audit", "prunes", session)
    assert "CHARS" in audited and "500 → 20" in audited


def test_the_compaction_audit_lists_a_tainted_compaction_with_its_tokens(address: str) -> None:
    session = new_session(address)
    ok(address, "append", session, "--id", "q", "my password is hunter2")
    ok(address, "append", session, "--id", "a", "--role", "assistant", "noted")
    ok(address, "compact", session, "--summary", "a password was shared", "--first-kept", "a")
    ok(address, "erase", session, "--entry", "q", "--reason", "pasted a password")

    tainted = ok(address, "audit", "compactions", session, "--outcome", "tainted")

    rows = tainted.splitlines()[1:]
    assert len(rows) == 1, tainted
    assert re.search(r"\bmanual\s+tainted\s+\d[\d,]* -> \d[\d,]*\s+1\b", rows[0]), tainted
    assert ": manual" not in tainted
    assert ok(address, "audit", "compactions", session, "--outcome", "ok").splitlines()[1:] == []


@pytest.mark.parametrize("entry", [(), ("--entry", "q")])
def test_erase_refuses_a_blank_reason_naming_the_flag(address: str, entry: tuple[str, ...]) -> None:
    session = new_session(address)
    ok(address, "append", session, "--id", "q", "keep me")

    result = run(address, "erase", session, *entry, "--reason", " ")

    assert result.exit_code == 2, result.output
    assert "Error: Invalid value for '--reason': is blank" in result.stderr
    assert "keep me" in ok(address, "log", session)


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


@pytest.fixture
def unreachable() -> str:
    """An address where nothing listens: a port that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"127.0.0.1:{port}"


def test_an_unreachable_server_exits_2_naming_the_address(unreachable: str) -> None:
    address = unreachable

    result = run(address, "--timeout", "5", "list")

    assert result.exit_code == 2
    assert address in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_json_may_come_after_the_command_name(address: str) -> None:
    session = new_session(address)

    shown = json.loads(ok(address, "show", session, "--json"))

    assert shown["id"] == session
    assert shown["entryCount"] == 0


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name)


def test_json_may_come_after_the_name_of_a_groups_command_too(
    address: str, tmp_path: pathlib.Path
) -> None:
    session = new_session(address)
    audited = json.loads(ok(address, "audit", "view", session, "--json"))
    assert audited["sessionId"] == session
    assert json.loads(ok(address, "audit", "compactions", session, "--json")) == []
    assert json.loads(ok(address, "audit", "prunes", session, "--json")) == []
    database = ["--database-url", f"sqlite:///{tmp_path}/models.db"]
    ok(address, "migrate", *database)  # the store the commands below read
    status = json.loads(ok(address, "readmodels", "status", *database, "--json"))
    assert {m["name"] for m in status["models"]} >= {"catalog", "compactions", "prunes"}
    assert json.loads(ok(address, "readmodels", "retry", *database, "--json"))["applied"] == 0
    # Every command, however deep in its groups, takes it (and once).
    for names in _commands(cli):
        command: click.Command = cli
        for name in names:
            assert isinstance(command, click.Group)
            command = command.commands[name]
        assert [p.opts for p in command.params].count(["--json"]) == 1, names


def test_every_commands_help_keeps_its_examples_one_a_line() -> None:
    def every(group: click.Group, path: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        for name, command in group.commands.items():
            yield (*path, name)
            if isinstance(command, click.Group):
                yield from every(command, (*path, name))

    for names in [(), *every(cli, ())]:
        command: click.Command = cli
        for name in names:
            assert isinstance(command, click.Group)
            command = command.commands[name]
        # Indented deeper than the help's text: examples, to be shown as written.
        help_text = inspect.cleandoc(command.help or "")
        examples = [line.strip() for line in help_text.splitlines() if line.startswith("  ")]
        shown = [
            line.strip() for line in CliRunner().invoke(cli, [*names, "--help"]).output.splitlines()
        ]
        assert [e for e in examples if e not in shown] == [], names


def test_json_numbers_are_numbers_at_every_depth(address: str) -> None:
    session = new_session(address)
    ok(address, "append", session, "--id", "q1", "hello")

    log = json.loads(ok(address, "log", session, "--json"))
    events = [json.loads(line) for line in ok(address, "events", session, "--json").splitlines()]

    assert log["version"] == 2
    assert isinstance(log["totalTokens"], int)
    assert log["entries"][0]["version"] == 2
    assert isinstance(log["entries"][0]["tokenCount"], int)
    assert events[0]["started"]["settings"]["contextWindowTokens"] > 0
    assert events[1]["entriesAppended"]["entries"][0]["id"] == "q1"
    assert events[1]["timestamp"].endswith("Z")  # timestamps keep their RFC 3339 form


@pytest.mark.parametrize("json_first", [True, False])
def test_errors_are_json_with_json(address: str, json_first: bool) -> None:
    args = ["--json", "show", "no-such-session"] if json_first else ["show", "no-such-session"]
    result = run(address, *args, *([] if json_first else ["--json"]))

    assert result.exit_code == 1
    assert result.stdout == ""
    error = json.loads(result.stderr)["error"]
    assert error["code"] == "NOT_FOUND"
    assert "no-such-session" in error["message"]


def test_an_aborted_append_is_json_with_its_hint(address: str) -> None:
    session = new_session(address)

    result = run(address, "append", session, "hi", "--expected-version", "7", "--json")

    assert result.exit_code == 1
    error = json.loads(result.stderr)["error"]
    assert error["code"] == "ABORTED"
    assert "re-read" in error["hint"]


def test_a_usage_mistake_with_json_is_json_and_exits_2(address: str) -> None:
    result = run(address, "append", "any", "--tool-call", "ls", "--args", "[1]", "--json")

    assert result.exit_code == 2
    error = json.loads(result.stderr)["error"]
    assert error["code"] == "USAGE"
    assert "must be a JSON object" in error["message"]


def test_an_unreachable_server_with_json_exits_2(unreachable: str) -> None:
    result = run(unreachable, "--timeout", "5", "--json", "list")

    assert result.exit_code == 2
    error = json.loads(result.stderr)["error"]
    assert error["code"] == "UNAVAILABLE"
    assert unreachable in error["message"]


def test_prompt_messages_and_request_print_what_a_provider_takes(address: str) -> None:
    session = new_session(address)
    ok(address, "append", session, "--role", "system", "Be brief.")
    ok(address, "append", session, "hello")

    messages = json.loads(ok(address, "prompt", session, "--messages"))
    request = json.loads(ok(address, "prompt", session, "--format", "anthropic", "--request"))

    assert [m["role"] for m in messages] == ["system", "user"]
    assert "hello" in json.dumps(messages[1])
    assert "Be brief." in json.dumps(request["system"])
    assert [m["role"] for m in request["messages"]] == ["user"]
    # OpenAI has no top-level system: it is one of the messages.
    assert "system" not in json.loads(ok(address, "prompt", session, "--request"))


def test_prompt_in_responses_and_gemini_formats_names_its_repairs(address: str) -> None:
    session = new_session(address)
    ok(address, "append", session, "--role", "system", "Be brief.")
    ok(address, "append", session, "read a.txt")
    ok(address, "append", session, "--tool-call", "read", "--call-id", "call~1")

    responses = json.loads(
        ok(address, "prompt", session, "--format", "openai-responses", "--request")
    )
    gemini = json.loads(ok(address, "prompt", session, "--format", "gemini", "--request"))
    text = ok(address, "prompt", session, "--format", "anthropic")

    assert [i.get("type", "message") for i in responses["input"]] == [
        "message",
        "message",
        "function_call",
        "function_call_output",  # synthetic: the call is still waiting
    ]
    assert responses["input"][2]["call_id"] != "call~1"  # rewritten to a form OpenAI takes
    assert gemini["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert [c["role"] for c in gemini["contents"]] == ["user", "model", "user"]
    assert "repaired: call call~1 answered by a synthetic error result" in text
    assert "repaired: call id call~1 shown as call_1_" in text
    assert "prompt ref " in text and ":anthropic:" in text


def test_short_ids_stand_for_the_entry_they_begin(address: str) -> None:
    session = new_session(address)
    ok(address, "append", session, "--id", "ask-1", "read the log")
    ok(address, "append", session, "--id", "ask-10", "and the other one")
    ok(address, "append", session, "--id", "call-7", "--tool-call", "cat", "--call-id", "c7")
    ok(address, "append", session, "--id", "result-7", "--tool-result", "c7", "x" * 100)
    ok(address, "append", session, "--id", "answer-7", "--role", "assistant", "all x")

    assert field(ok(address, "entry", session, "ask-1"), "entry") == "ask-1"  # exact wins
    assert field(ok(address, "entry", session, "res"), "entry") == "result-7"
    pruned = ok(address, "prune", session, "res", "--head", "5", "--tail", "5")
    assert "result-7: trimmed to first 5 and last 5 chars" in pruned
    assert "entries before answer-7" in ok(
        address, "compact", session, "--summary", "asked", "--first-kept", "answ"
    )
    again, _ = appended(ok(address, "append", session, "again", "--parent", "answ"))
    assert field(ok(address, "entry", session, again), "parent") == "answer-7"

    ambiguous = run(address, "entry", session, "ask")
    assert ambiguous.exit_code == 1
    assert "error: INVALID_ARGUMENT:" in ambiguous.stderr
    assert "ask-1, ask-10" in ambiguous.stderr
    unknown = run(address, "entry", session, "zz")
    assert unknown.exit_code == 1
    assert "error: NOT_FOUND:" in unknown.stderr
    assert "'zz'" in unknown.stderr


def test_a_trim_without_amounts_keeps_what_the_sessions_policy_says(address: str) -> None:
    session = new_session(address)
    ok(address, "append", session, "--tool-call", "cat", "--call-id", "c1")
    result_id, _ = appended(ok(address, "append", session, "--tool-result", "c1", "y" * 500))
    updated = ok(address, "settings", session, "--trim-head", "100", "--trim-tail", "50")
    assert "trims keep the first 100 and last 50 chars" in updated

    pruned = ok(address, "prune", session, result_id)
    tail_only = ok(address, "prune", session, result_id, "--tail", "0")

    assert "trimmed to first 100 and last 50 chars" in pruned
    assert "trimmed to first 100 and last 0 chars" in tail_only


def test_compaction_reason_is_left_to_the_server(address: str) -> None:
    session = new_session(address)
    ok(address, "append", session, "--id", "q", "first")
    ok(address, "append", session, "--id", "a", "--role", "assistant", "second")

    compacted = json.loads(
        ok(address, "compact", session, "--summary", "s", "--first-kept", "a", "--json")
    )

    assert compacted["compaction"]["reason"] == "manual"


TIME_WITH_ZONE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (UTC|[+-]\d\d:\d\d)"


@pytest.mark.parametrize(("zone", "shown"), [("UTC", "UTC"), ("Asia/Kolkata", "+05:30")])
def test_times_carry_their_zone(
    address: str, monkeypatch: pytest.MonkeyPatch, zone: str, shown: str
) -> None:
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        session = new_session(address)
        ok(address, "append", session, "--id", "q1", "hello")

        created = field(ok(address, "show", session), "created")
        entry_time = field(ok(address, "entry", session, "q1"), "time")
        event_lines = ok(address, "events", session).splitlines()
        listed = ok(address, "list")
    finally:
        monkeypatch.undo()
        time.tzset()

    assert re.fullmatch(TIME_WITH_ZONE, created), created
    assert created.endswith(shown)
    assert entry_time.endswith(shown)
    assert all(re.search(TIME_WITH_ZONE, line) for line in event_lines), event_lines
    assert re.search(rf"{session}.*{TIME_WITH_ZONE}", listed)


def test_recall_finds_a_compacted_turn_and_names_what_hid_it(address: str) -> None:
    session = new_session(address)
    fact, fact_version = appended(
        ok(address, "append", session, "--role", "user", "the release key is quokka-1984")
    )
    ok(address, "append", session, "--role", "assistant", "noted")
    kept, _ = appended(ok(address, "append", session, "--role", "user", "now ship it"))
    compacted = ok(address, "compact", session, "--summary", "release", "--first-kept", kept)
    version = re.search(r"version (\d+)", compacted)
    assert version, compacted

    found = ok(address, "recall", session, "quokka")
    assert fact in found and f"compaction {version.group(1)}" in found
    as_json = json.loads(ok(address, "--json", "recall", session, "quokka", "--limit", "1"))
    (hit,) = as_json["hits"]
    assert (hit["entryId"], hit["version"]) == (fact, fact_version)
    assert "quokka-1984" in hit["snippet"]
    assert "no hits" in ok(address, "recall", session, "wombat")
    refused = run(address, "recall", session, "quokka", "--label", "nokey")
    assert refused.exit_code != 0 and "KEY=VALUE" in refused.output


@pytest.mark.parametrize(
    "command",
    [
        ["readmodels", "status"],
        ["readmodels", "retry"],
        ["rebuild", "catalog"],
        ["retention", "plan", "--policy-file", "policy.yaml"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_a_command_on_a_store_that_is_not_there_says_so(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """Run away from the server's folder, these made an empty SQLite store at the default
    path and reported it: no sessions, no migration, position 0."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.yaml").write_text("policies: []\n")
    result = CliRunner().invoke(cli, command, env={"SESSIONSTORE_DATABASE_URL": None})
    assert result.exit_code == 2, result.output
    assert f"no database at {tmp_path / 'data' / 'sessionstore.db'}" in result.output
    assert not (tmp_path / "data").exists()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    "command",
    [
        ["readmodels", "status"],
        ["readmodels", "retry"],
        ["rebuild", "catalog"],
        ["migrate"],
        ["retention", "plan", "--policy-file", "policy.toml"],
        ["retention", "apply", "--policy-file", "policy.toml"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
@pytest.mark.parametrize(
    ("database_url", "words"),
    [
        (f"postgresql://postgres@127.0.0.1:{_closed_port()}/x", "Connection refused"),
        ("postgresql://postgres@127.0.0.1:5432/no_such_database_here", "does not exist"),
        ("mysql://x", "use sqlite:///path.db, postgresql"),
    ],
    ids=["refused", "missing", "mysql"],
)
def test_a_database_command_on_a_database_it_cannot_use_says_why_in_one_line(
    tmp_path: pathlib.Path,
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    database_url: str,
    words: str,
) -> None:
    """These printed a whole traceback, where the server says the same in one line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.toml").write_text("")
    result = CliRunner().invoke(cli, [*command, "--database-url", database_url])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    (line,) = result.output.splitlines()
    assert line.startswith("Error: ") and words in line


@pytest.mark.parametrize(
    "command",
    [
        ["migrate", "--check"],
        ["readmodels", "status"],
        ["readmodels", "retry"],
        ["rebuild", "catalog"],
        ["retention", "plan", "--policy-file", "policy.toml"],
        ["retention", "apply", "--policy-file", "policy.toml"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_a_command_on_a_schema_that_is_not_there_says_so_and_makes_none(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, postgres_url: str, command: list[str]
) -> None:
    """A typo in schema=: these made the schema, empty, and read it as a store of no
    sessions (or `migrate --check` said only that it was at no migration)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policy.toml").write_text("")
    schema = f"typo_{uuid.uuid4().hex[:12]}"
    base = postgres_url.split("?")[0]
    try:
        result = CliRunner().invoke(cli, [*command, "--database-url", f"{base}?schema={schema}"])
        assert result.exit_code == 1, result.output
        (line,) = result.output.splitlines()
        assert f"schema {schema!r} does not exist in database" in line
        assert "fix schema= in the database URL" in line
        with psycopg.connect(base, autocommit=True) as connection:
            found = connection.execute(
                "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)
            ).fetchone()
            assert found == (0,)
    finally:
        with psycopg.connect(base, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


def test_migrate_check_does_not_make_the_database_it_checks(tmp_path: pathlib.Path) -> None:
    """It made an empty SQLite file, which every later command then read as a store."""
    database = ["--database-url", f"sqlite:///{tmp_path}/absent.db"]
    checked = CliRunner().invoke(cli, ["migrate", "--check", *database])
    assert checked.exit_code == 1, checked.output
    assert f"store not migrated: no database at {tmp_path / 'absent.db'}" in checked.output
    assert not (tmp_path / "absent.db").exists()
    status = CliRunner().invoke(cli, ["readmodels", "status", *database])
    assert status.exit_code == 2 and "no database at" in status.output
