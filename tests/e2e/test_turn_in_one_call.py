"""A turn in one round trip: AppendEntries answering the prompt view after the
append (view_after_append), on SQLite and PostgreSQL, against what
GetPromptView answers for the same held view; and an append whose view is
refused, or fails, answering the append with what GetPromptView would say."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import structlog.testing

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.grpc.server import RunningServer
from tests.conftest import start_server
from tests.support.engine_plugins import installed_engine
from tests.support.grpc_calls import Stub, append, new_session, refused, text, user


def _turn(
    store: Stub, session_id: str, n: int, held: pb.PromptView | None = None, **fields: object
) -> pb.AppendEntriesResponse:
    wanted = pb.ViewAfterAppend()
    if held is not None:
        wanted.held_version, wanted.held_hash = held.version, held.request_hash
    return append(
        store,
        session_id,
        user(f"question {n}"),
        text(pb.ROLE_ASSISTANT, f"answer {n}"),
        view_after_append=wanted,
        **fields,
    )


def _view(store: Stub, session_id: str) -> pb.PromptView:
    return store.GetPromptView(pb.GetPromptViewRequest(session_id=session_id))


def test_the_view_after_an_append_is_what_get_prompt_view_answers(store: Stub) -> None:
    session = new_session(store, model="gpt-4o").id
    first = _turn(store, session, 0)
    whole = first.view_after_append
    assert not whole.appended and whole.version == first.version
    assert whole == _view(store, session)

    # Holding that view, each turn answers only what it appended.
    held, messages = whole, json.loads(whole.messages_json)
    for n in range(1, 6):
        turn = _turn(store, session, n, held)
        view = turn.view_after_append
        assert view.appended and view.base_version == held.version
        messages += json.loads(view.messages_json)
        current = _view(store, session)
        assert (view.version, view.request_hash) == (current.version, current.request_hash)
        assert messages == json.loads(current.messages_json)
        held = view
    assert [m["content"] for m in messages[-2:]] == ["question 5", "answer 5"]

    # Something before the held view changed (a compaction): the whole view comes back.
    compacted = store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session,
            summary="earlier turns",
            first_kept_entry_id=_log_ids(store, session)[4],
        )
    )
    turn = _turn(store, session, 6, held)
    assert not turn.view_after_append.appended
    assert turn.view_after_append.version == compacted.version + 1
    assert turn.view_after_append == _view(store, session)


def _log_ids(store: Stub, session_id: str) -> list[str]:
    return [e.id for e in store.GetDurableLog(pb.GetViewRequest(session_id=session_id)).entries]


def test_a_bad_view_request_writes_nothing(store: Stub) -> None:
    session = new_session(store, model="gpt-4o").id
    before = store.GetSession(pb.GetSessionRequest(session_id=session)).version
    wanted = pb.ViewAfterAppend(held_version=1)  # no held_hash
    message = refused(
        lambda: append(store, session, user("hi"), view_after_append=wanted),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "held_hash" in message
    refused(
        lambda: append(
            store, session, user("hi"), view_after_append=pb.ViewAfterAppend(token_budget=0)
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert store.GetSession(pb.GetSessionRequest(session_id=session)).version == before


def test_an_append_whose_view_is_refused_still_answers_the_append(store: Stub) -> None:
    # A window below the guard's minimum: views are refused, appends are stored.
    session = new_session(store, model="gpt-4o", context_window_tokens=8_000).id
    turn = _turn(store, session, 0)
    assert turn.version == 2 and len(turn.entry_ids) == 2
    assert not turn.HasField("view_after_append")
    assert turn.view_after_append_error.startswith("FAILED_PRECONDITION: ")
    assert "8,000 tokens" in turn.view_after_append_error
    assert store.GetSession(pb.GetSessionRequest(session_id=session)).entry_count == 2


# A third-party context engine with a bug of its own, installed as a package installs
# one: whatever it raises is no refusal the store knows, so GetPromptView answers
# INTERNAL for its sessions' views. (Appends never ask the engine for a view.)
FAULTY_ENGINE = '''
from services.engine.sliding_window import SlidingWindowEngine


class Engine(SlidingWindowEngine):
    """Sizes each view by a window of its own per session, from a table it never fills."""

    windows: dict[str, int] = {}

    def assemble(self, session_id, token_budget, deadline):
        return super().assemble(session_id, self.windows[session_id], deadline)
'''


@pytest.fixture
def faulty_engine_store(database_url: str, tmp_path: Path) -> Iterator[Stub]:
    """A server started with the faulty engine installed, and a client of it."""
    with installed_engine(tmp_path, "faulty", "faulty_engine", FAULTY_ENGINE):
        running = start_server(database_url)
        try:
            with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
                yield pb_grpc.SessionStoreStub(channel)
        finally:
            running.stop(0)


def test_an_append_whose_view_fails_on_a_fault_answers_the_append_once(
    faulty_engine_store: Stub,
) -> None:
    """A view that fails for no refusal of the store's own answers the append all the
    same: its write stands, and a failed call would have the client send it again.
    The fault: the session's context engine, a plug-in, fails with an error of its own
    while assembling every view, so GetPromptView answers INTERNAL. The call says
    that status, never the traceback, which the log has."""
    store = faulty_engine_store
    created = new_session(store, model="gpt-4o", engine="faulty")
    session = created.id
    question = "Which vault path holds the staging password?"

    with structlog.testing.capture_logs() as logs:
        turn = append(
            store,
            session,
            user(question),
            view_after_append=pb.ViewAfterAppend(format=pb.PROMPT_FORMAT_OPENAI),
        )
    assert turn.version == created.version + 1
    assert len(turn.entry_ids) == len(turn.token_counts) == 1 and turn.token_counts[0] > 0
    assert not turn.HasField("view_after_append")
    with pytest.raises(grpc.RpcError) as plain:
        _view(store, session)
    assert plain.value.code() == grpc.StatusCode.INTERNAL
    assert turn.view_after_append_error == f"INTERNAL: {plain.value.details()}"
    assert "Traceback" not in turn.view_after_append_error
    (logged,) = [e for e in logs if e["event"] == "view after append failed"]
    assert logged["log_level"] == "error"
    assert isinstance(logged["exc_info"], KeyError)  # the engine's own

    # Written once: the log holds the question once, at the version the call answered.
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session))
    assert [e.content[0].text.text for e in log.entries] == [question]
    assert [e.id for e in log.entries] == list(turn.entry_ids)
    assert log.version == turn.version


def test_a_replayed_append_answers_the_current_view(store: Stub) -> None:
    session = new_session(store, model="gpt-4o").id
    first = _turn(store, session, 0, idempotency_key="k")
    again = _turn(store, session, 0, idempotency_key="k")
    assert again.replayed and again.version == first.version
    assert again.view_after_append == first.view_after_append == _view(store, session)


def test_another_servers_write_is_in_the_view_after_an_append(
    database_url: str, server: RunningServer
) -> None:
    """The view after an append is never older than the store: a write through
    another server in between is caught up, as GetPromptView would."""
    second = start_server(database_url)
    try:
        with (
            grpc.insecure_channel(f"127.0.0.1:{server.port}") as a,
            grpc.insecure_channel(f"127.0.0.1:{second.port}") as b,
        ):
            here, there = pb_grpc.SessionStoreStub(a), pb_grpc.SessionStoreStub(b)
            session = new_session(here, model="gpt-4o").id
            held = _turn(here, session, 0).view_after_append
            append(there, session, user("from elsewhere"))
            turn = _turn(here, session, 1, held)
            view = turn.view_after_append
            assert view.appended and turn.version == 4
            assert [m["content"] for m in json.loads(view.messages_json)] == [
                "from elsewhere",
                "question 1",
                "answer 1",
            ]
            assert view.request_hash == _view(there, session).request_hash
    finally:
        second.stop(0)
