"""The audit of a view: every raw entry against what the model saw, and turns verified."""

from __future__ import annotations

import json

import grpc
from click.testing import CliRunner

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.cli import cli
from services.grpc.server import RunningServer
from tests.conftest import start_server
from tests.support.grpc_calls import Stub, append, refused, text, tool_call, tool_result, user


def test_the_audit_says_what_became_of_each_entry_and_proves_what_the_model_saw(
    store: Stub, server: RunningServer
) -> None:
    address = f"127.0.0.1:{server.port}"
    session = store.CreateSession(pb.CreateSessionRequest(settings=pb.SessionSettings()))
    sid = session.id
    (system,) = append(store, sid, text(pb.ROLE_SYSTEM, "Be brief.")).entry_ids
    (first,) = append(store, sid, user("read the log")).entry_ids
    append(store, sid, tool_call("c1", "read", {"path": "build.log"}))
    log = "".join(f"step {i}: compiled module_{i}.c\n" for i in range(3_000))
    (log_result,) = append(store, sid, tool_result("c1", log)).entry_ids
    served = store.GetPromptView(pb.GetPromptViewRequest(session_id=sid))
    answer = text(
        pb.ROLE_ASSISTANT,
        "The log is all x.",
        prompt_ref=pb.PromptRef(
            version=served.version, format=pb.PROMPT_FORMAT_OPENAI, hash=served.request_hash
        ),
    )
    append(store, sid, answer)
    forged = text(
        pb.ROLE_ASSISTANT,
        "I saw something else.",
        prompt_ref=pb.PromptRef(
            version=served.version, format=pb.PROMPT_FORMAT_OPENAI, hash="f" * 64
        ),
    )
    append(store, sid, forged)
    (kept,) = append(store, sid, user("and now?")).entry_ids
    store.RecordCompaction(
        pb.RecordCompactionRequest(session_id=sid, summary="read the log", first_kept_entry_id=kept)
    )

    audited = store.AuditView(pb.AuditViewRequest(session_id=sid))
    status = {e.entry_id: e.status for e in audited.entries}
    assert status[system] == "pinned"
    assert status[first] == "summarised" and status[log_result] == "summarised"
    assert status[kept] == "shown"
    assert [t.verified for t in audited.turns] == [True, False]

    before = store.AuditView(pb.AuditViewRequest(session_id=sid, version=served.version))
    status = {e.entry_id: e.status for e in before.entries}
    assert status[log_result] == "guarded" and status[first] == "shown"

    result = CliRunner().invoke(
        cli, ["--address", address, "audit", "view", sid], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "verified" in result.output and "MISMATCH" in result.output
    as_json = CliRunner().invoke(cli, ["--address", address, "--json", "audit", "view", sid])
    assert json.loads(as_json.stdout)["version"] == audited.version


def _audit_pages(store: Stub, first: pb.AuditViewRequest) -> list[pb.ViewAudit]:
    pages = [store.AuditView(first)]
    while pages[-1].next_page_token:
        token = pages[-1].next_page_token
        pages.append(
            store.AuditView(pb.AuditViewRequest(session_id=first.session_id, page_token=token))
        )
    return pages


def test_an_audit_larger_than_one_message_comes_in_pages(database_url: str) -> None:
    """Appends that each fit a message add up to an audit that fits none: it comes in
    pages of the first page's version, which together list every entry once."""
    server = start_server(database_url, max_message_mb=1, max_entry_bytes=700_000)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = pb_grpc.SessionStoreStub(channel)
            # Compaction off: the audit stays of one version while it is paged.
            settings = pb.SessionSettings(compaction=pb.CompactionPolicy(mode="off"))
            sid = store.CreateSession(pb.CreateSessionRequest(settings=settings)).id
            # Long ids (up to 512 characters are allowed) fill a message with fewer entries.
            appended = [f"{n:05d}-" + "x" * 200 for n in range(6_000)]
            for batch in range(0, len(appended), 2_000):
                ids = appended[batch : batch + 2_000]
                append(store, sid, *[user(f"note {i[:5]}", id=i) for i in ids])
            version = store.GetSession(pb.GetSessionRequest(session_id=sid)).version

            pages = _audit_pages(store, pb.AuditViewRequest(session_id=sid))
            assert len(pages) > 1
            assert all(p.ByteSize() <= 1 << 20 for p in pages)
            assert [e.entry_id for p in pages for e in p.entries] == appended
            assert {p.version for p in pages} == {version}

            # A page size of the caller's; the session moving on changes no later page.
            first = store.AuditView(pb.AuditViewRequest(session_id=sid, page_size=7))
            assert [e.entry_id for e in first.entries] == appended[:7]
            append(store, sid, user("after the first page"))
            second = store.AuditView(
                pb.AuditViewRequest(session_id=sid, page_token=first.next_page_token, page_size=7)
            )
            assert second.version == first.version == version
            assert [e.entry_id for e in second.entries] == appended[7:14]

            message = refused(
                lambda: store.AuditView(pb.AuditViewRequest(session_id=sid, page_size=-1)),
                grpc.StatusCode.INVALID_ARGUMENT,
            )
            assert "page_size -1 is negative" in message
            refused(
                lambda: store.AuditView(pb.AuditViewRequest(session_id=sid, page_token="x.y")),
                grpc.StatusCode.INVALID_ARGUMENT,
            )
            refused(
                lambda: store.AuditView(
                    pb.AuditViewRequest(session_id=sid, page_token=f"{version}.{10**6}")
                ),
                grpc.StatusCode.INVALID_ARGUMENT,
            )

            # The CLI joins the pages into one audit.
            address = f"127.0.0.1:{server.port}"
            as_json = CliRunner().invoke(
                cli,
                ["--address", address, "--json", "audit", "view", sid, "--version", str(version)],
            )
            assert as_json.exit_code == 0, as_json.output
            shown = json.loads(as_json.stdout)
            assert [e["entryId"] for e in shown["entries"]] == appended
            assert shown["nextPageToken"] == ""
    finally:
        server.stop(0)
