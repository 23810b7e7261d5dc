"""The prompt view and the context report end to end: a real server, SQLite and
PostgreSQL, over gRPC.

A view is the whole request, system prompt and tools included, under one hash,
and a turn can be sent as what it adds; the report adds up, of one version;
provider usage calibrates the estimate; pruning changes views, never the log;
engines, server-wide defaults and smaller budgets reach the views.
"""

from __future__ import annotations

import hashlib
import json
import threading

import grpc
import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.conftest import start_server
from tests.support.context_engine import create, of_kind, turn, view
from tests.support.grpc_calls import Stub, append, refused, text, tool_call, tool_result, user
from tests.support.waiting import eventually

# -- pruning --------------------------------------------------------------------------


def test_pruning_soft_trims_then_hard_clears_and_the_log_is_unchanged(store: Stub) -> None:
    # Trims keep most of each result here, so a fuller prompt needs clearing too.
    session = create(
        store,
        model="gpt-4o",
        context_window_tokens=50_000,
        compaction=pb.CompactionPolicy(mode="manual"),
        pruning=pb.PruningPolicy(
            mode="cache-ttl",
            ttl_seconds=0,
            min_prunable_tool_chars=10_000,
            soft_trim_head_chars=5_000,
            soft_trim_tail_chars=5_000,
        ),
    )
    for n in range(6):
        turn(store, session.id, n, output_chars=12_000)
    first = view(store, session.id)
    assert [a.kind for a in first.actions] == ["pruned"]
    assert {p.action for p in first.pruned} == {pb.PRUNE_ACTION_SOFT_TRIM}
    for n in range(6, 14):
        turn(store, session.id, n, output_chars=12_000)
    later = view(store, session.id)
    assert pb.PRUNE_ACTION_HARD_CLEAR in {p.action for p in later.pruned}
    assert "[Old tool result content cleared]" in later.messages_json
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    results = [e for e in log.entries if e.role == pb.ROLE_TOOL]
    assert all(len(e.content[0].tool_result.content) == 12_000 for e in results)


# -- the system prompt, the report, the hash ------------------------------------------


def test_the_view_is_the_whole_request_and_the_report_adds_up(store: Stub) -> None:
    session = create(store, model="gpt-4o", max_system_file_chars=1_000)
    request = pb.SetSystemPromptRequest(
        session_id=session.id,
        system_prompt=pb.SystemPrompt(
            text="You are a careful coding agent.",
            files=[
                pb.InjectedFile(path="AGENTS.md", content="Use uv.\n"),
                pb.InjectedFile(path="NOTES.md", content="x" * 5_000),
                pb.InjectedFile(path="GONE.md", missing=True),
            ],
            skills=[pb.Skill(name="pdf", description="read PDFs")],
            tools=[
                pb.Tool(
                    name="read",
                    description="Read a file",
                    parameters_json=json.dumps(
                        {"type": "object", "properties": {"path": {"type": "string"}}}
                    ),
                )
            ],
        ),
    )
    stored = store.SetSystemPrompt(request)
    assert stored.changed
    statuses = [(f.path, f.status, f.raw_chars) for f in stored.system_prompt.files]
    assert statuses == [
        ("AGENTS.md", pb.FILE_STATUS_OK, 8),
        ("NOTES.md", pb.FILE_STATUS_TRUNCATED, 5_000),
        ("GONE.md", pb.FILE_STATUS_MISSING, 0),
    ]
    turn(store, session.id, 1, output_chars=2_000)

    for provider_format in (pb.PROMPT_FORMAT_OPENAI, pb.PROMPT_FORMAT_ANTHROPIC):
        served = view(store, session.id, format=provider_format)
        name = "anthropic" if provider_format == pb.PROMPT_FORMAT_ANTHROPIC else "openai"
        canonical = (
            f'{{"format":"{name}","system":{served.system_json or "null"},'
            f'"tools":{served.tools_json},"messages":{served.messages_json}}}'
        )
        assert hashlib.sha256(canonical.encode()).hexdigest() == served.request_hash
        assert json.loads(served.tools_json)[0]["name" if name == "anthropic" else "type"]
    openai = json.loads(view(store, session.id).messages_json)
    assert openai[0]["role"] == "system" and "Use uv." in openai[0]["content"]

    report = store.GetContextReport(pb.GetContextReportRequest(session_id=session.id))
    current = view(store, session.id)
    assert report.used_tokens == current.estimated_tokens
    assert (
        report.system_prompt_tokens
        + report.summary_tokens
        + report.pinned_tokens
        + report.messages_tokens
        == report.used_tokens
    )
    assert report.system_prompt_tokens == report.system_prompt.total > 0
    assert [f.status for f in report.files][2] == pb.FILE_STATUS_MISSING
    assert report.top_tools[0].name == "read"

    same = store.SetSystemPrompt(request)
    assert not same.changed and same.version == current.version


def compacted_fork(store: Stub) -> tuple[pb.Session, int]:
    """A fork of a session with a compaction in force, and how many entries it holds.
    This server has yet to read it: its first read loads it from the cut."""
    session = create(store, model="gpt-4o")
    ids = list(append(store, session.id, user("Turn one: read a.txt")).entry_ids)
    ids += append(
        store,
        session.id,
        tool_call("c1", "read", {"path": "a.txt"}),
        tool_result("c1", "A" * 10_000),
        text(pb.ROLE_ASSISTANT, "a.txt is all As."),
        user("Turn three: and b.txt?"),
    ).entry_ids
    store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session.id, summary="## Goal\nRead files.", first_kept_entry_id=ids[4]
        )
    )
    return store.ForkSession(pb.ForkSessionRequest(session_id=session.id)), len(ids)


def test_a_new_forks_report_follows_what_is_appended_after_its_first_read(
    store: Stub,
) -> None:
    """The copy loaded from the cut folded its whole history, when a report first asked,
    from the events read at the load: after an append in between, the report asked it
    for a version it lacked (OUT_OF_RANGE), and the next append failed (INTERNAL)."""
    fork, entries = compacted_fork(store)
    view(store, fork.id)
    for n in range(3):
        written = append(store, fork.id, text(pb.ROLE_ASSISTANT, f"answer {n}"))
        report = store.GetContextReport(pb.GetContextReportRequest(session_id=fork.id))
        assert (report.version, report.entries) == (written.version, entries + n + 1)
        assert report.compaction_count == 1


def test_a_report_is_of_one_version_while_appends_go_on(store: Stub) -> None:
    """The report read the history, then the session: an append in between gave it the
    view of one version and the session's totals of a later one."""
    fork, entries = compacted_fork(store)
    output_tokens = fork.total_usage.output_tokens
    stop = threading.Event()

    def appending() -> None:
        while not stop.is_set():
            append(store, fork.id, text(pb.ROLE_ASSISTANT, "more", usage=pb.Usage(output_tokens=1)))

    writer = threading.Thread(target=appending)
    writer.start()
    try:
        for _ in range(150):
            report = store.GetContextReport(pb.GetContextReportRequest(session_id=fork.id))
            # One entry, with one output token, each version after the fork.
            appended = report.version - fork.version
            assert (report.entries, report.total_usage.output_tokens) == (
                entries + appended,
                output_tokens + appended,
            )
    finally:
        stop.set()
        writer.join()
    assert report.version > fork.version, "nothing was appended: the test proved nothing"


def test_provider_usage_calibrates_the_estimate(store: Stub) -> None:
    session = create(store, model="gpt-4o")
    append(store, session.id, user("hello " * 200))
    served = view(store, session.id)
    answer = text(
        pb.ROLE_ASSISTANT,
        "hi",
        usage=pb.Usage(input_tokens=served.estimated_tokens * 2, output_tokens=3),
        prompt_ref=pb.PromptRef(
            version=served.version, format=pb.PROMPT_FORMAT_OPENAI, hash=served.request_hash
        ),
    )
    (appended,) = of_kind(store, session.id, "entries_appended")[-1:]
    append(store, session.id, answer)
    report = store.GetContextReport(pb.GetContextReportRequest(session_id=session.id))
    # The first report sets the ratio; a later one counting less moves it a quarter down.
    assert report.calibration_ratio == pytest.approx(2.0)
    assert report.last_provider_input_tokens == served.estimated_tokens * 2
    (turn_usage,) = report.turns
    assert turn_usage.estimated_input_tokens == served.estimated_tokens
    (lesson,) = of_kind(store, session.id, "entries_appended")[-1].entries_appended.lessons
    assert (lesson.estimated_tokens, lesson.provider_tokens) == (
        served.estimated_tokens,
        served.estimated_tokens * 2,
    )
    assert appended.entries_appended.lessons == []
    # The view's figure is calibrated: the next one counts what the provider will.
    append(store, session.id, user("and again " * 100))
    calibrated = view(store, session.id)
    assert calibrated.calibration == pytest.approx(2.0)
    assert calibrated.estimated_tokens == calibrated.uncalibrated_tokens * 2
    append(
        store,
        session.id,
        text(
            pb.ROLE_ASSISTANT,
            "ok",
            usage=pb.Usage(input_tokens=calibrated.uncalibrated_tokens, output_tokens=1),
            prompt_ref=pb.PromptRef(
                version=calibrated.version,
                format=pb.PROMPT_FORMAT_OPENAI,
                hash=calibrated.request_hash,
            ),
        ),
    )
    report = store.GetContextReport(pb.GetContextReportRequest(session_id=session.id))
    assert report.calibration_ratio == pytest.approx(1.75)


def test_a_sliding_window_session_drops_the_oldest_without_a_model(store: Stub) -> None:
    session = create(store, model="gpt-4o", context_window_tokens=40_000, engine="sliding-window")
    for n in range(10):
        turn(store, session.id, n, output_chars=15_000)
        current = view(store, session.id)
        assert current.estimated_tokens <= current.budget_tokens
        assert current.engine == "sliding-window"
    assert eventually(lambda: of_kind(store, session.id, "compaction_recorded"))
    receipts = [e.compaction_recorded for e in of_kind(store, session.id, "compaction_recorded")]
    assert receipts and all(r.fallback_stage == "hard-drop" for r in receipts)
    assert all(r.engine == "sliding-window" for r in receipts)


def test_an_unknown_engine_is_refused(store: Stub) -> None:
    session = create(store, model="gpt-4o")
    message = refused(
        lambda: store.UpdateSettings(
            pb.UpdateSettingsRequest(session_id=session.id, settings=pb.SessionSettings(engine="x"))
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "layered" in message


def test_server_wide_defaults_reach_new_sessions(database_url: str) -> None:
    running = start_server(
        database_url,
        session_defaults={"compaction": {"threshold_ratio": 0.6}, "pruning": {"mode": "recent-n"}},
    )
    try:
        with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc

            created = create(pb_grpc.SessionStoreStub(channel), model="gpt-4o")
            assert created.settings.compaction.threshold_ratio == pytest.approx(0.6)
            assert created.settings.pruning.mode == "recent-n"
    finally:
        running.stop(0)


def test_a_client_may_ask_for_a_view_within_a_smaller_budget(store: Stub) -> None:
    session = create(store, model="gpt-4o", compaction=pb.CompactionPolicy(keep_recent_tokens=500))
    for n in range(4):
        turn(store, session.id, n, output_chars=8_000)
    full = view(store, session.id)
    smaller = view(store, session.id, token_budget=full.estimated_tokens // 2)
    assert smaller.budget_tokens == full.estimated_tokens // 2
    assert smaller.estimated_tokens <= smaller.budget_tokens
    assert smaller.actions and smaller.actions[0].kind == "compacted"
    # The audit says why: the budget the view was asked within, not the threshold.
    receipts = of_kind(store, session.id, "compaction_recorded")
    assert {r.compaction_recorded.reason for r in receipts} == {"budget"}
    refused(lambda: view(store, session.id, token_budget=0), grpc.StatusCode.INVALID_ARGUMENT)


def test_a_turn_sends_only_what_it_adds_while_the_prefix_holds(store: Stub) -> None:
    session = create(store, model="gpt-4o")
    append(store, session.id, text(pb.ROLE_SYSTEM, "Be brief."), user("one"))
    for provider_format in (pb.PROMPT_FORMAT_OPENAI, pb.PROMPT_FORMAT_ANTHROPIC):
        held = view(store, session.id, format=provider_format)
        messages = json.loads(held.messages_json)
        for n in range(3):
            append(store, session.id, text(pb.ROLE_ASSISTANT, f"answer {n}"))
            append(store, session.id, user(f"question {n}"))
            delta = view(
                store,
                session.id,
                format=provider_format,
                held_version=held.version,
                held_hash=held.request_hash,
            )
            assert delta.appended and delta.base_version == held.version
            messages += json.loads(delta.messages_json)
            whole = view(store, session.id, format=provider_format)
            assert messages == json.loads(whole.messages_json)
            assert delta.request_hash == whole.request_hash
            held = whole
    # A compaction changes the beginning: the whole view comes back.
    (kept,) = append(store, session.id, user("last")).entry_ids
    store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session.id, summary="said things", first_kept_entry_id=kept
        )
    )
    after = view(store, session.id, held_version=held.version, held_hash=held.request_hash)
    assert not after.appended
    assert "said things" in after.messages_json
    # A hash that never was is not trusted either.
    stranger = view(store, session.id, held_version=held.version, held_hash="0" * 64)
    assert not stranger.appended


def test_a_turn_that_is_the_whole_log_fits_beside_the_summary_in_force(store: Stub) -> None:
    """After a compaction cut at a turn's start, that turn is all the log keeps: its
    results are trimmed to fit beside the summary, which stays in the prompt."""
    manual = pb.CompactionPolicy(mode="manual")
    session = create(store, model="gpt-4o", context_window_tokens=40_000, compaction=manual)
    for n in range(10):
        append(store, session.id, user(f"Map package {n}.", id=f"u-map-{n}"))
        mapped = " ".join(f"pkg_{n}/mod_{i}.py defines class C{i}." for i in range(300))
        append(store, session.id, text(pb.ROLE_ASSISTANT, mapped, id=f"a-map-{n}"))
    append(store, session.id, user("Read every module and list what each exports.", id="u1"))
    summary = " ".join(f"module_{i} exports handler_{i} and config_{i}." for i in range(600))
    store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session.id, summary=summary, first_kept_entry_id="u1", reason="manual"
        )
    )
    auto = pb.SessionSettings(compaction=pb.CompactionPolicy(mode="auto"))
    store.UpdateSettings(pb.UpdateSettingsRequest(session_id=session.id, settings=auto))
    for n in range(12):
        append(store, session.id, tool_call(f"call_{n}", "read", {"path": f"src/m_{n}.py"}))
        output = "".join(f"line {i}: value = {i * n}\n" for i in range(700))
        append(store, session.id, tool_result(f"call_{n}", output))
    fitted = view(store, session.id)
    assert fitted.estimated_tokens <= fitted.budget_tokens
    # Each fitting step counts the summary: one is enough, not one more a round.
    steps = [a.detail for a in fitted.actions if a.kind == "truncated"]
    assert len(steps) <= 1, steps
    assert fitted.pruned
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    assert log.compaction.first_kept_entry_id == "u1" and log.entries[0].id == "u1"


def test_a_dry_run_foresees_a_compaction_that_would_not_shrink_the_prompt(store: Stub) -> None:
    """A short history where the offline summary would outweigh what it replaces: the
    dry run answers what the compaction then does (nothing), for the same reasons,
    and neither shows a plan of a compaction that does not happen."""
    session = create(
        store,
        model="gpt-4o",
        compaction=pb.CompactionPolicy(keep_recent_tokens=50, mode="manual"),
    )
    for n in range(10):
        append(store, session.id, user(f"Question {n}: which file holds the parser?"))
        append(store, session.id, text(pb.ROLE_ASSISTANT, f"Answer {n}: src/parser_{n}.py."))
    before = store.GetSession(pb.GetSessionRequest(session_id=session.id)).version

    planned = store.Compact(pb.CompactRequest(session_id=session.id, force=True, dry_run=True))
    done = store.Compact(pb.CompactRequest(session_id=session.id, force=True))

    assert not done.compacted
    assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).version == before
    # The real cause, by each step tried: the offline summary would not be smaller.
    assert "offline" in done.reason and "no fewer than" in done.reason, done.reason
    assert "hard-drop" in done.reason, done.reason
    assert not done.HasField("plan"), done.plan
    assert not planned.compacted
    assert planned.reason == f"dry run: {done.reason}"
    assert not planned.HasField("plan"), planned.plan
