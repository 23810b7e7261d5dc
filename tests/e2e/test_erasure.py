"""Erasure end to end over SQLite and PostgreSQL: content with a recognisable marker
goes in through gRPC, is erased, and is then looked for in the raw database (every
table, as SQL, and the SQLite files' bytes): it is nowhere, and the keys that
sealed it are gone, so the ciphertext left in the events cannot be opened."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import psycopg
import pytest
from psycopg import sql

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.grpc.server import RunningServer
from tests.conftest import start_server
from tests.support.grpc_calls import (
    Stub,
    append,
    new_session,
    refused,
    text,
    tool_call,
    tool_result,
    user,
)
from tests.support.raw_keys import raw_key_rows


@pytest.fixture
def server(database_url: str) -> Iterator[RunningServer]:
    """As deployed by default: no recall index, so no content is kept unsealed at rest."""
    running = start_server(database_url, recall_index=False)
    yield running
    running.stop(0)


def _marker() -> str:
    return f"MARK{uuid.uuid4().hex[:10]}"


def _row_text(row: tuple[object, ...]) -> str:
    """A row as text: bytes both as hex and as the text they may hold."""
    parts = []
    for value in row:
        if isinstance(value, bytes | memoryview):
            raw = bytes(value)
            parts.append(f"{raw.hex()} {raw.decode('utf-8', 'replace')}")
        else:
            parts.append(str(value))
    return " ".join(parts)


def _raw_rows(database_url: str) -> list[str]:
    """Every row of every table of the database, as text."""
    if database_url.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as conn:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            ]
            return [
                _row_text(row)
                for table in tables
                for row in conn.execute(f'SELECT * FROM "{table}"')
            ]
    base, schema = database_url.split("?schema=")
    with psycopg.connect(base, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (schema,),
            )
        ]
        assert tables, "the server made no tables in the test's schema"
        rows = []
        for table in tables:
            query = sql.SQL("SELECT * FROM {}.{}").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            rows.extend(_row_text(tuple(row)) for row in conn.execute(query))
        return rows


def _appears(marker: str, database_url: str, tmp_path: Path) -> list[str]:
    """Where the marker is found in the raw database: table rows, and file bytes."""
    found = [row[:200] for row in _raw_rows(database_url) if marker in row]
    if database_url.startswith("sqlite"):
        for file in tmp_path.iterdir():
            if file.is_file() and marker.encode() in file.read_bytes():
                found.append(f"file {file.name}")
    return found


def _key_rows(database_url: str, session_id: str) -> list[bytes]:
    """The session's data keys, read straight from the key table."""
    return [key for _, _, key in raw_key_rows(database_url, session_id)]


def _texts(message: object) -> str:
    return str(message)


def _thinking(body: str, call: pb.Entry) -> pb.Entry:
    entry = pb.Entry()
    entry.CopyFrom(call)
    entry.content.insert(0, pb.ContentBlock(thinking=pb.ThinkingBlock(thinking=body)))
    return entry


def _fill(store: Stub, marker: str) -> str:
    """A session holding the marker in every kind of content; answers its id."""
    session = new_session(store, model="gpt-4o", title="erasure test").id
    store.SetSystemPrompt(
        pb.SetSystemPromptRequest(
            session_id=session, system_prompt=pb.SystemPrompt(text=f"You help {marker}-prompt.")
        )
    )
    append(store, session, user(f"my secret is {marker}-text", id="u1"))
    call = tool_call("c1", "lookup", {"who": f"{marker}-args"})
    append(store, session, _thinking(f"{marker}-thinking", call))
    append(store, session, tool_result("c1", f"found {marker}-result"))
    append(store, session, text(pb.ROLE_ASSISTANT, "done", id="a1"))
    reasoning = {"type": "reasoning", "id": "rs_1", "encrypted_content": f"{marker}-item"}
    item = pb.ProviderItem(provider="openai", type="reasoning", json=json.dumps(reasoning))
    append(
        store,
        session,
        pb.Entry(role=pb.ROLE_ASSISTANT, content=[pb.ContentBlock(provider_item=item)]),
    )
    append(store, session, user("and now?", id="u2"))
    compaction = {"type": "compaction", "content": f"{marker}-compaction"}
    store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session,
            summary=f"they said {marker}-summary",
            first_kept_entry_id="u2",
            provider_item=pb.ProviderItem(
                provider="anthropic", type="compaction", json=json.dumps(compaction)
            ),
        )
    )
    append(store, session, text(pb.ROLE_ASSISTANT, "fine", id="a2"))
    return session


@pytest.fixture
def second(database_url: str, server: RunningServer) -> Iterator[tuple[RunningServer, Stub]]:
    """Another server on the same database."""
    del server  # started first: it creates the tables
    other = start_server(database_url, recall_index=False)
    with grpc.insecure_channel(f"127.0.0.1:{other.port}") as channel:
        yield other, pb_grpc.SessionStoreStub(channel)
    other.stop(0)


def test_an_erased_session_leaves_no_content_in_the_database(
    store: Stub, database_url: str, tmp_path: Path, second: tuple[RunningServer, Stub]
) -> None:
    other_server, other = second
    marker = _marker()
    session = _fill(store, marker)
    # The other server reads it: its caches hold the plaintext now.
    before = other.GetPromptView(pb.GetPromptViewRequest(session_id=session))
    assert f"{marker}-summary" in _texts(before)
    earlier = other.GetDurableLog(pb.GetViewRequest(session_id=session, version=4))
    assert f"{marker}-text" in _texts(earlier)
    assert _key_rows(database_url, session)
    # Sealed before any erasure: the events hold no plaintext, only the keys' ciphertext.
    assert not _appears(marker, database_url, tmp_path)
    old_keys = _key_rows(database_url, session)

    erased = store.EraseSession(
        pb.EraseSessionRequest(session_id=session, reason="user request", erased_by="dpo@example")
    )
    assert erased.erasure.whole_session and erased.erasure.erased_by == "dpo@example"
    assert other_server.app.sessions.history_cached(session)
    # The other server drops its copy without being asked about the session again.
    deadline = time.monotonic() + 10
    while other_server.app.sessions.history_cached(session) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not other_server.app.sessions.history_cached(session)

    # The raw database: no key row left, no key's bytes anywhere, the ciphertext still there.
    assert _key_rows(database_url, session) == []
    rows = _raw_rows(database_url)
    for key in old_keys:
        assert not any(key.hex() in row for row in rows)
    if database_url.startswith("sqlite"):
        for file in tmp_path.iterdir():
            data = file.read_bytes() if file.is_file() else b""
            assert not any(key in data for key in old_keys), file.name
    assert any('"s":' in row for row in rows), "the sealed content stays in the events"
    assert not _appears(marker, database_url, tmp_path)

    # Every read answers the erasure, on both servers, at any version, never INTERNAL.
    for stub in (store, other):
        got = stub.GetSession(pb.GetSessionRequest(session_id=session))
        assert got.erased.whole_session and got.erased.reason == "user request"
        for version in range(1, got.version + 1):
            log = stub.GetDurableLog(pb.GetViewRequest(session_id=session, version=version))
            view = stub.GetPromptView(pb.GetPromptViewRequest(session_id=session, version=version))
            assert marker not in _texts(log), (stub is store, version, "log")
            assert marker not in _texts(view), (stub is store, version, "view")
            assert [e.erased_by for e in log.erasures] == ["dpo@example"]
        view = stub.GetPromptView(pb.GetPromptViewRequest(session_id=session))
        assert marker not in _texts(view)
        assert "[erased]" in _texts(view)
        events = list(stub.ReadEvents(pb.ReadEventsRequest(session_id=session)))
        assert marker not in "".join(map(_texts, events))
        assert events[-1].erasure.erased_by == "dpo@example"
        audit = stub.AuditView(pb.AuditViewRequest(session_id=session))
        assert audit.erasures[0].whole_session
        exported = b"".join(
            c.data for c in stub.ExportSession(pb.ExportSessionRequest(session_id=session))
        )
        assert marker.encode() not in exported
    message = refused(
        lambda: append(store, session, user("more")), grpc.StatusCode.FAILED_PRECONDITION
    )
    assert "erased" in message


def test_erased_entries_taint_the_summary_and_compact_regenerates_it(
    store: Stub, database_url: str, tmp_path: Path
) -> None:
    marker = _marker()
    session = new_session(
        store, model="gpt-4o", compaction=pb.CompactionPolicy(keep_recent_tokens=200)
    ).id
    for n in range(4):
        path = f"src/{marker}.py" if n == 1 else f"src/file_{n}.py"
        append(store, session, user(f"read {path}", id=f"q{n}"))
        append(store, session, tool_call(f"call_{n}", "read", {"path": path}))
        append(store, session, tool_result(f"call_{n}", f"# {path}\n" + "x = 1\n" * 300))
        append(store, session, text(pb.ROLE_ASSISTANT, f"{path} is short.", id=f"a{n}"))
    done = store.Compact(pb.CompactRequest(session_id=session, force=True))
    assert done.compacted and marker in done.compaction.summary
    # Entries of turn 1: the question, the call (its arguments), the result, the answer.
    log0 = store.GetDurableLog(pb.GetViewRequest(session_id=session, version=9))
    turn1 = [e.id for e in log0.entries[4:8]]
    assert turn1[0] == "q1" and turn1[3] == "a1"
    erased = store.EraseEntries(
        pb.EraseEntriesRequest(
            session_id=session, entry_ids=turn1, reason="pasted a secret", erased_by="ana"
        )
    )
    assert erased.erasure.tainted_compaction_versions == [done.compaction.version]
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session))
    assert log.compaction.tainted and marker not in log.compaction.summary
    # The audit shows the receipt as the log holds it: tainted, erased, still in force.
    audited = store.GetCompaction(
        pb.GetCompactionRequest(
            session_id=session, version=done.compaction.version, min_position=erased.position
        )
    )
    assert audited.record.outcome == "tainted" and audited.in_force
    assert audited.compaction.tainted and marker not in audited.compaction.summary
    assert audited.compaction.entries_covered == done.compaction.entries_covered
    assert not _appears(marker, database_url, tmp_path)
    # The replay of the turn's own version shows the placeholders, paired as before.
    replay = store.GetDurableLog(pb.GetViewRequest(session_id=session, version=9))
    call, result = replay.entries[5], replay.entries[6]
    assert call.content[0].tool_call.id == "call_1"
    assert json.loads(call.content[0].tool_call.arguments_json) == {}
    assert result.content[0].tool_result.tool_call_id == "call_1"
    assert result.content[0].tool_result.content == "[erased]"
    view = store.GetPromptView(pb.GetPromptViewRequest(session_id=session, version=9))
    assert marker not in str(view)

    again = store.Compact(pb.CompactRequest(session_id=session, force=True))
    assert again.compacted and not again.compaction.tainted
    assert marker not in again.compaction.summary
    assert "file_2.py" in again.compaction.summary
    view = store.GetPromptView(pb.GetPromptViewRequest(session_id=session))
    assert marker not in str(view)
    # The audit keeps the fact: who, when, which, and the summary it tainted.
    audit = store.AuditView(pb.AuditViewRequest(session_id=session))
    assert audit.erasures[0].entry_ids == turn1 and audit.erasures[0].erased_by == "ana"
    # Other entries are untouched, and the session takes writes.
    append(store, session, user("go on"))
    assert not _appears(marker, database_url, tmp_path)


def test_erasing_an_unknown_entry_is_refused(store: Stub) -> None:
    session = new_session(store, model="gpt-4o").id
    append(store, session, user("hi", id="u1"))
    message = refused(
        lambda: store.EraseEntries(pb.EraseEntriesRequest(session_id=session, entry_ids=["nope"])),
        grpc.StatusCode.NOT_FOUND,
    )
    assert "nope" in message


@pytest.mark.parametrize("reason", ["", "  \n"])
def test_an_erasure_without_a_reason_is_refused_and_erases_nothing(
    store: Stub, reason: str
) -> None:
    session = new_session(store, model="gpt-4o").id
    append(store, session, user("keep me", id="u1"))
    for erase in (
        lambda: store.EraseSession(pb.EraseSessionRequest(session_id=session, reason=reason)),
        lambda: store.EraseEntries(
            pb.EraseEntriesRequest(session_id=session, entry_ids=["u1"], reason=reason)
        ),
    ):
        message = refused(erase, grpc.StatusCode.INVALID_ARGUMENT)
        assert message.startswith("reason is blank: say why"), message
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session))
    assert log.entries[0].content[0].text.text == "keep me"
    assert not store.GetSession(pb.GetSessionRequest(session_id=session)).HasField("erased")


def test_erase_command(tmp_path: Path) -> None:
    import structlog
    from click.testing import CliRunner

    from services.cli import cli

    with structlog.testing.capture_logs():
        running = start_server(f"sqlite:///{tmp_path}/cli.db", recall_index=False)
        address = f"127.0.0.1:{running.port}"
        try:
            with grpc.insecure_channel(address) as channel:
                store = pb_grpc.SessionStoreStub(channel)
                session = new_session(store, model="gpt-4o").id
                append(store, session, user("secret one", id="u1"), user("kept", id="u2"))
            runner = CliRunner()
            base = ["--address", address, "erase", session]
            one = runner.invoke(cli, [*base, "--entry", "u1", "--reason", "typo", "--by", "ana"])
            assert one.exit_code == 0, one.output
            assert "erased 1 entry (version" in one.stdout
            whole = runner.invoke(cli, [*base, "--reason", "user request"])
            assert whole.exit_code == 0, whole.output
            assert "erased the whole session" in whole.stdout
            events = runner.invoke(cli, ["--address", address, "events", session])
            assert "u1 by ana (typo)" in events.stdout
            assert "the whole session" in events.stdout
            log = runner.invoke(cli, ["--address", address, "log", session])
            assert "secret one" not in log.stdout
        finally:
            running.stop(0)
