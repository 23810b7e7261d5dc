"""Probing another tenant's session ids learns nothing: they answer as free ids do.

Tenant B sends every RPC that takes a session id twice, once naming a
session tenant A has and once an id nobody uses, and must get the same
answer, word for word but for the id. Creating a session (CreateSession, a
fork, an import) under A's id succeeds, in B's own namespace, and leaves A's
session as it was. The RPCs are taken from the proto: one that takes a
session id and has no probe fails the test.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import grpc
from google.protobuf.message import Message

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.app.authentication import new_token, token_entry_toml
from services.app.tenancy import Role
from services.cli.client import Security
from tests.conftest import start_server
from tests.e2e.test_quarantine import raw_sql
from tests.e2e.test_tenancy import SERVICE, World, _state, world
from tests.e2e.test_transfer import export, import_bytes
from tests.support.channels import open_channel
from tests.support.grpc_calls import Stub, user

__all__ = ["world"]  # the fixture

Probe = Callable[[Stub, str], object]
FILE = b'[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]'

# Calls that read or change a session: B's answer for A's id and for a free one.
PROBES: dict[str, Probe] = {
    "GetSession": lambda s, i: s.GetSession(pb.GetSessionRequest(session_id=i)),
    "UpdateSettings": lambda s, i: s.UpdateSettings(
        pb.UpdateSettingsRequest(session_id=i, settings=pb.SessionSettings(title="B's"))
    ),
    "AppendEntries": lambda s, i: s.AppendEntries(
        pb.AppendEntriesRequest(session_id=i, entries=[user("B was here")])
    ),
    "RecordCompaction": lambda s, i: s.RecordCompaction(
        pb.RecordCompactionRequest(session_id=i, summary="B's", first_kept_entry_id="e")
    ),
    "RecordPrune": lambda s, i: s.RecordPrune(
        pb.RecordPruneRequest(
            session_id=i,
            entries=[pb.PrunedEntry(entry_id="e", action=pb.PRUNE_ACTION_HARD_CLEAR)],
        )
    ),
    "UndoCompaction": lambda s, i: s.UndoCompaction(pb.UndoCompactionRequest(session_id=i)),
    "GetDurableLog": lambda s, i: s.GetDurableLog(pb.GetViewRequest(session_id=i)),
    "GetPromptView": lambda s, i: s.GetPromptView(pb.GetPromptViewRequest(session_id=i)),
    "GetEntry": lambda s, i: s.GetEntry(pb.GetEntryRequest(session_id=i, entry_id="e")),
    "ReadEvents": lambda s, i: list(s.ReadEvents(pb.ReadEventsRequest(session_id=i))),
    "SetSystemPrompt": lambda s, i: s.SetSystemPrompt(
        pb.SetSystemPromptRequest(session_id=i, system_prompt=pb.SystemPrompt(text="B"))
    ),
    "Compact": lambda s, i: s.Compact(pb.CompactRequest(session_id=i, force=True)),
    "ReportOverflow": lambda s, i: s.ReportOverflow(
        pb.ReportOverflowRequest(session_id=i, error_text="context_length_exceeded")
    ),
    "GetContextReport": lambda s, i: s.GetContextReport(pb.GetContextReportRequest(session_id=i)),
    "AbandonToolCalls": lambda s, i: s.AbandonToolCalls(pb.AbandonToolCallsRequest(session_id=i)),
    "ForkSession": lambda s, i: s.ForkSession(pb.ForkSessionRequest(session_id=i)),
    "ExportSession": lambda s, i: export(s, i),
    "ListCompactions": lambda s, i: s.ListCompactions(pb.ListCompactionsRequest(session_id=i)),
    "GetCompaction": lambda s, i: s.GetCompaction(pb.GetCompactionRequest(session_id=i, version=9)),
    "ListPrunes": lambda s, i: s.ListPrunes(pb.ListPrunesRequest(session_id=i)),
    "Recall": lambda s, i: s.Recall(pb.RecallRequest(session_id=i, query="secret")),
    "AuditView": lambda s, i: s.AuditView(pb.AuditViewRequest(session_id=i)),
    "EraseSession": lambda s, i: s.EraseSession(pb.EraseSessionRequest(session_id=i)),
    "EraseEntries": lambda s, i: s.EraseEntries(
        pb.EraseEntriesRequest(session_id=i, entry_ids=["e"])
    ),
    "RetractEntry": lambda s, i: s.RetractEntry(pb.RetractEntryRequest(session_id=i, entry_id="e")),
    "ClearSession": lambda s, i: s.ClearSession(pb.ClearSessionRequest(session_id=i)),
}
# Calls that make a session under the id: B's own, wherever A has one.
CREATES: dict[str, Probe] = {
    "CreateSession": lambda s, i: s.CreateSession(pb.CreateSessionRequest(session_id=i)),
    "ForkSession": lambda s, i: s.ForkSession(
        pb.ForkSessionRequest(session_id="b-1", new_session_id=i)
    ),
    "ImportSession": lambda s, i: import_bytes(s, FILE, "openai", session_id=i),
}


def _names_a_session(descriptor: object, depth: int = 0) -> bool:
    fields = descriptor.fields  # type: ignore[attr-defined]
    return any(
        f.name in ("session_id", "new_session_id")
        or (f.message_type is not None and depth < 1 and _names_a_session(f.message_type, 1))
        for f in fields
    )


def test_every_rpc_that_takes_a_session_id_is_probed() -> None:
    taking = {m.name for m in SERVICE.methods if _names_a_session(m.input_type)}
    assert taking == set(PROBES) | set(CREATES)


def answer(call: Callable[[], object], session_id: str) -> tuple[str, str]:
    """The status and message (the id replaced), or what an answer holds."""
    try:
        response = call()
    except grpc.RpcError as error:
        details = str(error.details()).replace(session_id, "<id>")  # type: ignore[attr-defined]
        return error.code().name, details  # type: ignore[attr-defined]
    if isinstance(response, Message):
        listed = [f.name for f, v in response.ListFields() if f.is_repeated and v]
        return "OK", f"lists {listed}"
    return "OK", f"{len(response)} items"  # type: ignore[arg-type]


def test_another_tenants_ids_answer_as_free_ids_do(world: World) -> None:
    alice, bob = world.stubs["alice"], world.stubs["bob"]
    before = _state(alice, "a-1")
    for method, probe in PROBES.items():
        theirs = answer(lambda probe=probe: probe(bob, "a-1"), "a-1")
        free = answer(lambda probe=probe: probe(bob, "zz-9"), "zz-9")
        assert theirs == free, f"{method}: {theirs} against a free id's {free}"
        assert theirs[0] != "OK" or method.startswith("List"), f"{method}: {theirs}"
    assert _state(alice, "a-1") == before
    for n, (method, create) in enumerate(CREATES.items(), start=2):
        theirs_id, free_id = f"a-{n}", f"free-{n}"
        before = _state(alice, theirs_id)
        theirs = answer(lambda create=create, i=theirs_id: create(bob, i), theirs_id)
        free = answer(lambda create=create, i=free_id: create(bob, i), free_id)
        assert theirs == free and theirs[0] == "OK", f"{method}: {theirs} against {free}"
        assert _state(alice, theirs_id) == before, f"{method} changed A's {theirs_id}"
        mine = bob.GetSession(pb.GetSessionRequest(session_id=theirs_id))
        assert mine.id == theirs_id and mine.settings.title != "A's", method


def test_sessions_of_tenants_stored_before_ids_were_scoped_keep_their_ids(
    database_url: str, tmp_path: Path
) -> None:
    """A database of the release before: tenant a's session "legacy-1" is stored
    under its bare id. After the upgrade a still reads and writes it as
    "legacy-1"; for b and for the default tenant that id is free, as any other;
    the default tenant's own sessions keep their ids."""
    server = start_server(database_url, projections="off")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            for session_id in ("legacy-1", "plain-1"):
                store.CreateSession(pb.CreateSessionRequest(session_id=session_id))
                store.AppendEntries(
                    pb.AppendEntriesRequest(session_id=session_id, entries=[user("before")])
                )
    finally:
        server.stop(0)
    # What the release before stored for a session tenant a created, and no list
    # of such sessions yet (this release makes it).
    ((state,),) = raw_sql(
        database_url,
        "SELECT state FROM {events} WHERE originator_id = %s AND originator_version = 1",
        ("legacy-1",),
    )
    raw_sql(
        database_url,
        "UPDATE {events} SET state = %s WHERE originator_id = %s AND originator_version = 1",
        (bytes(state).replace(b'"tenant":"default"', b'"tenant":"a"'), "legacy-1"),
    )
    raw_sql(database_url, "DROP TABLE {legacy_tenants}")

    tokens = {"alice": new_token(), "bob": new_token(), "dee": new_token()}
    path = tmp_path / "tokens.toml"
    path.write_text(
        token_entry_toml("alice", "a", Role.TENANT, tokens["alice"])
        + token_entry_toml("bob", "b", Role.TENANT, tokens["bob"])
        + token_entry_toml("dee", "default", Role.TENANT, tokens["dee"])
    )
    server = start_server(database_url, tokens_file=path)
    address = f"127.0.0.1:{server.port}"
    try:
        with contextlib.ExitStack() as stack:
            alice, bob, dee = (
                Stub(stack.enter_context(open_channel(address, Security(tokens[name]))))
                for name in ("alice", "bob", "dee")
            )
            assert alice.GetSession(pb.GetSessionRequest(session_id="legacy-1")).version == 2
            assert [s.id for s in alice.ListSessions(pb.ListSessionsRequest()).sessions] == [
                "legacy-1"
            ]
            alice.AppendEntries(
                pb.AppendEntriesRequest(session_id="legacy-1", entries=[user("after")])
            )
            assert dee.GetSession(pb.GetSessionRequest(session_id="plain-1")).version == 2
            for other in (bob, dee):
                theirs = answer(
                    lambda other=other: other.GetSession(
                        pb.GetSessionRequest(session_id="legacy-1")
                    ),
                    "legacy-1",
                )
                free = answer(
                    lambda other=other: other.GetSession(pb.GetSessionRequest(session_id="f-9")),
                    "f-9",
                )
                assert theirs == free == ("NOT_FOUND", "no session with id '<id>'")
                created = other.CreateSession(pb.CreateSessionRequest(session_id="legacy-1"))
                assert (created.id, created.version) == ("legacy-1", 1)
            assert alice.GetSession(pb.GetSessionRequest(session_id="legacy-1")).version == 3
    finally:
        server.stop(0)
