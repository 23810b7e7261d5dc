"""The audit of a view: every raw entry against what the model saw, and turns verified."""

from __future__ import annotations

import json

from click.testing import CliRunner

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.cli import cli
from services.grpc.server import RunningServer
from tests.e2e.test_grpc_api import Stub, append, text, tool_call, tool_result, user


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
