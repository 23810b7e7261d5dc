"""Abandoning tool calls, forking, and importing and exporting real transcripts,
through the gRPC API on SQLite and PostgreSQL.

The fixtures (see /work/shared/fixtures/sessions/SOURCES.md) are real agent
sessions; their contents are only data here: stored, compared and rendered
locally, never sent to a model.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.support.context_engine import events
from tests.support.grpc_calls import (
    Stub,
    append,
    new_session,
    refused,
    tool_call,
    tool_result,
    user,
)
from tests.unit.test_fixtures_import import FIXTURES

PI_SMALL = FIXTURES / "agent-sessions-pi" / "small.jsonl"
PI_BEFORE_COMPACTION = FIXTURES / "pi-mono" / "before-compaction.jsonl"
PI_LARGE = FIXTURES / "pi-mono" / "large-session.jsonl"
OPENCLAW = FIXTURES / "openclaw" / "8555a0a4-0b79-459d-939c-e17cdbbf4fe2.jsonl"
CLAUDE_CODE = FIXTURES / "claude-code-viewer" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
ALL = [PI_SMALL, PI_BEFORE_COMPACTION, PI_LARGE, OPENCLAW, CLAUDE_CODE]
CHUNK = 64 << 10


def import_bytes(
    store: Stub, data: bytes, file_format: str = "auto", **header: Any
) -> pb.ImportSessionResponse:
    def requests() -> Iterator[pb.ImportSessionRequest]:
        yield pb.ImportSessionRequest(header=pb.ImportHeader(format=file_format, **header))
        for start in range(0, len(data), CHUNK):
            yield pb.ImportSessionRequest(chunk=data[start : start + CHUNK])

    response: pb.ImportSessionResponse = store.ImportSession(requests())
    return response


def export(store: Stub, session_id: str, version: int = 0) -> bytes:
    request = pb.ExportSessionRequest(session_id=session_id, version=version)
    return b"".join(chunk.data for chunk in store.ExportSession(request))


def log_at(store: Stub, session_id: str, **as_of: Any) -> pb.DurableLog:
    log: pb.DurableLog = store.GetDurableLog(pb.GetViewRequest(session_id=session_id, **as_of))
    return log


def timestamp(text: str) -> Timestamp:
    moment = Timestamp()
    moment.FromDatetime(datetime.fromisoformat(text))
    return moment


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def expected_records(path: Path) -> list[tuple[str | None, str, str]]:
    """(id or None when the file has none, timestamp, kind) of each record the session
    must hold, in order, read from the file independently of the importer."""
    records = lines(path)
    if path == CLAUDE_CODE:
        merged: list[tuple[str | None, str, str]] = []
        last_message = None
        for record in records:
            message_id = record["message"].get("id") if record["type"] == "assistant" else None
            if message_id and message_id == last_message:
                continue
            last_message = message_id
            merged.append((record["uuid"], record["timestamp"], "entry"))
        return merged
    return [
        (r.get("id"), r["timestamp"], "compaction" if r["type"] == "compaction" else "entry")
        for r in records[1:]
    ]


def stored_records(history: list[pb.SessionEvent]) -> list[tuple[str, str, int]]:
    """(id, time, version) of every entry and compaction, in order; synthetic
    results of abandoned calls aside."""
    found: list[tuple[str, str, int]] = []
    for event in history:
        kind = event.WhichOneof("event")
        if kind == "entries_appended":
            for entry in event.entries_appended.entries:
                found.append((entry.id, entry.timestamp.ToJsonString(), event.version))
        elif kind == "compaction_recorded":
            compaction = event.compaction_recorded
            found.append(
                (compaction.details["import.id"], event.timestamp.ToJsonString(), event.version)
            )
    return found


def same_time(a: str, b: str) -> bool:
    return datetime.fromisoformat(a) == datetime.fromisoformat(b)


# -- import each fixture whole, replay it against the file ------------------------------


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name[:24])
def test_each_fixture_imports_whole_and_replays_as_the_file_says(store: Stub, path: Path) -> None:
    data = path.read_bytes()
    started = time.monotonic()
    response = import_bytes(store, data)
    took = time.monotonic() - started
    assert took < 10, f"importing {len(data):,} bytes took {took:.1f}s"
    assert response.bytes == len(data)
    (imported,) = response.sessions  # every fixture is linear: no forks
    session = imported.session
    expected = expected_records(path)
    history = events(store, session.id)
    stored = stored_records(history)

    # Every record of the file, in order, with its id (where the file has ids) and time.
    assert len(stored) == len(expected)
    for (want_id, want_time, _), (got_id, got_time, _) in zip(expected, stored, strict=True):
        if want_id is not None:
            assert got_id == want_id
        assert same_time(got_time, want_time)
    assert imported.entries + imported.compactions == len(expected)
    assert session.version == history[-1].version
    assert session.open_tool_call_ids == []

    # Replay at several versions: the log holds exactly the entries appended by then,
    # from the cut of the compaction then in force.
    entry_ids = [
        (e.id, ev.version)
        for ev in history
        for e in (
            list(ev.entries_appended.entries)
            if ev.WhichOneof("event") == "entries_appended"
            else [ev.tool_calls_abandoned.entry]
            if ev.WhichOneof("event") == "tool_calls_abandoned"
            else []
        )
    ]
    for version in sorted({2, session.version // 3, session.version // 2, session.version}):
        log = log_at(store, session.id, version=version)
        so_far = [i for i, v in entry_ids if v <= version]
        first = (
            so_far.index(log.compaction.first_kept_entry_id) if log.HasField("compaction") else 0
        )
        assert [e.id for e in log.entries] == so_far[first:]

    # Replay as of a time in the session's own history: the original times.
    for index in sorted({0, len(expected) // 4, len(expected) // 2, len(expected) - 1}):
        record_time = stored[index][1]
        later = [s for s in stored[index + 1 :] if not same_time(s[1], record_time)]
        if later and datetime.fromisoformat(later[0][1]) < datetime.fromisoformat(record_time):
            continue  # the file's clock went back here
        same = [s for s in stored if same_time(s[1], record_time)]
        log = log_at(store, session.id, time=timestamp(record_time))
        assert log.version >= max(v for _, _, v in same)
        assert log.version < (later[0][2] if later else session.version + 1)


def test_a_pi_v1_file_is_migrated_as_pi_does(store: Stub) -> None:
    records = lines(PI_BEFORE_COMPACTION)
    (imported,) = import_bytes(store, PI_BEFORE_COMPACTION.read_bytes()).sessions
    session = imported.session
    assert session.id == records[0]["id"]
    assert imported.compactions == 2
    stored = stored_records(events(store, session.id))
    # firstKeptEntryIndex counts the file's entries with the header as 0.
    compacted = [(index, r) for index, r in enumerate(records) if r["type"] == "compaction"]
    history = events(store, session.id)
    compactions = [e for e in history if e.WhichOneof("event") == "compaction_recorded"]
    for (_, record), event in zip(compacted, compactions, strict=True):
        kept = stored[record["firstKeptEntryIndex"] - 1]
        assert event.compaction_recorded.first_kept_entry_id == kept[0]
        assert event.compaction_recorded.tokens_before == record["tokensBefore"]
        assert event.compaction_recorded.summary == record["summary"]
    log = log_at(store, session.id)
    assert (
        log.compaction.first_kept_entry_id
        == compactions[-1].compaction_recorded.first_kept_entry_id
    )
    # Aborted turns without content are kept, as notes the prompt leaves out.
    empty = [
        e
        for ev in history
        if ev.WhichOneof("event") == "entries_appended"
        for e in ev.entries_appended.entries
        if e.custom_type == "empty_assistant_turn"
    ]
    assert len(empty) == 13
    assert all(e.role == pb.ROLE_CUSTOM and e.metadata["stopReason"] for e in empty)
    # Model and thinking-level changes are custom entries.
    kinds = [
        e.custom_type
        for ev in history
        if ev.WhichOneof("event") == "entries_appended"
        for e in ev.entries_appended.entries
    ]
    assert kinds.count("model_change") == 5
    assert kinds.count("thinking_level_change") == 5


def test_calls_a_transcript_never_answered_are_abandoned(store: Stub) -> None:
    records = lines(PI_LARGE)
    errored = records[32]["message"]
    assert errored["stopReason"] == "error"
    calls = [b["id"] for b in errored["content"] if b["type"] == "toolCall"]
    assert len(calls) == 16
    (imported,) = import_bytes(store, PI_LARGE.read_bytes()).sessions
    abandoned = [
        e.tool_calls_abandoned
        for e in events(store, imported.session.id)
        if e.WhichOneof("event") == "tool_calls_abandoned"
    ]
    closing = next(a for a in abandoned if calls[0] in a.tool_call_ids)
    assert list(closing.tool_call_ids) == calls
    assert closing.entry.metadata["synthetic"] == "abandoned"
    assert all(b.tool_result.is_error for b in closing.entry.content)
    assert imported.abandoned_tool_calls == sum(len(a.tool_call_ids) for a in abandoned)
    assert imported.session.settings.max_entry_bytes >= 1 << 20


def test_calls_still_open_at_the_end_of_a_transcript_are_abandoned_too(store: Stub) -> None:
    """A transcript that ends with a call (the runtime stopped before its result): no one
    will answer it, so it is abandoned as a call followed by another entry is, and the
    session takes the next turn."""
    messages = [
        {"role": "user", "content": "What time is it?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}
            ],
        },
    ]
    (imported,) = import_bytes(
        store, json.dumps(messages).encode(), session_id="ends-with-a-call"
    ).sessions

    assert imported.abandoned_tool_calls == 1
    assert list(imported.session.open_tool_call_ids) == []
    closing = [
        e.tool_calls_abandoned
        for e in events(store, "ends-with-a-call")
        if e.WhichOneof("event") == "tool_calls_abandoned"
    ]
    assert [list(a.tool_call_ids) for a in closing] == [["c1"]]
    assert closing[0].reason == "the transcript has no result for this call"
    append(store, "ends-with-a-call", user("Never mind."))
    roles = [e.role for e in log_at(store, "ends-with-a-call").entries]
    assert roles == [pb.ROLE_USER, pb.ROLE_ASSISTANT, pb.ROLE_TOOL, pb.ROLE_USER]


def test_non_ascii_text_survives(store: Stub) -> None:
    (imported,) = import_bytes(store, OPENCLAW.read_bytes(), "openclaw").sessions
    texts = [
        b.text.text
        for e in log_at(store, imported.session.id).entries
        for b in e.content
        if b.WhichOneof("block") == "text"
    ]
    assert any(
        any("\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff" for ch in t) for t in texts
    )
    models = [
        e for e in log_at(store, imported.session.id).entries if e.custom_type == "model-snapshot"
    ]
    assert len(models) == 16


# -- export, and import again -------------------------------------------------------------


@pytest.mark.parametrize("path", [PI_SMALL, OPENCLAW], ids=lambda p: p.name[:24])
def test_pi_v3_import_then_export_round_trips(store: Stub, path: Path) -> None:
    (imported,) = import_bytes(store, path.read_bytes()).sessions
    exported = export(store, imported.session.id)
    assert [json.loads(line) for line in exported.decode().splitlines()] == lines(path)
    assert exported == path.read_bytes()  # each key in its place too

    (again,) = import_bytes(store, exported, "pi", session_id="again").sessions
    assert again.session.version == imported.session.version
    assert log_at(store, "again").entries == log_at(store, imported.session.id).entries


def test_export_as_of_a_version_and_round_trip_of_an_abandonment(store: Stub) -> None:
    (imported,) = import_bytes(store, PI_LARGE.read_bytes()).sessions
    exported = export(store, imported.session.id, version=60)
    (again,) = import_bytes(store, exported, session_id="first-60").sessions
    # Version 60 is a call whose result came later: the copy ends with it open, and the
    # import abandons it (version 61), as every call a transcript never answers.
    at_60 = log_at(store, imported.session.id, version=60).entries
    open_at_60 = [b.tool_call.id for b in at_60[-1].content if b.WhichOneof("block") == "tool_call"]
    assert len(open_at_60) == 1
    assert again.session.version == 61
    assert again.abandoned_tool_calls == 16 + 1
    original = events(store, imported.session.id)[:60]
    copied = events(store, "first-60")
    assert [e.WhichOneof("event") for e in copied[:60]] == [e.WhichOneof("event") for e in original]
    assert list(copied[60].tool_calls_abandoned.tool_call_ids) == open_at_60
    assert log_at(store, "first-60", version=60).entries == at_60


def test_claude_code_and_openai_transcripts_export_as_pi_files(store: Stub) -> None:
    (imported,) = import_bytes(store, CLAUDE_CODE.read_bytes(), "claude-code").sessions
    exported = export(store, imported.session.id)
    (again,) = import_bytes(store, exported, "pi", session_id="cc-again").sessions
    assert again.entries == imported.entries
    assert [e.id for e in log_at(store, "cc-again").entries] == [
        e.id for e in log_at(store, imported.session.id).entries
    ]
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Wie spät ist es? 今何時ですか"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "clock", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
        {"role": "assistant", "content": "Mittag."},
    ]
    (chat,) = import_bytes(
        store, json.dumps(messages, indent=2).encode(), session_id="chat"
    ).sessions
    assert chat.entries == 5
    view = store.GetPromptView(pb.GetPromptViewRequest(session_id="chat"))
    assert [m["role"] for m in json.loads(view.messages_json)] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


# -- a bad file ------------------------------------------------------------------------------


def test_a_bad_file_names_its_line_and_imports_nothing(store: Stub) -> None:
    good = PI_SMALL.read_text("utf-8").splitlines()
    broken = [*good[:4], good[4][:-7], *good[5:]]
    message = refused(
        lambda: import_bytes(store, "\n".join(broken).encode(), "pi"),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert message.startswith("line 5: not valid JSON")

    orphan = json.loads(good[6])
    orphan["parentId"] = "nowhere"
    message = refused(
        lambda: import_bytes(store, "\n".join([*good[:6], json.dumps(orphan)]).encode()),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert message == "line 7: parentId 'nowhere' is not an entry of this file"

    bad_call = json.loads(good[4])
    bad_call["message"]["content"] = [
        {"type": "toolCall", "id": "x", "name": "read", "arguments": [1]}
    ]
    message = refused(
        lambda: import_bytes(store, "\n".join([*good[:4], json.dumps(bad_call)]).encode()),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert message == "line 5: tool call 'x': arguments must be a JSON object"
    assert not store.ListSessions(pb.ListSessionsRequest()).sessions

    import_bytes(store, PI_SMALL.read_bytes())
    message = refused(
        lambda: import_bytes(store, PI_SMALL.read_bytes()), grpc.StatusCode.ALREADY_EXISTS
    )
    assert message.endswith(
        "import the file under another id (the header's session_id, `sessionstore import --id`)"
    )


def test_the_export_of_a_session_without_entries_imports_again(store: Stub) -> None:
    """A pi file of its header alone was refused as holding nothing to import."""
    empty = new_session(store)
    exported = export(store, empty.id)
    (imported,) = import_bytes(store, exported, session_id="empty-again").sessions
    assert imported.entries == 0
    assert not log_at(store, "empty-again").entries
    assert export(store, "empty-again").splitlines()[0] == exported.splitlines()[0]


def test_openai_messages_one_a_line_are_recognised(store: Stub) -> None:
    lines = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    data = "\n".join(json.dumps(m) for m in lines).encode()
    (imported,) = import_bytes(store, data, session_id="chat-lines").sessions
    assert imported.entries == 2
    assert [e.role for e in log_at(store, "chat-lines").entries] == [
        pb.ROLE_USER,
        pb.ROLE_ASSISTANT,
    ]


# -- a pi file that branches ----------------------------------------------------------------


def test_every_other_branch_of_a_pi_tree_becomes_a_fork(store: Stub) -> None:
    def message(entry_id: str, parent: str | None, role: str, text: str, second: int) -> str:
        return json.dumps(
            {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": f"2026-01-01T00:00:{second:02d}.000Z",
                "message": {"role": role, "content": [{"type": "text", "text": text}]},
            }
        )

    tree = "\n".join(
        [
            json.dumps(
                {
                    "type": "session",
                    "version": 3,
                    "id": "tree",
                    "timestamp": "2026-01-01T00:00:00.000Z",
                    "cwd": "/",
                }
            ),
            message("a", None, "user", "first question", 1),
            message("b", "a", "assistant", "first answer", 2),
            message("c", "b", "user", "a question on a branch", 3),
            message("d", "c", "assistant", "the branch's answer", 4),
            message("e", "b", "user", "the question asked instead", 5),
            message("f", "e", "assistant", "the answer kept", 6),
        ]
    ).encode()
    main, fork = import_bytes(store, tree).sessions
    assert main.session.id == "tree"
    assert [e.id for e in log_at(store, "tree").entries] == ["a", "b", "e", "f"]
    assert fork.session.parent_session_id == "tree"
    assert fork.branch_point_entry_id == "b"
    assert fork.session.forked_at_version == 3
    assert [e.id for e in log_at(store, fork.session.id).entries] == ["a", "b", "c", "d"]
    assert log_at(store, fork.session.id, version=3) == pb.DurableLog(
        **{**_fields(log_at(store, "tree", version=3)), "session_id": fork.session.id}
    )


def test_branches_whose_ids_read_alike_become_forks_of_their_own(store: Stub) -> None:
    """'a b' and 'a_b' both make the id suffix 'a_b': the file could never be imported
    (its second fork clashed with its first, as if another writer had made it)."""

    def message(entry_id: str, parent: str | None, role: str) -> str:
        content = [{"type": "text", "text": f"{role} {entry_id}"}]
        record = {"type": "message", "id": entry_id, "parentId": parent}
        return json.dumps({**record, "message": {"role": role, "content": content}})

    header = {"type": "session", "version": 3, "id": "alike", "timestamp": "2026-01-01T00:00:00Z"}
    tree = "\n".join(
        [
            json.dumps(header),
            message("q", None, "user"),
            message("a b", "q", "assistant"),
            message("a_b", "q", "assistant"),
            message("kept", "q", "assistant"),
        ]
    ).encode()
    main, *forks = import_bytes(store, tree, "pi").sessions
    assert len({main.session.id, *(f.session.id for f in forks)}) == 3
    for fork in forks:
        (answer,) = log_at(store, fork.session.id).entries[1:]
        assert fork.session.id.startswith("alike@a_b")
        assert answer.id in ("a b", "a_b")
    assert {log_at(store, f.session.id).entries[1].id for f in forks} == {"a b", "a_b"}


def _fields(log: pb.DurableLog) -> dict[str, Any]:
    return {field.name: value for field, value in log.ListFields()}


# -- abandon ----------------------------------------------------------------------------------


def test_abandoned_calls_are_answered_with_synthetic_errors(store: Stub) -> None:
    session = new_session(store, model="gpt-4o")
    append(store, session.id, user("read two files"))
    both = pb.Entry(
        role=pb.ROLE_ASSISTANT,
        content=[
            *tool_call("call_1", "read", {"path": "a"}).content,
            *tool_call("call_2", "read", {"path": "b"}).content,
        ],
    )
    append(store, session.id, both)
    append(store, session.id, tool_result("call_1", "contents of a"))
    refused(lambda: append(store, session.id, user("next")), grpc.StatusCode.FAILED_PRECONDITION)
    message = refused(
        lambda: store.AbandonToolCalls(
            pb.AbandonToolCallsRequest(session_id=session.id, tool_call_ids=["call_1"])
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert "'call_1' is not open" in message
    refused(
        lambda: store.AbandonToolCalls(
            pb.AbandonToolCallsRequest(session_id=session.id, expected_version=2)
        ),
        grpc.StatusCode.ABORTED,
    )

    answer = store.AbandonToolCalls(
        pb.AbandonToolCallsRequest(session_id=session.id, reason="the runtime crashed")
    )
    assert answer.version == 5
    assert list(answer.tool_call_ids) == ["call_2"]
    assert answer.entry.metadata["synthetic"] == "abandoned"
    assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).open_tool_call_ids == []

    openai = json.loads(
        store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id)).messages_json
    )
    assert openai[-1]["role"] == "tool" and openai[-1]["tool_call_id"] == "call_2"
    assert openai[-1]["content"].startswith("[synthetic result]")
    assert "the runtime crashed" in openai[-1]["content"]
    anthropic = json.loads(
        store.GetPromptView(
            pb.GetPromptViewRequest(session_id=session.id, format=pb.PROMPT_FORMAT_ANTHROPIC)
        ).messages_json
    )
    block = anthropic[-1]["content"][-1]
    assert block["type"] == "tool_result" and block["is_error"] and block["tool_use_id"] == "call_2"

    log = log_at(store, session.id)
    assert log.entries[-1].metadata["synthetic"] == "abandoned"
    (event,) = [
        e for e in events(store, session.id) if e.WhichOneof("event") == "tool_calls_abandoned"
    ]
    assert event.tool_calls_abandoned.reason == "the runtime crashed"
    append(store, session.id, user("next"))
    refused(
        lambda: store.AbandonToolCalls(pb.AbandonToolCallsRequest(session_id=session.id)),
        grpc.StatusCode.FAILED_PRECONDITION,
    )


# -- fork -------------------------------------------------------------------------------------


def test_a_fork_shows_what_its_parent_showed_at_the_fork_point(store: Stub) -> None:
    (imported,) = import_bytes(store, PI_BEFORE_COMPACTION.read_bytes()).sessions
    parent = imported.session
    compactions = [
        e.version
        for e in events(store, parent.id)
        if e.WhichOneof("event") == "compaction_recorded"
    ]
    at = compactions[0] + 5
    fork = store.ForkSession(
        pb.ForkSessionRequest(session_id=parent.id, version=at, new_session_id="fork-1")
    )
    assert (fork.id, fork.version, fork.parent_session_id, fork.forked_at_version) == (
        "fork-1",
        at,
        parent.id,
        at,
    )
    assert _fields(log_at(store, "fork-1")) == {
        **_fields(log_at(store, parent.id, version=at)),
        "session_id": "fork-1",
    }
    assert log_at(store, "fork-1").HasField("compaction")
    for view_format in (pb.PROMPT_FORMAT_OPENAI, pb.PROMPT_FORMAT_ANTHROPIC):
        mine = store.GetPromptView(
            pb.GetPromptViewRequest(session_id="fork-1", version=at, format=view_format)
        )
        theirs = store.GetPromptView(
            pb.GetPromptViewRequest(session_id=parent.id, version=at, format=view_format)
        )
        assert mine.messages_json == theirs.messages_json
        assert mine.request_hash == theirs.request_hash
    assert store.GetSession(pb.GetSessionRequest(session_id=parent.id)).version == parent.version


def test_fork_at_an_entry_with_new_settings_leaves_the_parent_alone(store: Stub) -> None:
    session = new_session(store, model="gpt-4o")
    append(store, session.id, user("one", id="u1"))
    append(store, session.id, user("two", id="u2"))
    append(store, session.id, tool_call("call_1", "read", {"path": "big"}))
    result = tool_result("call_1", "x" * 5_000)
    result.id = "r1"
    append(store, session.id, result)
    store.RecordPrune(
        pb.RecordPruneRequest(
            session_id=session.id,
            entries=[pb.PrunedEntry(entry_id="r1", action=pb.PRUNE_ACTION_HARD_CLEAR)],
        )
    )
    append(store, session.id, user("three", id="u3"))
    pruned = store.ForkSession(pb.ForkSessionRequest(session_id=session.id, version=6))
    assert (
        store.GetPromptView(pb.GetPromptViewRequest(session_id=pruned.id)).messages_json
        == store.GetPromptView(
            pb.GetPromptViewRequest(session_id=session.id, version=6)
        ).messages_json
    )
    assert (
        "tool result content cleared"
        in json.loads(
            store.GetPromptView(pb.GetPromptViewRequest(session_id=pruned.id)).messages_json
        )[-1]["content"]
    )
    fork = store.ForkSession(
        pb.ForkSessionRequest(
            session_id=session.id,
            entry_id="u2",
            settings=pb.SessionSettings(title="what if"),
        )
    )
    assert fork.parent_session_id == session.id
    assert fork.forked_at_version == 3
    assert fork.version == 4  # the copy, then the new settings
    assert fork.settings.title == "what if"
    assert [e.id for e in log_at(store, fork.id).entries] == ["u1", "u2"]
    append(store, fork.id, user("another three", id="u3"))
    assert [e.id for e in log_at(store, session.id).entries][-1] == "u3"
    assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).version == 7
    started = events(store, fork.id)[0].started
    assert (started.parent_session_id, started.forked_at_version) == (session.id, 3)
    refused(
        lambda: store.ForkSession(pb.ForkSessionRequest(session_id=session.id, entry_id="nope")),
        grpc.StatusCode.NOT_FOUND,
    )
    refused(
        lambda: store.ForkSession(pb.ForkSessionRequest(session_id=session.id, version=99)),
        grpc.StatusCode.OUT_OF_RANGE,
    )
    refused(
        lambda: store.ForkSession(
            pb.ForkSessionRequest(session_id=session.id, new_session_id=fork.id)
        ),
        grpc.StatusCode.ALREADY_EXISTS,
    )
