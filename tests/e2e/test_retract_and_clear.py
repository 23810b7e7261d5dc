"""Retracting the latest entry and clearing a session: the views leave them out, the
history keeps them (events, replay, entries by id, the audit), on SQLite and PostgreSQL,
and a server that starts afresh on the same store folds them the same way."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from sessionstore_client import (
    Client,
    Entry,
    EntryRetracted,
    Role,
    SessionCleared,
    SystemPrompt,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from sessionstore_client.errors import FailedPrecondition, VersionConflict

from services.grpc.server import RunningServer
from tests.conftest import start_server


@pytest.fixture
def client(server: RunningServer) -> Iterator[Client]:
    with Client(f"127.0.0.1:{server.port}") as client:
        yield client


def text(role: Role, words: str) -> Entry:
    return Entry(role=role, content=[TextBlock(words)])


def ids(client: Client, session_id: str, version: int | None = None) -> list[str]:
    return [e.id for e in client.get_durable_log(session_id, version=version).entries]


def turn_with_a_tool(client: Client, session_id: str) -> int:
    return client.append_entries(
        session_id,
        entries=[
            Entry(id="q", role=Role.USER, content=[TextBlock("list the files")]),
            Entry(id="call", role=Role.ASSISTANT, content=[ToolCallBlock("c1", "ls", "{}")]),
            Entry(id="result", role=Role.TOOL, content=[ToolResultBlock("c1", "a.py b.py")]),
        ],
    ).version


def test_a_retraction_takes_the_latest_entry_out_of_the_views_only(client: Client) -> None:
    session = client.create_session()
    appended = turn_with_a_tool(client, session.id)

    retracted = client.retract_entry(session.id, reason="tool output was wrong")
    assert retracted.entry is not None and retracted.entry.id == "result"
    assert retracted.entry.version == appended
    assert ids(client, session.id) == ["q", "call"]
    assert client.get_session(session.id).open_tool_call_ids == ["c1"]  # open again
    # The store keeps it: by id, in the replay before the retraction, in the events.
    assert client.get_entry(session.id, entry_id="result").content[0] == ToolResultBlock(
        "c1", "a.py b.py"
    )
    assert ids(client, session.id, appended) == ["q", "call", "result"]
    events = [e.event for e in client.read_events(session.id)]
    assert events[-1] == EntryRetracted("result", "tool output was wrong")

    # The call goes with its entry; the session takes new turns.
    assert client.retract_entry(session.id, entry_id="call").entry is not None
    assert client.get_session(session.id).open_tool_call_ids == []
    client.append_entries(session.id, entries=[text(Role.ASSISTANT, "no tools needed")])
    messages = json.loads(client.get_prompt_view(session.id).messages_json)
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[-1]["content"] == "no tools needed"
    statuses = {e.entry_id: e.status for e in client.audit_view(session.id).entries}
    assert statuses["result"] == statuses["call"] == "retracted"
    assert statuses["q"] == "shown"


def test_only_the_latest_entry_can_be_retracted(client: Client) -> None:
    session = client.create_session()
    turn_with_a_tool(client, session.id)
    with pytest.raises(FailedPrecondition, match="not the latest") as not_latest:
        client.retract_entry(session.id, entry_id="q")
    assert not_latest.value.reason == "not_latest_entry"
    empty = client.create_session()
    with pytest.raises(FailedPrecondition, match="no entry in its log") as nothing:
        client.retract_entry(empty.id)
    assert nothing.value.reason == "nothing_to_retract"


def test_a_clear_empties_the_views_and_keeps_the_history(client: Client) -> None:
    session = client.create_session()
    client.set_system_prompt(session.id, system_prompt=SystemPrompt(text="Be brief."))
    turn_with_a_tool(client, session.id)
    answer = Entry(id="answer", role=Role.ASSISTANT, content=[TextBlock("two files")])
    client.append_entries(session.id, entries=[answer])
    client.record_compaction(session.id, summary="Listed the files.", first_kept_entry_id="answer")
    before = client.get_session(session.id).version

    cleared = client.clear_session(session.id, reason="new task")
    assert cleared.entries_cleared >= 1
    log = client.get_durable_log(session.id)
    assert log.entries == [] and log.compaction is None
    view = client.get_prompt_view(session.id)
    assert json.loads(view.messages_json) == [{"role": "system", "content": "Be brief."}]
    assert client.get_durable_log(session.id, version=before).compaction is not None
    assert isinstance([e.event for e in client.read_events(session.id)][-1], SessionCleared)
    statuses = {e.entry_id: e.status for e in client.audit_view(session.id).entries}
    assert set(statuses.values()) == {"cleared"}

    client.append_entries(session.id, entries=[text(Role.USER, "start over")])
    assert [e.parent_id for e in client.get_durable_log(session.id).entries] == [""]
    assert json.loads(client.get_prompt_view(session.id).messages_json)[1:] == [
        {"role": "user", "content": "start over"}
    ]
    with pytest.raises(VersionConflict):
        client.clear_session(session.id, expected_version=before)


def test_a_fresh_server_and_a_fork_fold_them_the_same_way(
    server: RunningServer, database_url: str, client: Client
) -> None:
    session = client.create_session()
    turn_with_a_tool(client, session.id)
    client.retract_entry(session.id)
    client.clear_session(session.id)
    client.append_entries(session.id, entries=[text(Role.USER, "again")])
    client.retract_entry(session.id)
    client.append_entries(session.id, entries=[text(Role.USER, "once more")])
    views = [client.get_prompt_view(session.id, version=v).messages_json for v in range(1, 8)]
    fork = client.fork_session(session.id)
    assert client.get_prompt_view(fork.id).messages_json == views[-1]
    other = start_server(database_url)
    try:
        with Client(f"127.0.0.1:{other.port}") as fresh:
            replayed = [
                fresh.get_prompt_view(session.id, version=v).messages_json for v in range(1, 8)
            ]
            assert replayed == views
            assert fresh.get_session(session.id).open_tool_call_ids == []
    finally:
        other.stop(0)


def test_an_export_keeps_a_retracted_entry_as_a_branch_off_the_log(client: Client) -> None:
    session = client.create_session()
    turn_with_a_tool(client, session.id)
    client.retract_entry(session.id)
    client.append_entries(
        session.id,
        entries=[Entry(id="again", role=Role.TOOL, content=[ToolResultBlock("c1", "a.py")])],
    )
    exported = b"".join(c.data for c in client.export_session(session.id))
    imported = client.import_session(exported, format="pi", session_id="reimported")
    main = imported.sessions[0].session
    assert main is not None
    assert ids(client, main.id) == ids(client, session.id) == ["q", "call", "again"]
