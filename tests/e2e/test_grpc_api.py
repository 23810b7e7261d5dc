"""The v1 API end to end: a real server on loopback, over SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.conftest import start_server
from tests.support.grpc_calls import (
    Stub,
    append,
    new_session,
    refused,
    text,
    three_turns,
    tool_call,
    tool_result,
    user,
)

# -- serving ----------------------------------------------------------------------


def test_health_and_reflection_are_served(channel: grpc.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "sessionstore.v1.SessionStore"):
        answer = health.Check(health_pb2.HealthCheckRequest(service=service))
        assert answer.status == health_pb2.HealthCheckResponse.SERVING

    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    (answer,) = reflection.ServerReflectionInfo(iter([request]))
    names = {s.name for s in answer.list_services_response.service}
    assert "sessionstore.v1.SessionStore" in names
    assert "grpc.health.v1.Health" in names


def test_reflection_answers_under_v1_as_current_grpcurl_asks(channel: grpc.Channel) -> None:
    # v1 messages are v1alpha's under another package name, identical on the wire.
    info = channel.stream_stream(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    requests = [
        reflection_pb2.ServerReflectionRequest(list_services=""),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="sessionstore.v1.Entry"),
    ]
    listing, described = info(iter(requests))
    names = {s.name for s in listing.list_services_response.service}
    assert {"sessionstore.v1.SessionStore", "grpc.reflection.v1.ServerReflection"} <= names
    assert described.file_descriptor_response.file_descriptor_proto


# -- sessions ---------------------------------------------------------------------


def test_create_resolves_the_context_window_and_names_its_source(store: Stub) -> None:
    from_model = new_session(store, model="gpt-4o")
    assert (from_model.settings.context_window_tokens, from_model.context_window_source) == (
        128_000,
        "model",
    )
    given = new_session(store, model="gpt-4o", context_window_tokens=50_000)
    assert given.context_window_source == "session"
    unknown = new_session(store, model="someone/unheard-of-model")
    assert (unknown.settings.context_window_tokens, unknown.context_window_source) == (
        200_000,
        "default",
    )


def test_client_chosen_ids_are_unique_and_checked(store: Stub) -> None:
    created = store.CreateSession(pb.CreateSessionRequest(session_id="agent:main:telegram-42"))
    assert created.id == "agent:main:telegram-42"
    assert store.GetSession(pb.GetSessionRequest(session_id=created.id)).version == 1
    message = refused(
        lambda: store.CreateSession(pb.CreateSessionRequest(session_id="agent:main:telegram-42")),
        grpc.StatusCode.ALREADY_EXISTS,
    )
    assert "already exists" in message
    refused(
        lambda: store.CreateSession(pb.CreateSessionRequest(session_id="has spaces/and slashes")),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    refused(
        lambda: store.GetSession(pb.GetSessionRequest(session_id="never-created")),
        grpc.StatusCode.NOT_FOUND,
    )


def test_invalid_settings_are_refused(store: Stub) -> None:
    message = refused(
        lambda: new_session(store, pruning=pb.PruningPolicy(mode="sometimes")),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "pruning.mode" in message


def test_list_sessions_pages_in_creation_order(store: Stub) -> None:
    created = [new_session(store, title=f"s{i}").id for i in range(5)]
    seen: list[str] = []
    token = ""
    while True:
        page = store.ListSessions(pb.ListSessionsRequest(page_size=2, page_token=token))
        seen.extend(s.id for s in page.sessions)
        token = page.next_page_token
        if not token:
            break
    assert seen == created


def test_update_settings_keeps_unset_fields_and_is_an_event(
    store: Stub, session: pb.Session
) -> None:
    updated = store.UpdateSettings(
        pb.UpdateSettingsRequest(
            session_id=session.id,
            settings=pb.SessionSettings(context_window_tokens=64_000, title="renamed"),
            expected_version=1,
        )
    )
    assert updated.version == 2
    assert updated.settings.model == "gpt-4o"
    assert updated.settings.context_window_tokens == 64_000
    assert updated.context_window_source == "session"
    view = store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id))
    assert view.context_window_tokens == 64_000
    before = store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id, version=1))
    assert before.context_window_tokens == 128_000


# -- appends --------------------------------------------------------------------------


def test_a_turn_with_a_tool_call_lands_in_the_durable_log(store: Stub, session: pb.Session) -> None:
    first = append(store, session.id, user("What is in README.md?"))
    second = append(
        store,
        session.id,
        tool_call("call_1", "read", {"path": "README.md"}),
        tool_result("call_1", "# Demo\nA demo project."),
        text(pb.ROLE_ASSISTANT, "It is a demo project."),
    )
    assert (first.version, second.version) == (2, 3)
    assert len(second.entry_ids) == 3

    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    assert log.version == 3
    assert [e.role for e in log.entries] == [
        pb.ROLE_USER,
        pb.ROLE_ASSISTANT,
        pb.ROLE_TOOL,
        pb.ROLE_ASSISTANT,
    ]
    # Parents chain through the turn; counts and tokenizer were recorded at ingest.
    assert [e.parent_id for e in log.entries[1:]] == [e.id for e in log.entries[:-1]]
    assert all(e.tokenizer == "o200k_base" and e.token_count > 0 for e in log.entries)
    assert log.total_tokens == sum(e.token_count for e in log.entries)
    assert [e.version for e in log.entries] == [2, 3, 3, 3]

    current = store.GetSession(pb.GetSessionRequest(session_id=session.id))
    assert current.entry_count == 4
    assert current.total_usage.input_tokens == 120
    assert current.total_usage.cache_read_tokens == 100
    assert list(current.open_tool_call_ids) == []

    openai = json.loads(
        store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id)).messages_json
    )
    assert openai[1]["tool_calls"][0]["function"] == {
        "name": "read",
        "arguments": '{"path": "README.md"}',
    }
    assert openai[2] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "# Demo\nA demo project.",
    }


def test_token_counts_are_exact_for_cjk_text(store: Stub, session: pb.Session) -> None:
    import tiktoken

    sentence = "上下文窗口的管理需要精确地计算词元数量。" * 20
    counted = append(store, session.id, user(sentence)).token_counts[0]
    exact = len(tiktoken.get_encoding("o200k_base").encode(sentence))
    assert counted == exact + 4  # plus the per-message overhead
    assert counted > len(sentence) / 4  # what chars/4 would have said


def test_a_stale_expected_version_is_aborted_and_writes_nothing(
    store: Stub, session: pb.Session
) -> None:
    append(store, session.id, user("one"), expected_version=1)
    message = refused(
        lambda: append(store, session.id, user("two"), expected_version=1),
        grpc.StatusCode.ABORTED,
    )
    assert "expected version 1" in message and "version 2" in message
    assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).version == 2


def test_a_retried_append_returns_the_first_result_and_writes_once(
    store: Stub, session: pb.Session
) -> None:
    turn = [user("hello", id="u-1")]
    first = append(store, session.id, *turn, idempotency_key="turn-1", expected_version=1)
    # The retry carries the same (now stale) expected version, as a client's retry would.
    retry = append(store, session.id, *turn, idempotency_key="turn-1", expected_version=1)
    assert (retry.version, list(retry.entry_ids), retry.replayed) == (
        first.version,
        list(first.entry_ids),
        True,
    )
    assert not first.replayed
    assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).entry_count == 1

    message = refused(
        lambda: append(store, session.id, user("something else"), idempotency_key="turn-1"),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "turn-1" in message


@pytest.mark.parametrize(
    ("entry", "code", "words"),
    [
        (
            pb.Entry(content=[pb.ContentBlock(text=pb.TextBlock(text="x"))]),
            "INVALID_ARGUMENT",
            "role",
        ),
        (pb.Entry(role=pb.ROLE_USER), "INVALID_ARGUMENT", "no content"),
        (user("   "), "INVALID_ARGUMENT", "empty"),
        (user("x" * 5_000), "INVALID_ARGUMENT", "max_entry_bytes"),
        (tool_result("call_never_made", "out"), "FAILED_PRECONDITION", "not open"),
        (
            pb.Entry(
                role=pb.ROLE_ASSISTANT,
                content=[
                    pb.ContentBlock(
                        tool_call=pb.ToolCallBlock(id="c", name="f", arguments_json="{")
                    )
                ],
            ),
            "INVALID_ARGUMENT",
            "not valid JSON",
        ),
        (user("hi", parent_id="nowhere"), "INVALID_ARGUMENT", "parent_id"),
    ],
)
def test_bad_entries_are_refused_and_nothing_of_the_batch_is_written(
    store: Stub, entry: pb.Entry, code: str, words: str
) -> None:
    session = new_session(store, max_entry_bytes=4_096)
    message = refused(
        lambda: append(store, session.id, user("a good entry first"), entry),
        getattr(grpc.StatusCode, code),
    )
    assert words in message
    after = store.GetSession(pb.GetSessionRequest(session_id=session.id))
    assert (after.version, after.entry_count) == (1, 0)


def test_nothing_but_results_may_follow_an_open_tool_call(store: Stub, session: pb.Session) -> None:
    append(store, session.id, user("go"), tool_call("c1", "run", {}))
    message = refused(
        lambda: append(store, session.id, user("are you done?")),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert "'c1' are still open" in message
    append(store, session.id, tool_result("c1", "aborted", is_error=True), user("are you done?"))


def test_duplicate_entry_ids_are_refused(store: Stub, session: pb.Session) -> None:
    append(store, session.id, user("first", id="e-1"))
    message = refused(
        lambda: append(store, session.id, user("again", id="e-1")),
        grpc.StatusCode.ALREADY_EXISTS,
    )
    assert "e-1" in message


def test_concurrent_appends_to_one_session_all_land_in_order(
    store: Stub, session: pb.Session
) -> None:
    def client(n: int) -> None:
        for i in range(10):
            append(store, session.id, user(f"client {n} message {i}"))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    assert log.version == 81
    assert len(log.entries) == 80
    assert len({e.id for e in log.entries}) == 80
    for n in range(8):
        mine = [
            e.content[0].text.text for e in log.entries if f"client {n} " in e.content[0].text.text
        ]
        assert mine == [f"client {n} message {i}" for i in range(10)]


# -- compaction, pruning, replay --------------------------------------------------------


def test_compaction_replaces_the_head_of_the_durable_log_and_replay_still_sees_it(
    store: Stub, session: pb.Session
) -> None:
    ids = three_turns(store, session.id)
    recorded = store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session.id,
            summary="## Goal\nRead files.\n## Progress\na.txt holds only 'A'.",
            first_kept_entry_id=ids[4],
            tokens_before=2_600,
            tokens_after=40,
            reason="threshold",
            summarizer_model="gpt-4o-mini",
            expected_version=4,
        )
    )
    assert recorded.version == 5
    assert recorded.compaction.summary_tokens > 0
    receipt = recorded.compaction
    covered = (receipt.first_covered_entry_id, receipt.last_covered_entry_id)
    assert covered == (ids[0], ids[3]) and receipt.entries_covered == 4

    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    assert log.compaction.first_kept_entry_id == ids[4]
    assert [e.id for e in log.entries] == [ids[4]]
    assert log.total_tokens == log.compaction.summary_tokens + log.entries[0].token_count
    messages = json.loads(
        store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id)).messages_json
    )
    assert messages[0]["role"] == "user" and "a.txt holds only 'A'." in messages[0]["content"]
    assert len(messages) == 2

    before = store.GetDurableLog(pb.GetViewRequest(session_id=session.id, version=4))
    assert [e.id for e in before.entries] == ids
    assert not before.HasField("compaction")
    # The compacted entries are still in the store, whole.
    assert (
        store.GetEntry(pb.GetEntryRequest(session_id=session.id, entry_id=ids[2]))
        .content[0]
        .tool_result.content
        == "A" * 10_000
    )


def test_invalid_cut_points_are_refused(store: Stub, session: pb.Session) -> None:
    ids = three_turns(store, session.id)

    def compact(first_kept: str) -> None:
        store.RecordCompaction(
            pb.RecordCompactionRequest(
                session_id=session.id, summary="s", first_kept_entry_id=first_kept
            )
        )

    assert "tool result" in refused(lambda: compact(ids[2]), grpc.StatusCode.FAILED_PRECONDITION)
    assert "not in this session" in refused(lambda: compact("nope"), grpc.StatusCode.NOT_FOUND)
    compact(ids[1])
    message = refused(lambda: compact(ids[1]), grpc.StatusCode.FAILED_PRECONDITION)
    assert "directly follows" in message
    compact(ids[4])  # directly after another, but cutting later: drops more
    append(store, session.id, tool_call("c2", "read", {"path": "b.txt"}))
    (note,) = append(store, session.id, text(pb.ROLE_CUSTOM, "tool running")).entry_ids
    message = refused(lambda: compact(note), grpc.StatusCode.FAILED_PRECONDITION)
    assert "c2" in message  # the open call would be split from its coming result


def test_prunes_change_the_prompt_view_only(store: Stub, session: pb.Session) -> None:
    ids = three_turns(store, session.id)
    store.RecordPrune(
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
    view = store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id))
    shown = json.loads(view.messages_json)[2]["content"]
    assert shown.startswith("A" * 100 + "\n...\n" + "A" * 50)
    assert "kept first 100 chars and last 50 chars of 10000 chars" in shown
    assert [p.entry_id for p in view.pruned] == [ids[2]]
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    assert view.estimated_tokens < log.total_tokens

    store.RecordPrune(
        pb.RecordPruneRequest(
            session_id=session.id,
            entries=[pb.PrunedEntry(entry_id=ids[2], action=pb.PRUNE_ACTION_HARD_CLEAR)],
        )
    )
    anthropic = store.GetPromptView(
        pb.GetPromptViewRequest(session_id=session.id, format=pb.PROMPT_FORMAT_ANTHROPIC)
    )
    blocks = json.loads(anthropic.messages_json)[2]["content"]
    assert {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": "[Old tool result content cleared]",
    } in blocks
    # Replay: before the prunes the result was whole.
    whole = store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id, version=4))
    assert json.loads(whole.messages_json)[2]["content"] == "A" * 10_000
    assert "not a tool result" in refused(
        lambda: store.RecordPrune(
            pb.RecordPruneRequest(
                session_id=session.id,
                entries=[pb.PrunedEntry(entry_id=ids[0], action=pb.PRUNE_ACTION_HARD_CLEAR)],
            )
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
    )


def test_views_replay_to_a_point_in_time(store: Stub, session: pb.Session) -> None:
    append(store, session.id, user("before"))
    time.sleep(0.05)
    moment = Timestamp()
    moment.FromDatetime(datetime.now(UTC))
    time.sleep(0.05)
    append(store, session.id, user("after"))
    then = store.GetDurableLog(pb.GetViewRequest(session_id=session.id, time=moment))
    assert then.version == 2
    assert [e.content[0].text.text for e in then.entries] == ["before"]
    long_ago = Timestamp()
    long_ago.FromDatetime(datetime(2000, 1, 1, tzinfo=UTC))
    refused(
        lambda: store.GetDurableLog(pb.GetViewRequest(session_id=session.id, time=long_ago)),
        grpc.StatusCode.OUT_OF_RANGE,
    )
    refused(
        lambda: store.GetDurableLog(pb.GetViewRequest(session_id=session.id, version=99)),
        grpc.StatusCode.OUT_OF_RANGE,
    )


# -- events ----------------------------------------------------------------------------


def test_events_are_read_back_in_order(store: Stub, session: pb.Session) -> None:
    ids = three_turns(store, session.id)
    events = list(store.ReadEvents(pb.ReadEventsRequest(session_id=session.id)))
    assert [e.version for e in events] == [1, 2, 3, 4]
    assert [e.WhichOneof("event") for e in events] == ["started"] + ["entries_appended"] * 3
    assert [e.id for e in events[2].entries_appended.entries] == ids[1:4]
    # The window in force is in the event, though the client left it to the model.
    assert events[0].started.settings.context_window_tokens == 128_000
    later = list(store.ReadEvents(pb.ReadEventsRequest(session_id=session.id, after_version=3)))
    assert [e.version for e in later] == [4]
    refused(
        lambda: list(
            store.ReadEvents(pb.ReadEventsRequest(session_id=session.id, after_version=9))
        ),
        grpc.StatusCode.OUT_OF_RANGE,
    )


def test_follow_streams_new_events_as_they_land(store: Stub, session: pb.Session) -> None:
    stream = store.ReadEvents(pb.ReadEventsRequest(session_id=session.id, follow=True), timeout=20)
    received: list[pb.SessionEvent] = []

    def read() -> None:
        for event in stream:
            received.append(event)
            if len(received) == 3:
                return

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.3)
    append(store, session.id, user("live one"))
    append(store, session.id, user("live two"))
    reader.join(timeout=15)
    stream.cancel()
    assert [e.version for e in received] == [1, 2, 3]
    assert received[2].entries_appended.entries[0].content[0].text.text == "live two"


# -- durability --------------------------------------------------------------------------


def test_a_restarted_server_serves_the_same_views(database_url: str) -> None:
    first = start_server(database_url, snapshot_interval=5)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{first.port}") as channel:
            store = Stub(channel)
            session = new_session(store, model="gpt-4o")
            ids = three_turns(store, session.id)
            for i in range(10):
                append(store, session.id, user(f"filler {i}"))
            store.RecordCompaction(
                pb.RecordCompactionRequest(
                    session_id=session.id, summary="earlier: read a.txt", first_kept_entry_id=ids[4]
                )
            )
            views = _all_views(store, session.id)
    finally:
        first.stop(0)

    second = start_server(database_url, snapshot_interval=5)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{second.port}") as channel:
            store = Stub(channel)
            assert _all_views(store, session.id) == views
            # And it goes on from where the first left off: the aggregate came
            # back from a snapshot plus the events after it.
            assert append(store, session.id, user("after restart")).version == 16
            snapshots = second.service.store.snapshots
            assert snapshots is not None
            assert [s.originator_version for s in snapshots.get(session.id)] == [5, 10, 15]
    finally:
        second.stop(0)


def _all_views(store: Stub, session_id: str) -> list[bytes]:
    version = store.GetSession(pb.GetSessionRequest(session_id=session_id)).version
    views = []
    for v in range(1, version + 1):
        views.append(
            store.GetDurableLog(
                pb.GetViewRequest(session_id=session_id, version=v)
            ).SerializeToString()
        )
        views.append(
            store.GetPromptView(
                pb.GetPromptViewRequest(session_id=session_id, version=v)
            ).SerializeToString()
        )
    return views


def test_two_servers_on_one_database_never_lose_an_append(database_url: str) -> None:
    servers = [start_server(database_url), start_server(database_url)]
    try:
        channels = [grpc.insecure_channel(f"127.0.0.1:{s.port}") for s in servers]
        stores = [Stub(c) for c in channels]
        session = new_session(stores[0])
        outcomes: list[str] = []

        def client(store: Stub, n: int) -> None:
            for i in range(15):
                while True:
                    current = store.GetSession(pb.GetSessionRequest(session_id=session.id)).version
                    try:
                        append(store, session.id, user(f"{n}-{i}"), expected_version=current)
                        outcomes.append("ok")
                        break
                    except grpc.RpcError as error:
                        assert error.code() == grpc.StatusCode.ABORTED, error.details()
                        outcomes.append("aborted")

        threads = [threading.Thread(target=client, args=(stores[n % 2], n)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for store in stores:
            log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
            assert len(log.entries) == 60
            assert sorted(e.content[0].text.text for e in log.entries) == sorted(
                f"{n}-{i}" for n in range(4) for i in range(15)
            )
        assert outcomes.count("ok") == 60
        for channel in channels:
            channel.close()
    finally:
        for server in servers:
            server.stop(0)


def test_a_server_with_a_stale_copy_of_a_session_still_decides_rightly(database_url: str) -> None:
    """Server A last wrote the session; B wrote since. A must not judge by its old copy."""
    servers = [start_server(database_url), start_server(database_url)]
    try:
        with (
            grpc.insecure_channel(f"127.0.0.1:{servers[0].port}") as channel_a,
            grpc.insecure_channel(f"127.0.0.1:{servers[1].port}") as channel_b,
        ):
            a, b = Stub(channel_a), Stub(channel_b)
            session = new_session(a)
            append(a, session.id, user("start"), idempotency_key="k-start")
            # B makes a tool call that A's cached copy has never seen ...
            append(b, session.id, tool_call("c1", "run", {}), expected_version=2)
            # ... so A must accept its result, and know the version B reached.
            assert append(a, session.id, tool_result("c1", "done"), expected_version=3).version == 4
            assert "version 4" in refused(
                lambda: append(b, session.id, user("late"), expected_version=3),
                grpc.StatusCode.ABORTED,
            )
            # A retry through the other server is still answered from the first append.
            retry = append(b, session.id, user("start"), idempotency_key="k-start")
            assert (retry.version, retry.replayed) == (2, True)
    finally:
        for server in servers:
            server.stop(0)


def test_stopping_the_server_ends_followed_streams_at_once(database_url: str) -> None:
    server = start_server(database_url)
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        store = Stub(channel)
        session = new_session(store)
        stream = store.ReadEvents(pb.ReadEventsRequest(session_id=session.id, follow=True))
        assert next(stream).version == 1
        began = time.monotonic()
        server.stop(grace=10)
        assert time.monotonic() - began < 5
        # Ended UNAVAILABLE, not OK: the follower resumes elsewhere after version 1.
        with pytest.raises(grpc.RpcError) as ended:
            list(stream)
        assert ended.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "after version 1" in (ended.value.details() or "")
