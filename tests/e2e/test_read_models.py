"""The SQL read models through the gRPC API, on SQLite and PostgreSQL:
the catalog's filters and paging, the audits against the receipts, a
projection stopped and restarted (or killed) mid-stream, rebuilds from zero,
and read-your-writes across two servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from click.testing import CliRunner
from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy import select

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.adapters import read_model_tables as t
from services.cli import cli
from services.grpc.server import RunningServer
from services.readmodels import ReadModels
from services.readmodels.admin import rebuild_read_model
from tests.conftest import start_server
from tests.support.grpc_calls import three_turns, user

Stub = pb_grpc.SessionStoreStub
TABLES = {
    "catalog": [t.catalog, t.catalog_labels],
    "compactions": [t.compactions],
    "prunes": [t.prunes],
}


def _models(server: RunningServer) -> ReadModels:
    assert server.app.read_models is not None
    return server.app.read_models


def dump(models: ReadModels) -> dict[str, list[tuple[Any, ...]]]:
    """Every read model's rows, in primary-key order."""
    found = {}
    with models.database.reader.connect() as connection:
        for table in (t.catalog, t.catalog_labels, t.compactions, t.prunes):
            query = select(table).order_by(*table.primary_key.columns)
            found[table.name] = [tuple(row) for row in connection.execute(query)]
    return found


def _caught_up(models: ReadModels) -> None:
    models.wait_for(["catalog", "compactions", "prunes"], 0, time.monotonic() + 30)


def _ids(response: pb.ListSessionsResponse) -> list[str]:
    return [s.id for s in response.sessions]


def _history(store: Stub, session_id: str) -> None:
    """Entries, a compaction, a prune and a settings change."""
    ids = three_turns(store, session_id)
    store.RecordPrune(
        pb.RecordPruneRequest(
            session_id=session_id,
            entries=[pb.PrunedEntry(entry_id=ids[2], action=pb.PRUNE_ACTION_HARD_CLEAR)],
            reason="cache-ttl",
        )
    )
    store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session_id,
            summary=f"## Goal\nSummary of {session_id}.",
            first_kept_entry_id=ids[4],
            tokens_before=2_600,
            tokens_after=40,
            reason="threshold",
            summarizer_model="gpt-4o-mini",
        )
    )
    store.UpdateSettings(
        pb.UpdateSettingsRequest(
            session_id=session_id, settings=pb.SessionSettings(title=f"renamed {session_id}")
        )
    )


def test_the_catalog_filters_and_pages_with_a_stable_cursor(store: Stub) -> None:
    for n in range(7):
        store.CreateSession(
            pb.CreateSessionRequest(
                session_id=f"s{n}",
                settings=pb.SessionSettings(
                    title=f"Report {n}" if n % 2 else f"Chat {n}",
                    model="gpt-4o-mini" if n < 3 else "gpt-4o",
                    labels={"team": "blue" if n % 3 == 0 else "red", "env": "prod"},
                ),
            )
        )
    middle = Timestamp()
    middle.GetCurrentTime()
    time.sleep(0.01)
    store.AppendEntries(pb.AppendEntriesRequest(session_id="s1", entries=[user("late")]))

    assert _ids(store.ListSessions(pb.ListSessionsRequest(labels={"team": "blue"}))) == [
        "s0",
        "s3",
        "s6",
    ]
    both = pb.ListSessionsRequest(labels={"team": "blue", "env": "prod"}, model="gpt-4o")
    assert _ids(store.ListSessions(both)) == ["s3", "s6"]
    assert _ids(store.ListSessions(pb.ListSessionsRequest(model="gpt-4o-mini"))) == [
        "s0",
        "s1",
        "s2",
    ]
    assert _ids(store.ListSessions(pb.ListSessionsRequest(title_contains="REPORT"))) == [
        "s1",
        "s3",
        "s5",
    ]
    assert _ids(store.ListSessions(pb.ListSessionsRequest(updated_after=middle))) == ["s1"]
    assert "s1" not in _ids(store.ListSessions(pb.ListSessionsRequest(updated_before=middle)))
    latest = store.ListSessions(pb.ListSessionsRequest(order_by="updated", page_size=2))
    assert _ids(latest) == ["s1", "s6"]

    # Pages: a session created between two pages comes on a later page, once.
    seen: list[str] = []
    token = ""
    while True:
        page = store.ListSessions(pb.ListSessionsRequest(page_size=3, page_token=token))
        seen += _ids(page)
        if len(seen) == 3:
            store.CreateSession(pb.CreateSessionRequest(session_id="s7"))
        token = page.next_page_token
        if not token:
            break
    assert seen == [f"s{n}" for n in range(8)]
    with pytest.raises(grpc.RpcError) as refused:
        store.ListSessions(pb.ListSessionsRequest(page_token="not-a-token"))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_the_audits_match_the_receipts(store: Stub, session: pb.Session) -> None:
    ids = three_turns(store, session.id)
    pruned = store.RecordPrune(
        pb.RecordPruneRequest(
            session_id=session.id,
            entries=[
                pb.PrunedEntry(
                    entry_id=ids[2], action=pb.PRUNE_ACTION_SOFT_TRIM, head_chars=100, tail_chars=50
                )
            ],
            reason="cache-ttl",
        )
    )
    recorded = store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session.id,
            summary="## Goal\nRead files.",
            first_kept_entry_id=ids[4],
            tokens_before=2_600,
            tokens_after=40,
            reason="threshold",
            summarizer_model="gpt-4o-mini",
        )
    )
    assert recorded.position > pruned.position > 0

    listed = store.ListCompactions(
        pb.ListCompactionsRequest(session_id=session.id, min_position=recorded.position)
    )
    (row,) = listed.compactions
    receipt = recorded.compaction
    assert (row.session_id, row.version, row.outcome, row.position) == (
        session.id,
        recorded.version,
        "ok",
        recorded.position,
    )
    for name in (
        "first_kept_entry_id",
        "first_covered_entry_id",
        "last_covered_entry_id",
        "entries_covered",
        "tokens_before",
        "tokens_after",
        "tokens_before_source",
        "tokens_after_source",
        "summary_tokens",
        "summarizer_model",
        "prompt_hash",
        "chunks",
        "fallback_stage",
        "attempt",
        "duration_ms",
        "engine",
        "instructions",
    ):
        assert getattr(row, name) == getattr(receipt, name), name
    assert row.trigger == receipt.reason == "threshold"
    assert row.timestamp == receipt.timestamp
    for request in (
        pb.ListCompactionsRequest(trigger="manual"),
        pb.ListCompactionsRequest(outcome="failed"),
        pb.ListCompactionsRequest(model="other"),
        pb.ListCompactionsRequest(since=receipt.timestamp, session_id="elsewhere"),
    ):
        assert not store.ListCompactions(request).compactions
    assert store.ListCompactions(pb.ListCompactionsRequest(since=receipt.timestamp)).compactions

    detail = store.GetCompaction(
        pb.GetCompactionRequest(session_id=session.id, version=recorded.version)
    )
    assert detail.compaction.summary == "## Goal\nRead files."
    assert [e.id for e in detail.replaced_entries] == ids[:4]
    assert detail.record == row

    (prune,) = store.ListPrunes(pb.ListPrunesRequest(session_id=session.id)).prunes
    assert (prune.entry_id, prune.action, prune.head_chars, prune.tail_chars) == (
        ids[2],
        pb.PRUNE_ACTION_SOFT_TRIM,
        100,
        50,
    )
    # The tool output as stored (10,000 chars), and what the trim keeps of it.
    assert (prune.chars_before, prune.chars_after) == (10_000, 150)
    assert (prune.reason, prune.position) == ("cache-ttl", pruned.position)
    assert not store.ListPrunes(pb.ListPrunesRequest(action=pb.PRUNE_ACTION_HARD_CLEAR)).prunes


def test_a_failed_compaction_is_audited(server: RunningServer, store: Stub) -> None:
    from domain.compaction import CompactionFailure

    store.CreateSession(pb.CreateSessionRequest(session_id="f"))
    failure = CompactionFailure("threshold", "summarise", "provider timed out", 2, "m", 1500)
    version = server.service.record_compaction_failure("f", failure)
    (row,) = store.ListCompactions(pb.ListCompactionsRequest(outcome="failed")).compactions
    assert (row.session_id, row.version, row.trigger, row.stage, row.reason) == (
        "f",
        version,
        "threshold",
        "summarise",
        "provider timed out",
    )
    assert (row.attempt, row.summarizer_model, row.duration_ms) == (2, "m", 1500)
    detail = store.GetCompaction(pb.GetCompactionRequest(session_id="f", version=version))
    assert not detail.HasField("compaction") and not detail.replaced_entries


def test_a_projection_stopped_mid_stream_ends_as_if_it_never_stopped(
    server: RunningServer, store: Stub
) -> None:
    models = _models(server)
    runner = models.runner
    assert runner is not None
    runner.stop()
    for n in range(4):
        store.CreateSession(pb.CreateSessionRequest(session_id=f"p{n}"))
        _history(store, f"p{n}")
    # Apply part of the stream in small batches, then stop between batches.
    runner.batches.size = 3
    for name in ("catalog", "compactions"):
        models.store.catch_up(name, runner.batches.fetch)
    # One batch of three: positions are the events' notification ids.
    third = models.events.recorder.select_notifications(start=None, limit=3)[-1].id
    assert models.store.position("catalog") == third
    runner.start()
    for n in range(4, 6):
        store.CreateSession(pb.CreateSessionRequest(session_id=f"p{n}"))
        _history(store, f"p{n}")
    runner.stop()
    runner.start()
    _caught_up(models)
    live = dump(models)
    assert len(live["session_catalog"]) == 6 and len(live["compaction_audit"]) == 6
    assert len(live["prune_audit"]) == 6

    for name in TABLES:
        rebuild_read_model(server.service.config.database_url, name)
    assert dump(models) == live


def test_read_your_writes_across_two_servers(database_url: str) -> None:
    first = start_server(database_url, projection_poll_seconds=30)
    second = start_server(database_url, projection_poll_seconds=30)
    # Long polls: the reader sees the writer's events only because it waits for them.
    try:
        with (
            grpc.insecure_channel(f"127.0.0.1:{first.port}") as a,
            grpc.insecure_channel(f"127.0.0.1:{second.port}") as b,
        ):
            writer, reader = Stub(a), Stub(b)
            created = writer.CreateSession(
                pb.CreateSessionRequest(
                    session_id="ryw", settings=pb.SessionSettings(labels={"k": "v"})
                )
            )
            appended = writer.AppendEntries(
                pb.AppendEntriesRequest(session_id="ryw", entries=[user("hello")])
            )
            assert appended.position > created.position > 0
            listed = reader.ListSessions(
                pb.ListSessionsRequest(labels={"k": "v"}, min_position=appended.position),
                timeout=10,
            )
            assert _ids(listed) == ["ryw"]
            assert listed.position >= appended.position
            assert listed.sessions[0].entry_count == 1

            # Both servers project the same tables while both take writes:
            # they take turns, and no event is applied twice or missed.
            def write(store: Stub, prefix: str) -> None:
                for n in range(5):
                    store.CreateSession(pb.CreateSessionRequest(session_id=f"{prefix}{n}"))
                    _history(store, f"{prefix}{n}")

            writers = [
                threading.Thread(target=write, args=(writer, "a")),
                threading.Thread(target=write, args=(reader, "b")),
            ]
            for thread in writers:
                thread.start()
            for thread in writers:
                thread.join()
        _caught_up(_models(first))
        live = dump(_models(first))
        assert len(live["session_catalog"]) == 11 and len(live["prune_audit"]) == 10
        for name in TABLES:
            rebuild_read_model(database_url, name)
        assert dump(_models(first)) == live
    finally:
        first.stop(0)
        second.stop(0)


@pytest.fixture
def worker_server(database_url: str) -> Iterator[RunningServer]:
    running = start_server(database_url, projections="worker")
    yield running
    running.stop(0)


def _worker(database_url: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SESSIONSTORE_DATABASE_URL": database_url}
    return subprocess.Popen(
        [sys.executable, "-m", "services.worker"],
        env=env,
        stderr=subprocess.DEVNULL,
    )


def test_a_killed_worker_loses_nothing(worker_server: RunningServer, database_url: str) -> None:
    models = _models(worker_server)
    assert models.runner is None
    worker = _worker(database_url)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{worker_server.port}") as channel:
            store = Stub(channel)
            for n in range(12):
                store.CreateSession(pb.CreateSessionRequest(session_id=f"w{n}"))
                _history(store, f"w{n}")
                if n == 5:
                    worker.send_signal(signal.SIGKILL)
                    worker.wait()
            worker = _worker(database_url)
            listed = store.ListSessions(pb.ListSessionsRequest(page_size=100), timeout=30)
            assert len(listed.sessions) == 12
        _caught_up(models)
        live = dump(models)
        assert len(live["compaction_audit"]) == 12
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    for name in TABLES:
        rebuild_read_model(database_url, name)
    assert dump(models) == live


def test_every_write_answers_its_position(store: Stub) -> None:
    positions = [store.CreateSession(pb.CreateSessionRequest(session_id="pos")).position]
    appended = store.AppendEntries(
        pb.AppendEntriesRequest(session_id="pos", entries=[user("hi")], idempotency_key="k")
    )
    positions.append(appended.position)
    positions.append(
        store.UpdateSettings(
            pb.UpdateSettingsRequest(session_id="pos", settings=pb.SessionSettings(title="t"))
        ).position
    )
    prompt = pb.SetSystemPromptRequest(session_id="pos", system_prompt=pb.SystemPrompt(text="Be."))
    positions.append(store.SetSystemPrompt(prompt).position)
    positions.append(
        store.ForkSession(pb.ForkSessionRequest(session_id="pos", new_session_id="fork")).position
    )
    assert positions == sorted(set(positions)) and positions[0] > 0
    # A replayed append wrote nothing: it answers a position at or after its first answer.
    replayed = store.AppendEntries(
        pb.AppendEntriesRequest(session_id="pos", entries=[user("hi")], idempotency_key="k")
    )
    assert replayed.replayed and replayed.position >= appended.position
    (fork,) = store.ListSessions(pb.ListSessionsRequest(title_contains="t", model="")).sessions[1:]
    assert fork.id == "fork" and fork.parent_session_id == "pos"


def test_compact_and_import_answer_their_positions(database_url: str) -> None:
    """A client reads its Compact and ImportSession on another server by the
    positions they answer: the compaction's row carries exactly that position."""
    from tests.e2e.test_transfer import import_bytes

    first = start_server(database_url, projection_poll_seconds=30)
    second = start_server(database_url, projection_poll_seconds=30)
    try:
        with (
            grpc.insecure_channel(f"127.0.0.1:{first.port}") as a,
            grpc.insecure_channel(f"127.0.0.1:{second.port}") as b,
        ):
            writer, reader = Stub(a), Stub(b)
            policy = pb.CompactionPolicy(mode="manual", keep_recent_tokens=20)
            writer.CreateSession(
                pb.CreateSessionRequest(
                    session_id="cw", settings=pb.SessionSettings(compaction=policy)
                )
            )
            three_turns(writer, "cw")
            compacted = writer.Compact(pb.CompactRequest(session_id="cw", force=True))
            assert compacted.compacted and compacted.position > 0
            (row,) = reader.ListCompactions(
                pb.ListCompactionsRequest(session_id="cw", min_position=compacted.position),
                timeout=10,
            ).compactions
            assert (row.version, row.position) == (compacted.version, compacted.position)
            # A dry run writes nothing: it answers a position at or after the last write.
            planned = writer.Compact(pb.CompactRequest(session_id="cw", dry_run=True))
            assert not planned.compacted and planned.position >= compacted.position

            messages = [
                {"role": "user", "content": "What is 2 + 2?"},
                {"role": "assistant", "content": "4."},
            ]
            imported = import_bytes(
                writer, json.dumps(messages).encode(), "openai", session_id="im"
            )
            assert imported.position > compacted.position
            (session,) = imported.sessions
            assert session.session.position == imported.position
            listed = reader.ListSessions(
                pb.ListSessionsRequest(page_size=100, min_position=imported.position), timeout=10
            )
            assert [s.entry_count for s in listed.sessions if s.id == "im"] == [2]
            later = writer.AppendEntries(
                pb.AppendEntriesRequest(session_id="im", entries=[user("hi")])
            )
            assert later.position > imported.position
    finally:
        first.stop(0)
        second.stop(0)


def test_a_compaction_whose_replaced_entries_outgrow_a_message_comes_in_pages(
    database_url: str,
) -> None:
    """Raw entries stay whole however the prompt showed them (a guarded tool result), so
    what one summary replaced can outgrow a message: its entries come in pages, each
    with the receipt, and together they are every entry it replaced."""
    server = start_server(database_url, max_message_mb=1, max_entry_bytes=700_000)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = pb_grpc.SessionStoreStub(channel)
            created = store.CreateSession(
                pb.CreateSessionRequest(
                    settings=pb.SessionSettings(context_window_tokens=10_000_000)
                )
            )
            bodies = [f"{n} " + "output line\n" * 33_000 for n in range(4)]  # 400 KB each
            replaced = [
                store.AppendEntries(
                    pb.AppendEntriesRequest(session_id=created.id, entries=[user(body)])
                ).entry_ids[0]
                for body in bodies
            ]
            kept = store.AppendEntries(
                pb.AppendEntriesRequest(session_id=created.id, entries=[user("and now?")])
            ).entry_ids[0]
            recorded = store.RecordCompaction(
                pb.RecordCompactionRequest(
                    session_id=created.id, summary="four logs", first_kept_entry_id=kept
                )
            )
            ask = pb.GetCompactionRequest(
                session_id=created.id, version=recorded.version, min_position=recorded.position
            )

            pages = [store.GetCompaction(ask)]
            while pages[-1].next_page_token:
                ask.page_token = pages[-1].next_page_token
                pages.append(store.GetCompaction(ask))
            assert [len(p.replaced_entries) for p in pages] == [2, 2]
            assert all(p.ByteSize() <= 1 << 20 for p in pages)
            assert [e.id for p in pages for e in p.replaced_entries] == replaced
            assert [e.content[0].text.text for p in pages for e in p.replaced_entries] == bodies
            assert {p.compaction.summary for p in pages} == {"four logs"}
            # The CLI joins the pages.
            address = f"127.0.0.1:{server.port}"
            command = ["--address", address, "--json", "audit", "compaction", created.id]
            shown = CliRunner().invoke(cli, [*command, str(recorded.version)])
            assert shown.exit_code == 0, shown.output
            joined = json.loads(shown.stdout)
            assert [e["id"] for e in joined["replacedEntries"]] == replaced
            assert joined["nextPageToken"] == ""

            ask.page_token, ask.page_size = "", 1
            first = store.GetCompaction(ask)
            assert [e.id for e in first.replaced_entries] == replaced[:1]
            ask.page_token = first.next_page_token
            assert [e.id for e in store.GetCompaction(ask).replaced_entries] == replaced[1:2]
            for token in ("x", f"{recorded.version + 1}.1", f"{recorded.version}.9"):
                ask.page_token = token
                with pytest.raises(grpc.RpcError) as refused:
                    store.GetCompaction(ask)
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            ask.page_token, ask.page_size = "", -1
            with pytest.raises(grpc.RpcError) as refused:
                store.GetCompaction(ask)
            assert "page_size -1 is negative" in str(refused.value.details())
    finally:
        server.stop(0)


def test_a_page_of_sessions_shows_each_as_it_is_stored_on_any_server(database_url: str) -> None:
    """A listing reads its page's sessions together (services.app.access.load_many): from
    their snapshots on a server that holds none of them, from its own copies on one
    that listed them before. Each must show what the session's own read shows, sealed
    titles and erasures included, from the catalog and, without read models, from the
    event store (which lists erased sessions too)."""
    writer = start_server(database_url)
    cataloged = start_server(database_url)
    unindexed = start_server(database_url, projections="off")
    try:
        with (
            grpc.insecure_channel(f"127.0.0.1:{writer.port}") as a,
            grpc.insecure_channel(f"127.0.0.1:{cataloged.port}") as b,
            grpc.insecure_channel(f"127.0.0.1:{unindexed.port}") as c,
        ):
            store, listers = Stub(a), [Stub(b), Stub(c)]
            ids = [f"page{n}" for n in range(6)]
            for n, session_id in enumerate(ids):
                store.CreateSession(
                    pb.CreateSessionRequest(
                        session_id=session_id, settings=pb.SessionSettings(title=f"title {n}")
                    )
                )
            # Past the snapshot interval (100): read from a snapshot and the events after it.
            for turn in range(130):
                store.AppendEntries(
                    pb.AppendEntriesRequest(session_id="page1", entries=[user(f"turn {turn}")])
                )
            store.AppendEntries(pb.AppendEntriesRequest(session_id="page2", entries=[user("x")]))
            store.EraseSession(pb.EraseSessionRequest(session_id="page3", reason="asked"))

            def listed(stub: Stub) -> dict[str, pb.Session]:
                position = store.GetReadModelStatus(pb.GetReadModelStatusRequest()).head
                page = stub.ListSessions(pb.ListSessionsRequest(min_position=position), timeout=10)
                assert not page.next_page_token
                sessions = {s.id: s for s in page.sessions}
                read_alone = {i: store.GetSession(pb.GetSessionRequest(session_id=i)) for i in ids}
                # The catalog leaves erased sessions out; the event store lists them all.
                assert sessions == {i: s for i, s in read_alone.items() if i in sessions}
                assert set(sessions) | {"page2", "page3"} == set(ids)
                return sessions

            # Nothing held: snapshots and the events after them.
            first = [listed(lister) for lister in listers]
            assert first[0]["page1"].entry_count == 130
            assert first[0]["page0"].settings.title == "title 0"
            erased = first[1]["page3"]
            assert erased.HasField("erased") and erased.settings.title != "title 3"

            # Changed since: each lister's copies are caught up, not shown stale.
            store.AppendEntries(pb.AppendEntriesRequest(session_id="page1", entries=[user("y")]))
            store.UpdateSettings(
                pb.UpdateSettingsRequest(
                    session_id="page0", settings=pb.SessionSettings(title="renamed")
                )
            )
            store.EraseSession(pb.EraseSessionRequest(session_id="page2", reason="asked"))
            for lister, before in zip(listers, first, strict=True):
                again = listed(lister)
                assert again["page1"].entry_count == 131
                assert again["page0"].settings.title == "renamed"
                assert again["page4"] == before["page4"]
            assert again["page2"].HasField("erased") and again["page2"].entry_count == 1
    finally:
        for server in (writer, cataloged, unindexed):
            server.stop(0)
