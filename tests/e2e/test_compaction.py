"""Compaction end to end: a real server, SQLite and PostgreSQL, over gRPC.

An agent runtime that only appends turns and asks for the prompt view gets a view
that fits the window: the session compacts by itself past its threshold, with
every decision recorded and every view replayable as served. A manual compaction
is planned by a dry run and follows its instructions. A slow summariser loses no
append or view; a failing one is recorded and the next in the chain summarises.
"""

from __future__ import annotations

import json
import random
import threading
import time

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.support.context_engine import create, of_kind, session_summarised_by, turn, view
from tests.support.fake_provider import FakeProvider, delay, fail
from tests.support.grpc_calls import Stub, append, text, tool_call, tool_result, user
from tests.support.texts import code_text, log_text
from tests.support.waiting import eventually

# -- compaction by threshold ----------------------------------------------------------


def test_a_long_session_compacts_by_itself_and_every_view_fits(store: Stub) -> None:
    session = create(
        store,
        model="gpt-4o",
        context_window_tokens=40_000,
        compaction=pb.CompactionPolicy(keep_recent_tokens=6_000),
    )
    served: list[pb.PromptView] = []
    for n in range(12):
        turn(store, session.id, n, output_chars=30_000)
        current = view(store, session.id)
        assert current.estimated_tokens <= current.budget_tokens
        served.append(current)
    compactions = of_kind(store, session.id, "compaction_recorded")
    assert compactions, "the session never compacted"
    receipt = compactions[0].compaction_recorded
    assert receipt.reason == "threshold"
    assert receipt.tokens_after < receipt.tokens_before
    assert receipt.entries_covered > 0 and receipt.first_covered_entry_id
    assert receipt.tokens_before_source.startswith("tokenizer:")
    assert receipt.fallback_stage in ("full", "split", "clipped", "oversized-omitted", "hard-drop")
    assert "## Goal" in receipt.summary
    # Replay: every view served reads back the same at its version, hash and all.
    for earlier in served:
        again = view(store, session.id, version=earlier.version)
        assert (again.messages_json, again.request_hash) == (
            earlier.messages_json,
            earlier.request_hash,
        )


def test_a_user_message_accepted_at_its_write_is_served_whatever_came_before(
    store: Stub,
) -> None:
    """A message that fits beside the system prompt is accepted; the history before it
    then goes for a note short enough to leave it room, however little that is."""
    for turns in (0, 1, 3):
        session = create(store, model="gpt-4o", context_window_tokens=16_384)
        for n in range(turns):
            append(store, session.id, user(f"turn {n}: run the tests"))
            append(store, session.id, tool_call(f"call_{n}", "bash", {"command": "pytest"}))
            output = log_text(random.Random(n), 8_000, "3 passed")
            append(store, session.id, tool_result(f"call_{n}", output))
            append(store, session.id, text(pb.ROLE_ASSISTANT, "done"))
        body = code_text(random.Random(9), 42_000) + "\nPlease review this file."
        appended = store.AppendEntries(
            pb.AppendEntriesRequest(
                session_id=session.id,
                entries=[user(body)],
                view_after_append=pb.ViewAfterAppend(format=pb.PROMPT_FORMAT_OPENAI),
            )
        )
        assert not appended.view_after_append_error, (turns, appended.view_after_append_error)
        served = view(store, session.id)
        assert served.estimated_tokens <= served.budget_tokens
        assert json.loads(served.messages_json)[-1]["content"] == body


# -- manual compaction ----------------------------------------------------------------


def test_a_dry_run_plans_and_a_manual_compaction_follows_instructions(store: Stub) -> None:
    session = create(
        store, model="gpt-4o", compaction=pb.CompactionPolicy(keep_recent_tokens=1_000)
    )
    for n in range(5):
        turn(store, session.id, n, output_chars=3_000)
    before = store.GetSession(pb.GetSessionRequest(session_id=session.id)).version
    planned = store.Compact(pb.CompactRequest(session_id=session.id, dry_run=True))
    assert not planned.compacted
    assert planned.plan.first_kept_entry_id and planned.plan.chunks
    assert planned.plan.estimated_tokens_after < planned.plan.tokens_before
    assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).version == before

    done = store.Compact(
        pb.CompactRequest(session_id=session.id, instructions="Keep every file name.")
    )
    assert done.compacted and done.compaction.reason == "manual"
    assert done.compaction.instructions == "Keep every file name."
    assert done.compaction.first_kept_entry_id == planned.plan.first_kept_entry_id
    assert "src/file_0.py" in done.compaction.summary
    assert done.compaction.prompt_hash.startswith("sha256:")
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    assert log.compaction.first_kept_entry_id == done.compaction.first_kept_entry_id
    # Nothing new since: a second compaction has nothing to do.
    again = store.Compact(pb.CompactRequest(session_id=session.id))
    assert not again.compacted and again.reason


# -- a slow summariser, concurrent writers --------------------------------------------


def test_appends_and_views_during_a_slow_summariser_lose_nothing(
    store: Stub, provider: FakeProvider
) -> None:
    session = session_summarised_by(store, provider, threshold_ratio=0.3)
    provider.script(*[delay(1.5)] * 4)
    turn(store, session.id, 0, output_chars=15_000)
    turn(store, session.id, 1, output_chars=15_000)
    errors: list[Exception] = []

    def writer(k: int) -> None:
        try:
            for i in range(5):
                append(store, session.id, user(f"writer {k} note {i}"))
                append(store, session.id, text(pb.ROLE_ASSISTANT, f"ok {k}.{i}"))
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    def reader() -> None:
        try:
            for _ in range(3):
                current = view(store, session.id)
                assert current.estimated_tokens <= current.budget_tokens
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    turn(store, session.id, 2, output_chars=15_000)  # crosses the threshold
    # The compaction runs in the background: under the budget, views do not wait for it.
    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    threads.append(threading.Thread(target=reader))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    final = view(store, session.id)
    assert final.estimated_tokens <= final.budget_tokens
    stored = store.GetSession(pb.GetSessionRequest(session_id=session.id))
    assert stored.entry_count == 3 * 4 + 3 * 5 * 2
    assert eventually(lambda: len(of_kind(store, session.id, "compaction_recorded")) == 1)
    assert provider.requests, "the summariser was never called"
    receipt = of_kind(store, session.id, "compaction_recorded")[0].compaction_recorded
    assert receipt.summarizer_model == "openai/fake-summarizer"


def test_a_failing_summariser_is_recorded_and_the_next_in_the_chain_summarises(
    store: Stub, provider: FakeProvider
) -> None:
    session = session_summarised_by(store, provider, threshold_ratio=0.3)
    provider.script(*[fail("server_error")] * 10)
    for n in range(6):
        turn(store, session.id, n, output_chars=15_000)
    current = view(store, session.id)
    assert current.estimated_tokens <= current.budget_tokens
    assert eventually(lambda: of_kind(store, session.id, "compaction_recorded"))
    (failed,) = of_kind(store, session.id, "compaction_failed")
    assert failed.compaction_failed.trigger == "threshold"
    assert failed.compaction_failed.summarizer_model == "openai/fake-summarizer"
    receipt = of_kind(store, session.id, "compaction_recorded")[0].compaction_recorded
    # The default chain: the session's summariser, then offline, then the hard drop.
    assert receipt.summarizer_model == "offline" and receipt.fallback_stage == "full"
    assert [(a.summarizer, a.outcome) for a in receipt.attempts] == [
        ("openai/fake-summarizer", "failed"),
        ("offline", "used"),
    ]
    assert "unavailable" in receipt.attempts[0].reason
    # A chain of the model and the hard drop alone: the oldest entries are dropped.
    store.UpdateSettings(
        pb.UpdateSettingsRequest(
            session_id=session.id,
            settings=pb.SessionSettings(
                compaction=pb.CompactionPolicy(
                    summarizers=pb.SummarizerChain(steps=["openai/fake-summarizer", "hard-drop"])
                )
            ),
        )
    )
    provider.script(fail("auth"))
    turn(store, session.id, 9, output_chars=2_000)
    outcome = store.Compact(pb.CompactRequest(session_id=session.id, force=True))
    assert outcome.compacted and outcome.compaction.fallback_stage == "hard-drop"
    assert [(a.summarizer, a.outcome) for a in outcome.compaction.attempts] == [
        ("openai/fake-summarizer", "failed"),
        ("hard-drop", "used"),
    ]


def test_a_summary_cut_before_the_views_hard_drop_drops_nothing_more(
    store: Stub, provider: FakeProvider
) -> None:
    session = create(
        store,
        model="gpt-4o",
        context_window_tokens=40_000,
        compaction=pb.CompactionPolicy(
            threshold_ratio=0.5,
            summarizers=pb.SummarizerChain(steps=["openai/fake-summarizer", "hard-drop"]),
            summarizer_model="openai/fake-summarizer",
            summarizer_api_base=provider.openai_base,
            summarizer_window_tokens=128_000,
        ),
    )
    provider.script(delay(3.0))
    for n in range(6):
        turn(store, session.id, n, output_chars=15_000)
    # Over the threshold: the model summarises in the background, planned on this view.
    assert view(store, session.id).estimated_tokens > 20_000
    assert eventually(lambda: len(provider.requests) == 1, within=60)
    answered = time.monotonic() + 3.0
    for n in range(6, 10):
        turn(store, session.id, n, output_chars=15_000)
    # Over its budget while the model still writes: the view's hard drop cuts later
    # than the model's plan did.
    fitted = view(store, session.id)
    assert fitted.estimated_tokens <= fitted.budget_tokens
    time.sleep(max(0.0, answered - time.monotonic()) + 1.5)
    # The model's summary cannot land before the cut in force: the chain starts over on
    # the session as it is, finds it within its threshold, and drops nothing more.
    recorded = of_kind(store, session.id, "compaction_recorded")
    assert [r.compaction_recorded.fallback_stage for r in recorded] == ["hard-drop"]
    assert view(store, session.id).version == fitted.version
