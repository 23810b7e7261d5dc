"""The CLI's context-management commands end to end, against a real server in process:
`system-prompt`, `status`, `context list/detail`, `usage`, store-run `compact`, `overflow`,
and what `prompt` shows of the engine's work.

The sessions have a small window (20,000 tokens, so the window guard warns) and
one tool result of about 200 KB, far more than the window holds.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog.testing
from click.testing import CliRunner, Result
from sessionstore_client import Client, CompactionPolicy, SessionSettings, SummarizerChain

from services.cli import cli
from services.config import Config
from services.grpc.server import start
from tests.support.fake_provider import FakeProvider, delay

BIG_OUTPUT = "line of build output\n" * 10_000  # about 210 KB
OPENAI_OVERFLOW = json.dumps(
    {
        "error": {
            "message": "This model's maximum context length is 20000 tokens. "
            "However, your messages resulted in 25000 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
)


@pytest.fixture(scope="module")
def address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    database = tmp_path_factory.mktemp("cli-context") / "sessions.db"
    # Keep the in-process server's log lines out of the CLI's captured stdout.
    with structlog.testing.capture_logs():
        running = start(Config(address="127.0.0.1:0", database_url=f"sqlite:///{database}"))  # type: ignore[call-arg]
        yield f"127.0.0.1:{running.port}"
        running.stop(0)


def run(address: str, *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--address", address, *args], input=stdin)


def ok(address: str, *args: str, stdin: str | None = None) -> str:
    result = run(address, *args, stdin=stdin)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def field(output: str, name: str) -> str:
    match = re.search(rf"^\s*{name}\s+(.+)$", output, re.MULTILINE)
    assert match, output
    return match.group(1)


def small_session(address: str, *options: str) -> str:
    """A 20,000-token window, a read of a huge file, then three short turns.

    Compaction is manual: the tests ask for it (compact, overflow) and check what
    it did, rather than racing a compaction the threshold started on its own.
    """
    session = f"ctx-{uuid.uuid4().hex[:12]}"
    ok(
        address,
        "create",
        "--id",
        session,
        "--model",
        "gpt-4o",
        "--window",
        "20000",
        "--compaction-mode",
        "manual",
        *options,
    )
    ok(address, "append", session, "--id", "ask", "why does the build fail?")
    ok(address, "append", session, "--id", "call", "--tool-call", "read", "--call-id", "c1")
    ok(address, "append", session, "--id", "big", "--tool-result", "c1", "-", stdin=BIG_OUTPUT)
    for turn in range(3):
        ok(address, "append", session, "--id", f"q{turn}", f"question {turn} " + "word " * 200)
        ok(address, "append", session, "--id", f"a{turn}", "--role", "assistant", f"answer {turn}")
    return session


def test_create_and_settings_set_only_the_context_options_given(address: str) -> None:
    session = f"ctx-{uuid.uuid4().hex[:12]}"
    created = ok(address, "create", "--id", session, "--compaction-mode", "manual")
    assert "engine layered, compaction manual at 80% of the window" in created

    changed = ok(
        address,
        "settings",
        session,
        "--threshold",
        "0.6",
        "--summarizer",
        "openai/gpt-4o-mini",
        "--summarizer-api-base",
        "http://127.0.0.1:8000/v1",
        "--pruning",
        "recent-n",
        "--keep-recent",
        "5000",
    )

    assert (
        "compaction manual at 60% of the window "
        "(summariser openai/gpt-4o-mini at http://127.0.0.1:8000/v1), pruning recent-n"
    ) in changed
    # The offline summariser asks no server; the sliding window summarises nothing.
    offline = ok(address, "settings", session, "--summarizer", "")
    assert "(summariser offline), pruning" in offline
    sliding = ok(address, "settings", session, "--engine", "sliding-window")
    assert "(drops the oldest messages, no summariser)" in sliding
    shown = json.loads(ok(address, "show", session, "--json"))["settings"]
    assert shown["engine"] == "sliding-window"
    assert shown["compaction"]["mode"] == "manual"
    assert shown["compaction"]["keepRecentTokens"] == 5000
    assert shown["compaction"]["reserveTokens"] == 0  # untouched: derived from the window
    assert shown["pruning"]["softTrimHeadChars"] == 1500  # untouched


def test_status_shows_the_window_guard_and_how_full_the_window_is(address: str) -> None:
    session = small_session(address)

    status = ok(address, "status", session)

    assert field(status, "window") == "20,000 tokens (from session)"
    assert field(status, "guard").startswith("warn: the context window of 20,000 tokens")
    assert re.match(r"[\d,]+ tokens \(\d+\.\d%\), the store's estimate", field(status, "used"))
    assert field(status, "provider") == "none reported by the provider yet"
    assert field(status, "compactions") == "0"
    report = json.loads(ok(address, "status", session, "--json"))
    assert report["window"]["level"] == "warn"
    assert report["usedTokens"] == (
        report["systemPromptTokens"]
        + report["summaryTokens"]
        + report["pinnedTokens"]
        + report["messagesTokens"]
    )


def test_system_prompt_reports_each_part_and_context_detail_the_truncations(
    address: str, tmp_path: Path
) -> None:
    session = small_session(address)
    agents = tmp_path / "AGENTS.md"
    agents.write_text("Always run the tests.\n" * 2_000)  # 44,000 chars: over 20,000
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            [
                {
                    "type": "function",
                    "function": {
                        "name": "read",
                        "description": "Read a file",
                        "parameters": {"type": "object", "properties": {"path": {}}},
                    },
                },
                {
                    "name": "bash",
                    "description": "Run a shell command",
                    "input_schema": {
                        "type": "object",
                        "properties": {"command": {"type": "string", "description": "x" * 200}},
                    },
                },
            ]
        )
    )
    args = [
        "system-prompt",
        session,
        "--text",
        "You fix builds.",
        "--file",
        str(agents),
        "--file",
        str(tmp_path / "missing.md"),
        "--skill",
        "pdf:Read PDF files",
        "--tools",
        str(tools),
    ]

    stored = ok(address, *args)
    again = ok(address, *args)

    assert re.match(r"system prompt set at version \d+", stored)
    assert re.search(rf"{re.escape(str(agents))}\s+TRUNCATED\s+44,000 raw", stored)
    assert re.search(r"missing\.md\s+MISSING", stored)
    assert "2 tools" in stored
    assert again.startswith("system prompt unchanged")

    detail = ok(address, "context", "detail", session)
    assert "2 files (1 TRUNCATED, 1 MISSING)" in detail
    assert re.search(r"^\s+pdf\s+Read PDF files$", detail, re.MULTILINE)
    tools_section = detail.split("tools by schema size:")[1]
    assert tools_section.index("bash") < tools_section.index("read")  # largest first
    results = detail.split("largest tool results:")[1]
    assert re.search(r"big\s+read\s+210,000\s+[\d,]+\s+[\d,]+\s+(truncate|replace)", results)
    used = re.search(r"^used\s+([\d,]+)", detail, re.MULTILINE)
    parts = [
        re.search(rf"^{name}\s+([\d,]+)", detail, re.MULTILINE)
        for name in ("system prompt", "summary", "pinned", "messages")
    ]
    assert used and all(parts)
    assert sum(int(p.group(1).replace(",", "")) for p in parts if p) == int(
        used.group(1).replace(",", "")
    )
    assert ok(address, "context", "list", session).splitlines()[0] == detail.splitlines()[0]

    request = json.loads(ok(address, "prompt", session, "--request"))
    assert [t["function"]["name"] for t in request["tools"]] == ["read", "bash"]
    assert request["messages"][0]["role"] == "system"


def test_a_tools_file_of_the_wrong_shape_is_a_usage_error(address: str, tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text('[{"description": "no name"}]')

    result = run(address, "system-prompt", "any", "--tools", str(tools))

    assert result.exit_code == 2
    assert "has no name" in result.output


def test_prompt_shows_the_guard_and_what_it_did_to_the_huge_result(address: str) -> None:
    session = small_session(address)

    shown = ok(address, "prompt", session)

    assert re.search(
        r"estimated [\d,]+ of 20,000 tokens \(.*\), budget [\d,]+, engine layered", shown
    )
    assert "guard warn: the context window of 20,000 tokens" in shown
    assert re.search(r"guarded big: (replaced by a placeholder|truncated)", shown)
    assert re.search(r"prompt ref \d+:openai:[0-9a-f]{64}", shown)
    assert "prompt ref" in ok(address, "replay", session, "3")


def test_compact_dry_run_shows_the_plan_then_compact_writes_the_receipt(address: str) -> None:
    session = small_session(address, "--keep-recent", "300")

    plan = ok(address, "compact", session, "--dry-run")

    assert plan.startswith("dry run, nothing written; the plan:")
    assert field(plan, "cut") == "keep from q1"
    assert field(plan, "covers").startswith("5 entries (ask … a0)")
    assert re.match(r"\d+: ", field(plan, "chunks"))
    assert re.match(r"[\d,]+ → [\d,]+ \(estimated\)", field(plan, "tokens"))
    assert field(plan, "summariser").startswith("offline")
    assert "compactions  0" in ok(address, "status", session)

    receipt = ok(address, "compact", session, "--instructions", "keep the build errors")

    assert re.match(r"compacted at version \d+ \(manual\): entries before q1", receipt)
    assert field(receipt, "trigger") == "manual"
    assert field(receipt, "covers") == "5 entries (ask … a0)"
    assert re.match(
        r"[\d,]+ \(tokenizer:\S+\) → [\d,]+ \(tokenizer:\S+\)", field(receipt, "tokens")
    )
    assert field(receipt, "summariser") == "offline"
    assert field(receipt, "fallback") == "full"
    assert field(receipt, "instructions") == "keep the build errors"
    status = ok(address, "status", session)
    assert field(status, "compactions") == "1"
    assert re.match(r"#\d+ \(manual\), [\d,]+ → [\d,]+ tokens: Goal: ", field(status, "latest"))

    again = ok(address, "compact", session)
    assert again.startswith("not compacted: nothing to compact")


def test_compact_with_an_idempotency_key_compacts_once(address: str) -> None:
    session = small_session(address, "--keep-recent", "300")
    first = ok(address, "compact", session, "--force", "--idempotency-key", "nightly-1")
    retry = ok(address, "compact", session, "--force", "--idempotency-key", "nightly-1")

    assert re.match(r"compacted at version \d+ \(manual\)", first)
    assert retry == "already compacted with this idempotency key; its receipt:\n" + first
    assert field(ok(address, "status", session), "compactions") == "1"
    other = run(address, "compact", session, "--idempotency-key", "nightly-1")
    assert other.exit_code != 0 and "used for a different compaction" in other.output
    # The event log names the key, as it does an append's.
    (compacted,) = [
        line for line in ok(address, "events", session).splitlines() if "compacted" in line
    ]
    assert "[key nightly-1]" in compacted


def test_context_list_tells_an_undone_compaction_from_none(address: str) -> None:
    """After a compaction and its undo it said "never compacted"."""
    session = small_session(address, "--keep-recent", "300")
    assert "never compacted" in ok(address, "context", "list", session)
    ok(address, "compact", session)
    assert "compaction at version" in ok(address, "context", "list", session)
    ok(address, "undo-compaction", session)
    listed = ok(address, "context", "list", session)
    assert "no compaction in force" in listed
    assert "never compacted" not in listed


def test_compact_options_of_the_two_forms_do_not_mix(address: str) -> None:
    session = small_session(address)

    mixed = run(address, "compact", session, "--summary", "s", "--first-kept", "q2", "--dry-run")
    unanchored = run(address, "compact", session, "--summary", "s")

    assert mixed.exit_code == unanchored.exit_code == 2
    assert "leave out --summary" in mixed.output
    assert "--summary needs --first-kept" in unanchored.output


def test_overflow_with_an_openai_body_answers_a_new_view(address: str) -> None:
    session = small_session(address, "--keep-recent", "300")
    ref = re.search(r"prompt ref (\d+):openai:(\w+)", ok(address, "prompt", session))
    assert ref

    answered = ok(
        address,
        "overflow",
        session,
        "--status",
        "400",
        "--error",
        OPENAI_OVERFLOW,
        "--view-version",
        ref.group(1),
        "--view-hash",
        ref.group(2),
    )

    assert re.match(rf"{session}: new prompt view at version \d+, openai format", answered)
    assert re.search(r"^engine \w+", answered, re.MULTILINE)
    assert re.search(r"^estimated [\d,]+ of 20,000 tokens", answered, re.MULTILINE)
    assert re.search(
        r"overflow\s+openai 400 \(context_\w+\) refused view", ok(address, "events", session)
    )

    # Classifying an error that is not an overflow imports litellm: seconds on a busy machine.
    refused = run(
        address,
        "--json",
        "--timeout",
        "60",
        "overflow",
        session,
        "--status",
        "429",
        "--error",
        "slow down",
        "--view-version",
        ref.group(1),
    )
    assert refused.exit_code == 1
    assert json.loads(refused.stderr)["error"]["code"] == "INVALID_ARGUMENT"


def test_overflow_asks_for_the_refused_views_version(address: str) -> None:
    """The store records which view the provider refused, and no session has a version
    0: the option is required, so a report without it never reaches the server."""
    session = small_session(address, "--keep-recent", "300")

    unnamed = run(address, "overflow", session, "--status", "400", "--error", OPENAI_OVERFLOW)

    assert unnamed.exit_code == 2
    assert "Missing option '--view-version'" in unnamed.output
    assert "overflow" not in ok(address, "events", session)


def test_a_window_set_after_an_overflow_taught_one_is_the_window_everywhere(
    address: str,
) -> None:
    """`settings --window` is the remedy the guard names: what it prints is the window
    status and the views use, even over a window an overflow taught, and even unchanged."""
    session = small_session(address, "--keep-recent", "300")

    def report(window: int) -> Result:
        ref = re.search(r"prompt ref (\d+):openai:(\w+)", ok(address, "prompt", session))
        assert ref
        error = OPENAI_OVERFLOW.replace("20000 tokens", f"{window} tokens")
        return run(
            address,
            "--json",
            "overflow",
            session,
            "--status",
            "400",
            "--error",
            error,
            "--view-version",
            ref.group(1),
            "--view-hash",
            ref.group(2),
        )

    # A window under the guard's minimum is refused, and nothing is recorded.
    tiny = report(8192)
    assert tiny.exit_code == 1
    error = json.loads(tiny.stderr)["error"]
    assert error["code"] == "FAILED_PRECONDITION"
    assert "context window of 8,192 tokens" in error["message"]
    assert "nothing is recorded" in error["message"]
    assert "overflow" not in ok(address, "events", session)

    assert report(18000).exit_code == 0
    assert field(ok(address, "status", session), "window") == "18,000 tokens (from learned)"
    # Named again, unchanged, the window the client set supersedes the learned one.
    changed = ok(address, "settings", session, "--window", "20000")
    assert "window 20,000 tokens (from session)" in changed
    assert field(ok(address, "status", session), "window") == "20,000 tokens (from session)"
    assert re.search(r"^estimated [\d,]+ of 20,000 tokens", ok(address, "prompt", session), re.M)


def test_a_limit_in_bytes_learned_is_shown_with_the_figure_it_came_from(address: str) -> None:
    """A request refused for its bytes (HTTP 413) teaches a limit in bytes: `status`
    shows it beside the window, and `events` what it was learned from."""
    session = small_session(address, "--keep-recent", "300")
    assert "byte limit" not in ok(address, "status", session)
    shown = json.loads(ok(address, "--json", "prompt", session))
    rendered = sum(
        len(shown.get(part, "").encode()) for part in ("messagesJson", "systemJson", "toolsJson")
    )
    sent = rendered + 10_000
    ok(
        address,
        "overflow",
        session,
        "--status",
        "413",
        "--error",
        "<html><title>413 Request Entity Too Large</title></html>",
        "--view-version",
        str(shown["version"]),
        "--request-bytes",
        str(sent),
    )

    report = json.loads(ok(address, "--json", "status", session))
    learned, allowed = report["learnedRequestBytes"], report["requestBytesAllowed"]
    assert 0 < allowed < learned < rendered
    assert field(ok(address, "status", session), "byte limit") == (
        f"views kept under {allowed:,} bytes (learned: {learned:,}, from a request refused "
        "for its size)"
    )
    assert re.search(
        rf"overflow\s+openai 413 \(request_too_large\) refused view {shown['version']}: .*\n"
        rf" +learned a limit of {learned:,} bytes \(a request of {sent:,} bytes as sent\)$",
        ok(address, "events", session),
        re.MULTILINE,
    )


def test_usage_per_turn_with_the_estimate_of_the_view_it_answered(address: str) -> None:
    session = small_session(address)
    ref = re.search(r"prompt ref (\S+)", ok(address, "prompt", session))
    assert ref

    ok(
        address,
        "append",
        session,
        "--role",
        "assistant",
        "fixed",
        "--prompt-ref",
        ref.group(1),
        "--input-tokens",
        "9000",
        "--output-tokens",
        "40",
        "--cache-read-tokens",
        "1000",
    )
    usage = ok(address, "usage", session)

    assert re.search(r"^#\d+\s+\S+\s+9,000\s+40\s+1,000\s+0\s+[\d,]+$", usage, re.MULTILINE)
    assert re.search(r"^total\s+9,000\s+40\s+1,000\s+0$", usage, re.MULTILINE)
    assert (
        field(ok(address, "status", session), "provider") == "9,000 last reported by the provider"
    )
    bad = run(address, "append", session, "question", "--input-tokens", "5")
    assert bad.exit_code == 2
    assert "go with assistant entries" in bad.output


def test_events_name_abandoned_tool_calls(address: str) -> None:
    import grpc

    from proto.sessionstore.v1 import session_store_pb2 as pb
    from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc

    session = small_session(address)
    ok(address, "append", session, "--tool-call", "deploy", "--call-id", "never")
    with grpc.insecure_channel(address) as channel:
        pb_grpc.SessionStoreStub(channel).AbandonToolCalls(
            pb.AbandonToolCallsRequest(session_id=session, reason="the runtime crashed")
        )
    listing = ok(address, "events", session)
    assert re.search(r"abandoned\s+tool calls never \(the runtime crashed\)", listing)


def test_compact_waits_for_a_slow_summariser_by_default(
    address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model that answers after more than the other commands' 10 s still compacts:
    `compact` waits as long as the session's chain may take (the server would end the
    compaction at the CLI's deadline)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeProvider() as provider, Client(address) as api:
        policy = CompactionPolicy(
            summarizers=SummarizerChain(steps=["openai/fake-summarizer", "offline"]),
            summarizer_model="openai/fake-summarizer",
            summarizer_api_base=provider.openai_base,
            summarizer_window_tokens=128_000,
            step_timeout_seconds=40,
            mode="manual",
        )
        settings = SessionSettings(model="gpt-4o", compaction=policy)
        warm, slow = (api.create_session(settings=settings).id for _ in range(2))
        for session in (warm, slow):
            for turn in range(4):
                ok(address, "append", session, f"question {turn} " + "word " * 300)
                ok(address, "append", session, "--role", "assistant", f"answer {turn}")
        # The first compaction loads the model client, which takes seconds on a busy machine.
        ok(address, "--timeout", "60", "compact", warm, "--force")
        provider.script(delay(11.0))

        receipt = ok(address, "compact", slow, "--force")

    assert field(receipt, "summariser") == "openai/fake-summarizer", receipt


def test_compact_says_why_it_would_not_and_did_not_compact(address: str) -> None:
    """A short history whose offline summary would outweigh it: the dry run and the
    compaction give the same cause, and show no plan of a compaction that is not made."""
    session = f"ctx-{uuid.uuid4().hex[:12]}"
    ok(address, "create", "--id", session, "--compaction-mode", "manual", "--keep-recent", "50")
    for turn in range(10):
        ok(address, "append", session, f"Question {turn}: which file holds the parser?")
        ok(address, "append", session, "--role", "assistant", f"Answer {turn}: src/p{turn}.py.")

    planned = ok(address, "compact", session, "--force", "--dry-run")
    done = ok(address, "compact", session, "--force")

    cause = done.removeprefix("not compacted: ")
    assert cause.startswith("every step of the chain declined. offline (too-large): "), done
    assert "hard-drop: the prompt fits its target" in cause
    assert planned == f"dry run, would not compact: {cause}"
    assert done.count("\n") == 1  # the cause alone: no plan of a compaction not made
    assert "compactions  0" in ok(address, "status", session)


def test_a_failed_summariser_s_cause_is_shown_whole(
    address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model step that fails (no key for it): `compact` and `events` show its cause,
    not a few characters of it."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    session = small_session(address, "--keep-recent", "300", "--summarizer", "openai/gpt-4o-mini")

    receipt = ok(address, "--timeout", "120", "compact", session)

    assert field(receipt, "summariser") == "offline"
    assert "OPENAI_API_KEY" in field(receipt, "tried"), receipt
    events = ok(address, "events", session)
    failure = events[events.index("failed ") :].split("\n#")[0]
    assert "openai/gpt-4o-mini at stage" in failure
    assert "OPENAI_API_KEY" in " ".join(failure.split()), failure
