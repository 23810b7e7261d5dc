"""Undoing compactions and cold views loaded from the cut, end to end over SQLite and
PostgreSQL: a real server on loopback, and a fresh one on the same database."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import structlog
from click.testing import CliRunner

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.cli import cli
from services.grpc.server import RunningServer
from tests.conftest import start_server
from tests.support.grpc_calls import Stub, append, new_session, refused, text, user


@pytest.fixture
def cold(database_url: str, server: RunningServer) -> Iterator[Stub]:
    """A second server on the same database: its first read of a session is cold."""
    from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc

    del server  # started first: it creates the tables
    fresh = start_server(database_url)
    with grpc.insecure_channel(f"127.0.0.1:{fresh.port}") as channel:
        yield pb_grpc.SessionStoreStub(channel)
    fresh.stop(0)


def _log(store: Stub, session_id: str, version: int = 0) -> pb.DurableLog:
    request = pb.GetViewRequest(session_id=session_id)
    if version:
        request.version = version
    return store.GetDurableLog(request)


def _ids(log: pb.DurableLog) -> list[str]:
    return [e.id for e in log.entries]


def _turns(store: Stub, session_id: str, first: int, count: int) -> None:
    for i in range(first, first + count):
        append(store, session_id, user(f"question {i}", id=f"q{i}"))
        append(store, session_id, text(pb.ROLE_ASSISTANT, f"answer {i}", id=f"a{i}"))


def _compact(store: Stub, session_id: str, first_kept: str, summary: str) -> int:
    return store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session_id, summary=summary, first_kept_entry_id=first_kept
        )
    ).version


def test_compact_twice_undo_twice(store: Stub, cold: Stub) -> None:
    session = new_session(store, model="gpt-4o").id
    append(store, session, text(pb.ROLE_SYSTEM, "be brief", id="rules"))
    _turns(store, session, 0, 5)
    everything = ["rules", *(x for i in range(5) for x in (f"q{i}", f"a{i}"))]
    first = _compact(store, session, "q2", "first")
    _turns(store, session, 5, 3)
    everything += [x for i in range(5, 8) for x in (f"q{i}", f"a{i}")]
    second = _compact(store, session, "q6", "second")
    after_second = _ids(_log(store, session))
    assert after_second == everything[everything.index("q6") :]

    undone = store.UndoCompaction(
        pb.UndoCompactionRequest(
            session_id=session, reason="summary lost the plan", requested_by="ana"
        )
    )
    assert undone.undone.compaction_version == second
    assert undone.undone.restored_compaction_version == first
    once = undone.version
    log = _log(store, session)
    assert _ids(log) == everything[everything.index("q2") :]
    assert log.compaction.version == first
    assert [e.id for e in log.pinned] == ["rules"]

    twice = store.UndoCompaction(
        pb.UndoCompactionRequest(session_id=session, expected_version=once)
    ).version
    log = _log(store, session)
    assert _ids(log) == everything
    assert not log.HasField("compaction")
    refused(
        lambda: store.UndoCompaction(pb.UndoCompactionRequest(session_id=session)),
        grpc.StatusCode.FAILED_PRECONDITION,
    )

    # Replay: each version shows the log it had, on this server and a cold one.
    expected = {
        first: everything[everything.index("q2") : everything.index("q5")],
        second: after_second,
        once: everything[everything.index("q2") :],
        twice: everything,
    }
    for version, ids in expected.items():
        assert _ids(_log(store, session, version)) == ids
        assert _ids(_log(cold, session, version)) == ids
    # The undo is an auditable event: which compaction, who, why.
    events = list(store.ReadEvents(pb.ReadEventsRequest(session_id=session, after_version=0)))
    undos = [e.compaction_undone for e in events if e.WhichOneof("event") == "compaction_undone"]
    assert [(u.compaction_version, u.requested_by, u.reason) for u in undos] == [
        (second, "ana", "summary lost the plan"),
        (first, "", ""),
    ]
    # Compacting again re-applies a cut; the estimate follows the log.
    _compact(store, session, "q6", "again")
    assert _ids(_log(store, session)) == after_second
    assert _ids(_log(cold, session)) == after_second


def test_undo_names_a_compaction_in_force(store: Stub) -> None:
    session = new_session(store, model="gpt-4o").id
    _turns(store, session, 0, 4)
    first = _compact(store, session, "q1", "first")
    _turns(store, session, 4, 2)
    second = _compact(store, session, "q4", "second")
    message = refused(
        lambda: store.UndoCompaction(
            pb.UndoCompactionRequest(session_id=session, compaction_version=second + 1)
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert f"versions {first}, {second}" in message
    # Undoing the first takes the later one with it.
    store.UndoCompaction(pb.UndoCompactionRequest(session_id=session, compaction_version=first))
    assert _ids(_log(store, session))[0] == "q0"
    before = store.GetSession(pb.GetSessionRequest(session_id=session)).version
    refused(
        lambda: store.UndoCompaction(
            pb.UndoCompactionRequest(session_id=session, expected_version=before - 1)
        ),
        grpc.StatusCode.ABORTED,
    )


def test_a_cold_view_from_the_cut_answers_as_the_warm_one(store: Stub, cold: Stub) -> None:
    session = new_session(store, model="gpt-4o").id
    append(store, session, text(pb.ROLE_SYSTEM, "be brief", id="rules"))
    store.SetSystemPrompt(
        pb.SetSystemPromptRequest(session_id=session, system_prompt=pb.SystemPrompt(text="hi"))
    )
    _turns(store, session, 0, 40)
    compacted = _compact(store, session, "q37", "long ago")
    _turns(store, session, 40, 2)
    warm = store.GetPromptView(pb.GetPromptViewRequest(session_id=session))
    view = cold.GetPromptView(pb.GetPromptViewRequest(session_id=session))
    assert (view.version, list(view.messages_json)) == (warm.version, list(warm.messages_json))
    # Compacted-away entries and views before the cut are still there.
    assert cold.GetEntry(pb.GetEntryRequest(session_id=session, entry_id="q3")).id == "q3"
    assert _ids(_log(cold, session, compacted - 1)) == _ids(_log(store, session, compacted - 1))


def test_undo_compaction_command(tmp_path: Path) -> None:
    with structlog.testing.capture_logs():
        running = start_server(f"sqlite:///{tmp_path}/cli.db")
        address = f"127.0.0.1:{running.port}"
        try:
            from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc

            with grpc.insecure_channel(address) as channel:
                store = pb_grpc.SessionStoreStub(channel)
                session = new_session(store, model="gpt-4o").id
                _turns(store, session, 0, 3)
                version = _compact(store, session, "q1", "first")
            runner = CliRunner()
            result = runner.invoke(
                cli,
                ["--address", address, "undo-compaction", session, "--version", str(version)],
            )
            assert result.exit_code == 0, result.output
            assert re.search(
                rf"undid the compaction at version {version} \(version \d+\)", result.stdout
            )
            assert "no compaction is in force; the log keeps every entry" in result.stdout
            events = runner.invoke(cli, ["--address", address, "events", session])
            assert f"compaction #{version}" in events.stdout
            undo = int(re.search(r"\(version (\d+)\)", result.stdout).group(1))  # type: ignore[union-attr]
            redo = runner.invoke(
                cli,
                ["--address", address, "undo-compaction", session, "--undo-version", str(undo)],
            )
            assert redo.exit_code == 0, redo.output
            assert f"took back the undo at version {undo} (version {undo + 1})" in redo.stdout
            assert f"in force again: the compaction at version {version}" in redo.stdout
            events = runner.invoke(cli, ["--address", address, "events", session])
            assert f"undo #{undo} taken back" in events.stdout
            assert f"in force: #{version}" in events.stdout
            audited = runner.invoke(cli, ["--address", address, "audit", "compactions", session])
            assert "undone" in audited.stdout and "redone" in audited.stdout
            shown = runner.invoke(
                cli, ["--address", address, "audit", "compaction", session, str(version)]
            )
            assert "in force" in shown.stdout
            assert f"undone at version {undo}" in shown.stdout
            assert f"redone at version {undo + 1}" in shown.stdout
            both = runner.invoke(
                cli,
                [
                    *("--address", address, "undo-compaction", session),
                    *("--version", "2", "--undo-version", str(undo)),
                ],
            )
            assert both.exit_code != 0 and "not both" in both.output
        finally:
            running.stop(0)


def test_export_leaves_out_undone_compactions(store: Stub) -> None:
    """A pi file cannot take a compaction back: its latest compaction is the one in
    force, and imported again the session has the same log."""
    import json as jsonlib

    from tests.e2e.test_transfer import export, import_bytes

    session = new_session(store, model="gpt-4o").id
    _turns(store, session, 0, 4)
    first = _compact(store, session, "q1", "first")
    _turns(store, session, 4, 2)
    _compact(store, session, "q4", "second")
    store.UndoCompaction(pb.UndoCompactionRequest(session_id=session))
    exported = export(store, session)
    records = [jsonlib.loads(line) for line in exported.decode().splitlines()]
    assert [r["summary"] for r in records if r["type"] == "compaction"] == ["first"]
    (again,) = import_bytes(store, exported, "pi", session_id=f"{session}-again").sessions
    assert _ids(_log(store, again.session.id)) == _ids(_log(store, session))
    assert _log(store, session).compaction.version == first


def _undo(store: Stub, session_id: str, **fields: object) -> pb.UndoCompactionResponse:
    return store.UndoCompaction(pb.UndoCompactionRequest(session_id=session_id, **fields))  # type: ignore[arg-type]


def test_undo_and_redo_chains_across_compactions(store: Stub, cold: Stub) -> None:
    """Undos and redos of several compactions, newest first: each redo brings back
    exactly what its undo took (same summary, same cut), the audit lists every
    step, and a cold server replays each version as the warm one."""
    session = new_session(store, model="gpt-4o").id
    append(store, session, text(pb.ROLE_SYSTEM, "be brief", id="rules"))
    _turns(store, session, 0, 4)
    first = _compact(store, session, "q2", "first")
    _turns(store, session, 4, 3)
    second = _compact(store, session, "q5", "second")
    compacted = store.GetPromptView(pb.GetPromptViewRequest(session_id=session))
    compacted_ids = _ids(_log(store, session))

    undo_second = _undo(store, session, reason="lost the plan", requested_by="ana")
    assert undo_second.undone.compaction_version == second and undo_second.position > 0
    undo_first = _undo(store, session)
    assert undo_first.undone.compaction_version == first
    assert _ids(_log(store, session))[0] == "rules" and len(_ids(_log(store, session))) == 15

    # Newest first: the first undo's cut is gone until the second is taken back.
    message = refused(
        lambda: _undo(store, session, undo_version=undo_second.version),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert f"at versions {undo_first.version}" in message
    redo_first = _undo(store, session, undo_version=undo_first.version, requested_by="bo")
    assert list(redo_first.redone.compaction_versions) == [first]
    assert redo_first.redone.undo_version == undo_first.version
    assert redo_first.position > undo_first.position
    log = _log(store, session)
    assert (log.compaction.version, log.compaction.summary) == (first, "first")
    assert _ids(log)[0] == "q2"
    refused(
        lambda: _undo(store, session, undo_version=undo_first.version),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    redo_second = _undo(store, session, undo_version=undo_second.version, reason="it was fine")
    assert list(redo_second.redone.compaction_versions) == [second]
    # Exactly what the model saw before the undos, prompt hash included.
    redone = store.GetPromptView(pb.GetPromptViewRequest(session_id=session))
    assert list(redone.messages_json) == list(compacted.messages_json)
    assert redone.request_hash == compacted.request_hash
    assert _ids(_log(store, session)) == compacted_ids
    assert _log(store, session).compaction.summary == "second"

    # A redo is taken back by undoing again; that undo is redone in turn.
    _turns(store, session, 7, 1)
    undo_again = _undo(store, session)
    assert undo_again.undone.compaction_version == second
    redo_again = _undo(store, session, undo_version=undo_again.version)
    assert _ids(_log(store, session)) == [*compacted_ids, "q7", "a7"]
    after = store.GetSession(pb.GetSessionRequest(session_id=session))
    assert after.compaction_count == 2  # redos re-apply; they record no new compaction

    # Replay: every version, on this server and a fresh one loading from the cut.
    for version in range(1, redo_again.version + 1):
        assert _ids(_log(cold, session, version)) == _ids(_log(store, session, version))
    cold_view = cold.GetPromptView(pb.GetPromptViewRequest(session_id=session))
    warm_view = store.GetPromptView(pb.GetPromptViewRequest(session_id=session))
    assert list(cold_view.messages_json) == list(warm_view.messages_json)

    # The audit: undos and redos are rows of their own, and each compaction says
    # whether it is in force and what took it back or re-applied it.
    listed = store.ListCompactions(
        pb.ListCompactionsRequest(session_id=session, min_position=redo_again.position)
    ).compactions
    assert [(r.version, r.outcome, r.trigger) for r in listed] == [
        (first, "ok", "manual"),
        (second, "ok", "manual"),
        (undo_second.version, "undone", "undo"),
        (undo_first.version, "undone", "undo"),
        (redo_first.version, "redone", "redo"),
        (redo_second.version, "redone", "redo"),
        (undo_again.version, "undone", "undo"),
        (redo_again.version, "redone", "redo"),
    ]
    by_version = {r.version: r for r in listed}
    undo_row = by_version[undo_second.version]
    assert (undo_row.compaction_version, undo_row.restored_compaction_version) == (second, first)
    assert (undo_row.requested_by, undo_row.reason) == ("ana", "lost the plan")
    assert undo_row.first_kept_position == undo_second.undone.first_kept_position
    redo_row = by_version[redo_first.version]
    assert (redo_row.undo_version, redo_row.compaction_version) == (undo_first.version, first)
    assert (redo_row.requested_by, redo_row.tokens_after) == ("bo", redo_first.redone.prompt_tokens)
    redone_only = store.ListCompactions(
        pb.ListCompactionsRequest(session_id=session, outcome="redone")
    ).compactions
    assert [r.version for r in redone_only] == [
        redo_first.version,
        redo_second.version,
        redo_again.version,
    ]
    detail = store.GetCompaction(pb.GetCompactionRequest(session_id=session, version=second))
    assert detail.in_force and detail.compaction.summary == "second"
    assert [(c.version, c.outcome) for c in detail.changes] == [
        (undo_second.version, "undone"),
        (redo_second.version, "redone"),
        (undo_again.version, "undone"),
        (redo_again.version, "redone"),
    ]
    detail = store.GetCompaction(pb.GetCompactionRequest(session_id=session, version=first))
    assert detail.in_force
    assert [c.version for c in detail.changes] == [undo_first.version, redo_first.version]
    # ReadEvents carries the redo with who and why.
    events = list(store.ReadEvents(pb.ReadEventsRequest(session_id=session)))
    redos = [e.compaction_redone for e in events if e.WhichOneof("event") == "compaction_redone"]
    assert [(r.undo_version, r.reason) for r in redos] == [
        (undo_first.version, ""),
        (undo_second.version, "it was fine"),
        (undo_again.version, ""),
    ]


def test_redo_refusals(store: Stub) -> None:
    session = new_session(store, model="gpt-4o").id
    _turns(store, session, 0, 3)
    compacted = _compact(store, session, "q1", "first")
    message = refused(
        lambda: _undo(store, session, undo_version=compacted),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert f"no undo of a compaction was recorded at version {compacted}" in message
    refused(
        lambda: _undo(store, session, undo_version=2, compaction_version=compacted),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    refused(lambda: _undo(store, session, undo_version=-1), grpc.StatusCode.INVALID_ARGUMENT)
    undone = _undo(store, session)
    refused(
        lambda: _undo(
            store, session, undo_version=undone.version, expected_version=undone.version - 1
        ),
        grpc.StatusCode.ABORTED,
    )
    # A compaction recorded since the undo is taken back first.
    _turns(store, session, 3, 1)
    _compact(store, session, "q2", "other")
    refused(
        lambda: _undo(store, session, undo_version=undone.version),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    _undo(store, session)
    assert _undo(store, session, undo_version=undone.version).redone.compaction_versions == [
        compacted
    ]
