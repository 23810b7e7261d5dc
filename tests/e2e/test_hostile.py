"""Hostile input: each answered with a status that says what to fix, nothing stored
that a later read cannot serve. Over SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import grpc
import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2, health_pb2_grpc

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from tests.conftest import start_server
from tests.support.grpc_calls import Stub, append, new_session, refused, text, tool_result, user

INT64_MAX = (1 << 63) - 1
INVALID = grpc.StatusCode.INVALID_ARGUMENT


def version_of(store: Stub, session_id: str) -> int:
    return store.GetSession(pb.GetSessionRequest(session_id=session_id)).version


def call_with(call_id: str, arguments_json: str) -> pb.Entry:
    return pb.Entry(
        role=pb.ROLE_ASSISTANT,
        content=[
            pb.ContentBlock(
                tool_call=pb.ToolCallBlock(id=call_id, name="read", arguments_json=arguments_json)
            )
        ],
    )


def all_views_answer(store: Stub, session_id: str) -> None:
    store.GetSession(pb.GetSessionRequest(session_id=session_id))
    store.ListSessions(pb.ListSessionsRequest())
    store.GetDurableLog(pb.GetViewRequest(session_id=session_id))
    for view_format in (pb.PROMPT_FORMAT_OPENAI, pb.PROMPT_FORMAT_ANTHROPIC):
        store.GetPromptView(pb.GetPromptViewRequest(session_id=session_id, format=view_format))
    store.GetContextReport(pb.GetContextReportRequest(session_id=session_id))
    list(store.ReadEvents(pb.ReadEventsRequest(session_id=session_id)))


# -- usage totals -----------------------------------------------------------------------


def test_usage_that_would_overflow_the_running_totals_is_refused(store: Stub) -> None:
    session = new_session(store)
    append(store, session.id, user("hi"))
    huge = pb.Usage(input_tokens=INT64_MAX - 10, output_tokens=1)
    append(store, session.id, text(pb.ROLE_ASSISTANT, "one", usage=huge))
    before = version_of(store, session.id)
    message = refused(
        lambda: append(store, session.id, text(pb.ROLE_ASSISTANT, "two", usage=huge)), INVALID
    )
    assert "usage.input_tokens" in message and "total" in message
    # Within one append, too.
    other = new_session(store)
    refused(
        lambda: append(
            store,
            other.id,
            text(pb.ROLE_ASSISTANT, "a", usage=huge),
            text(pb.ROLE_ASSISTANT, "b", usage=huge),
        ),
        INVALID,
    )
    assert version_of(store, session.id) == before
    all_views_answer(store, session.id)
    total = store.GetSession(pb.GetSessionRequest(session_id=session.id)).total_usage
    assert total.input_tokens == INT64_MAX - 10


# -- tool call arguments and tool schemas ------------------------------------------------

UNRENDERABLE_JSON = {
    "nesting 255 deep": '{"a":' + "[" * 254 + "]" * 254 + "}",
    "a lone surrogate": '{"a": "\\ud800"}',
    "an integer beyond 64 bits": '{"a": 123456789012345678901234567890}',
    "nesting 100,000 deep": '{"a":' + "[" * 100_000 + "]" * 100_000 + "}",
}


@pytest.mark.parametrize("arguments", UNRENDERABLE_JSON.values(), ids=UNRENDERABLE_JSON.keys())
def test_tool_call_arguments_that_cannot_be_rendered_are_refused(
    store: Stub, arguments: str
) -> None:
    session = new_session(store)
    append(store, session.id, user("go"))
    message = refused(lambda: append(store, session.id, call_with("c1", arguments)), INVALID)
    assert "c1" in message and "arguments" in message
    assert version_of(store, session.id) == 2
    all_views_answer(store, session.id)


def test_moderately_nested_arguments_are_kept(store: Stub) -> None:
    session = new_session(store)
    append(store, session.id, user("go"))
    nested = '{"a":' + "[" * 60 + "]" * 60 + ', "n": 18446744073709551615, "u": "\\u00e9"}'
    append(store, session.id, call_with("c1", nested))
    append(store, session.id, tool_result("c1", "ok"))
    all_views_answer(store, session.id)
    sent = json.loads(nested)
    # Kept as sent in the durable log: the nesting, the integer beyond 64 bits, the é.
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    (kept,) = [b.tool_call for e in log.entries for b in e.content if b.tool_call.id == "c1"]
    assert json.loads(kept.arguments_json) == sent
    # And in a prompt view, as the provider is sent them.
    view = store.GetPromptView(
        pb.GetPromptViewRequest(session_id=session.id, format=pb.PROMPT_FORMAT_OPENAI)
    )
    (shown,) = [
        call
        for message in json.loads(view.messages_json)
        for call in message.get("tool_calls") or ()
        if call["id"] == "c1"
    ]
    assert json.loads(shown["function"]["arguments"]) == sent


@pytest.mark.parametrize("schema", UNRENDERABLE_JSON.values(), ids=UNRENDERABLE_JSON.keys())
def test_tool_schemas_that_cannot_be_rendered_are_refused(store: Stub, schema: str) -> None:
    session = new_session(store)
    message = refused(
        lambda: store.SetSystemPrompt(
            pb.SetSystemPromptRequest(
                session_id=session.id,
                system_prompt=pb.SystemPrompt(
                    text="be brief", tools=[pb.Tool(name="read", parameters_json=schema)]
                ),
            )
        ),
        INVALID,
    )
    assert "parameters_json" in message
    assert version_of(store, session.id) == 1
    all_views_answer(store, session.id)


# -- token counting ----------------------------------------------------------------------


@pytest.mark.parametrize("model", ["gpt-4o", "claude-sonnet-4-5"])
def test_long_runs_of_one_character_are_counted(store: Stub, model: str) -> None:
    session = new_session(store, model=model, context_window_tokens=100_000)
    message = refused(lambda: append(store, session.id, user(" " * 1_000_000)), INVALID)
    assert "empty" in message
    # Too large for the model's window: refused as such at append, not failed.
    message = refused(
        lambda: append(store, session.id, user("x" * 1_000_000)),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert "no compaction could ever fit it" in message
    roomy = new_session(store, model=model, context_window_tokens=2_000_000)
    counted = append(store, roomy.id, user("x" * 1_000_000), user("ab " * 300_000))
    assert all(count > 1_000 for count in counted.token_counts)
    prompt = pb.SystemPrompt(
        text="y" * 1_000_000, files=[pb.InjectedFile(path="a", content="\n" * 200_000)]
    )
    store.SetSystemPrompt(pb.SetSystemPromptRequest(session_id=roomy.id, system_prompt=prompt))
    store.GetDurableLog(pb.GetViewRequest(session_id=roomy.id))
    store.GetContextReport(pb.GetContextReportRequest(session_id=roomy.id))
    served = store.GetPromptView(pb.GetPromptViewRequest(session_id=roomy.id))
    assert served.estimated_tokens <= served.budget_tokens


# -- times, enums, tokens ----------------------------------------------------------------

BAD_TIMES = {
    "year 10000": Timestamp(seconds=253_402_300_800),
    "negative nanos": Timestamp(seconds=1, nanos=-1),
    "before year 1": Timestamp(seconds=-62_135_596_801),
}


@pytest.mark.parametrize("stamp", BAD_TIMES.values(), ids=BAD_TIMES.keys())
def test_times_outside_the_range_are_invalid(store: Stub, stamp: Timestamp) -> None:
    session = new_session(store)
    message = refused(lambda: append(store, session.id, user("hi", timestamp=stamp)), INVALID)
    assert "entries[0].timestamp" in message
    append(store, session.id, user("hi"))
    message = refused(
        lambda: store.GetDurableLog(pb.GetViewRequest(session_id=session.id, time=stamp)), INVALID
    )
    assert "time" in message
    message = refused(
        lambda: store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id, time=stamp)),
        INVALID,
    )
    assert "time" in message


def test_unknown_enum_values_name_their_field(store: Stub) -> None:
    session = new_session(store)
    append(store, session.id, user("go"))
    append(store, session.id, call_with("c1", "{}"))
    (result,) = append(store, session.id, tool_result("c1", "x" * 100)).entry_ids
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: append(store, session.id, pb.Entry(role=42)), "entries[0].role 42"),  # type: ignore[arg-type]
        (
            lambda: store.RecordPrune(
                pb.RecordPruneRequest(
                    session_id=session.id,
                    entries=[pb.PrunedEntry(entry_id=result, action=17)],  # type: ignore[arg-type]
                )
            ),
            "entries[0].action 17",
        ),
        (
            lambda: store.GetPromptView(
                pb.GetPromptViewRequest(session_id=session.id, format=-3)  # type: ignore[arg-type]
            ),
            "format -3",
        ),
        (
            lambda: append(
                store,
                session.id,
                text(
                    pb.ROLE_ASSISTANT,
                    "done",
                    prompt_ref=pb.PromptRef(version=1, format=5, hash="h"),  # type: ignore[arg-type]
                ),
            ),
            "entries[0].prompt_ref.format 5",
        ),
        (
            lambda: store.ReportOverflow(
                pb.ReportOverflowRequest(session_id=session.id, error_text="too long", format=9)  # type: ignore[arg-type]
            ),
            "format 9",
        ),
    ]
    for call, named in cases:
        assert named in refused(call, INVALID)
    assert version_of(store, session.id) == 4


def test_a_page_token_beyond_int64_is_invalid(store: Stub) -> None:
    new_session(store)
    for token in ("9" * 30, "-1", "1e9", "١٢"):
        message = refused(
            lambda token=token: store.ListSessions(pb.ListSessionsRequest(page_token=token)),
            INVALID,
        )
        assert "page_token" in message


# -- ids ----------------------------------------------------------------------------------


def session_rpcs(store: Stub, session_id: str) -> Iterator[Callable[[], object]]:
    """Every RPC that takes a session id, called with ``session_id``."""
    yield lambda: store.GetSession(pb.GetSessionRequest(session_id=session_id))
    yield lambda: store.CreateSession(pb.CreateSessionRequest(session_id=session_id))
    yield lambda: store.UpdateSettings(
        pb.UpdateSettingsRequest(session_id=session_id, settings=pb.SessionSettings(title="t"))
    )
    yield lambda: append(store, session_id, user("hi"))
    yield lambda: store.RecordCompaction(
        pb.RecordCompactionRequest(session_id=session_id, summary="s", first_kept_entry_id="e")
    )
    yield lambda: store.RecordPrune(
        pb.RecordPruneRequest(
            session_id=session_id,
            entries=[pb.PrunedEntry(entry_id="e", action=pb.PRUNE_ACTION_HARD_CLEAR)],
        )
    )
    yield lambda: store.GetDurableLog(pb.GetViewRequest(session_id=session_id))
    yield lambda: store.GetPromptView(pb.GetPromptViewRequest(session_id=session_id))
    yield lambda: store.GetEntry(pb.GetEntryRequest(session_id=session_id, entry_id="e"))
    yield lambda: list(store.ReadEvents(pb.ReadEventsRequest(session_id=session_id)))
    yield lambda: store.SetSystemPrompt(
        pb.SetSystemPromptRequest(session_id=session_id, system_prompt=pb.SystemPrompt(text="t"))
    )
    yield lambda: store.Compact(pb.CompactRequest(session_id=session_id, dry_run=True))
    yield lambda: store.ReportOverflow(
        pb.ReportOverflowRequest(session_id=session_id, error_text="too long")
    )
    yield lambda: store.GetContextReport(pb.GetContextReportRequest(session_id=session_id))


@pytest.mark.parametrize(
    "session_id",
    ["a\x00b", "\x00", "x" * 100_000, "é" * 129],
    ids=["nul", "only-nul", "long", "wide"],
)
def test_bad_session_ids_are_invalid_on_every_rpc(store: Stub, session_id: str) -> None:
    for call in session_rpcs(store, session_id):
        message = refused(call, INVALID)
        assert "session" in message and len(message) < 1_000


def test_bad_entry_ids_are_invalid(store: Stub) -> None:
    session = new_session(store)
    (first,) = append(store, session.id, user("go")).entry_ids
    for bad in ("e\x00", "x" * 100_000):
        for entry in (user("hi", id=bad), user("hi", parent_id=bad), call_with(bad, "{}")):
            message = refused(lambda entry=entry: append(store, session.id, entry), INVALID)
            assert len(message) < 1_000
        calls: list[Callable[[], object]] = [
            lambda bad=bad: store.GetEntry(pb.GetEntryRequest(session_id=session.id, entry_id=bad)),
            lambda bad=bad: store.RecordPrune(
                pb.RecordPruneRequest(
                    session_id=session.id,
                    entries=[pb.PrunedEntry(entry_id=bad, action=pb.PRUNE_ACTION_HARD_CLEAR)],
                )
            ),
            lambda bad=bad: store.RecordCompaction(
                pb.RecordCompactionRequest(
                    session_id=session.id, summary="s", first_kept_entry_id=bad
                )
            ),
        ]
        for call in calls:
            message = refused(call, INVALID)
            assert len(message) < 1_000
    assert version_of(store, session.id) == 2
    store.GetEntry(pb.GetEntryRequest(session_id=session.id, entry_id=first))


def test_long_strings_are_quoted_shortened(store: Stub) -> None:
    session = new_session(store)
    key = "k" * 512  # the longest an idempotency key may be
    append(store, session.id, user("one"), idempotency_key=key)
    message = refused(lambda: append(store, session.id, user("two"), idempotency_key=key), INVALID)
    assert "idempotency key" in message and len(message) < 300
    message = refused(
        lambda: append(store, session.id, user("two"), idempotency_key=key * 200), INVALID
    )
    assert message == "idempotency_key is 102,400 characters; send at most 512"
    message = refused(lambda: new_session(store, engine="e" * 100_000), INVALID)
    assert len(message) < 1_000


# -- bytes that are not a request -------------------------------------------------------


def raw_call(channel: grpc.Channel, method: str, body: bytes) -> object:
    call = channel.unary_unary(
        f"/sessionstore.v1.SessionStore/{method}",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    return call(body, timeout=10)


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xff\xff\xff",  # not protobuf
        b"\x0a\x02\xc3\x28",  # field 1 (a string) that is not UTF-8
        b"\x0a\x05ab",  # a string cut short
    ],
    ids=["garbage", "not-utf8", "truncated"],
)
def test_bytes_that_are_not_a_request_are_invalid(channel: grpc.Channel, body: bytes) -> None:
    for method in ("GetSession", "AppendEntries", "GetDurableLog", "SetSystemPrompt"):
        message = refused(lambda method=method: raw_call(channel, method, body), INVALID)
        # A string that is not UTF-8 is named; other bytes are not a request at all.
        assert ("session_id is not UTF-8" if body == b"\x0a\x02\xc3\x28" else "request") in message
    streaming = channel.unary_stream(
        "/sessionstore.v1.SessionStore/ReadEvents",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    refused(lambda: list(streaming(body, timeout=10)), INVALID)
    health = health_pb2_grpc.HealthStub(channel)
    assert (
        health.Check(health_pb2.HealthCheckRequest()).status
        == health_pb2.HealthCheckResponse.SERVING
    )


# -- reading a log larger than one message ----------------------------------------------


def test_a_durable_log_larger_than_one_message_is_read_in_pages(database_url: str) -> None:
    server = start_server(database_url, max_message_mb=1, max_entry_bytes=700_000)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = pb_grpc.SessionStoreStub(channel)
            session = new_session(store, compaction=pb.CompactionPolicy(mode="off"))
            bodies = [chr(ord("a") + i) * 600_000 for i in range(4)]
            for body in bodies:
                append(store, session.id, user(body))
            # The whole log is four times the message limit: it comes in pages.
            seen: list[str] = []
            token = ""
            pages = 0
            while True:
                page = store.GetDurableLog(
                    pb.GetViewRequest(session_id=session.id, page_token=token)
                )
                pages += 1
                seen.extend(e.content[0].text.text for e in page.entries)
                assert page.version == 5 and page.total_tokens > 0
                token = page.next_page_token
                if not token:
                    break
            assert seen == bodies and pages >= 4
            small = store.GetDurableLog(pb.GetViewRequest(session_id=session.id, page_size=1))
            assert len(small.entries) == 1 and small.next_page_token
            rest = store.GetDurableLog(
                pb.GetViewRequest(session_id=session.id, page_token=small.next_page_token)
            )
            assert rest.entries[0].content[0].text.text == bodies[1] and rest.version == 5
            message = refused(
                lambda: store.GetDurableLog(
                    pb.GetViewRequest(session_id=session.id, page_token="nonsense")
                ),
                INVALID,
            )
            assert "page_token" in message
            refused(
                lambda: store.GetDurableLog(pb.GetViewRequest(session_id=session.id, page_size=-1)),
                INVALID,
            )
    finally:
        server.stop(0)


def _prose(seed: int, chars: int) -> str:
    """Words, not one repeated letter: what tokens a real message takes."""
    words = [f"w{seed}x{n % 997}" for n in range(chars // 7)]
    return " ".join(words)[:chars]


def test_a_prompt_view_larger_than_one_message_is_compacted_to_fit(database_url: str) -> None:
    """Appends that each fit a message can make a prompt view that fits none (a window
    of millions of tokens): the engine compacts it within one, as it would one over the
    window, and says so; where it may not (compaction manual) or must not (a replay
    shows what was), the refusal says what to do. Everything stays readable in pages."""
    server = start_server(database_url, max_message_mb=1, max_entry_bytes=700_000)
    window = 10_000_000
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = pb_grpc.SessionStoreStub(channel)
            auto = new_session(store, context_window_tokens=window)
            manual = new_session(
                store, context_window_tokens=window, compaction=pb.CompactionPolicy(mode="manual")
            )
            bodies = [_prose(n, 450_000) for n in range(3)]
            for body in bodies:
                for session in (auto, manual):
                    append(store, session.id, user(body))

            view = store.GetPromptView(pb.GetPromptViewRequest(session_id=auto.id))
            assert view.ByteSize() <= 1 << 20
            (fitted,) = [a for a in view.actions if a.kind == "fitted_to_message"]
            assert "SESSIONSTORE_MAX_MESSAGE_MB" in fitted.detail
            assert bodies[-1] in view.messages_json and bodies[0] not in view.messages_json
            compactions = store.ListCompactions(pb.ListCompactionsRequest(session_id=auto.id))
            assert compactions.compactions
            # Audited as what it was: the message's budget, not the session's threshold.
            assert {c.trigger for c in compactions.compactions} == {"budget"}
            # The compaction is in the log: the next view fits as it is.
            again = store.GetPromptView(pb.GetPromptViewRequest(session_id=auto.id))
            assert not [a for a in again.actions if a.kind == "fitted_to_message"]
            assert again.messages_json == view.messages_json

            message = refused(
                lambda: store.GetPromptView(pb.GetPromptViewRequest(session_id=manual.id)),
                grpc.StatusCode.FAILED_PRECONDITION,
            )
            assert "over the 983,040 one message carries" in message
            assert "SESSIONSTORE_MAX_MESSAGE_MB" in message and "Compact" in message
            message = refused(
                lambda: store.GetPromptView(pb.GetPromptViewRequest(session_id=auto.id, version=4)),
                grpc.StatusCode.FAILED_PRECONDITION,
            )
            assert "a replay shows the view as it was" in message
            for session in (auto, manual):
                seen: list[str] = []
                token = ""
                while True:
                    page = store.GetDurableLog(
                        pb.GetViewRequest(session_id=session.id, page_token=token, version=4)
                    )
                    seen.extend(e.content[0].text.text for e in page.entries)
                    if not (token := page.next_page_token):
                        break
                assert seen == bodies
    finally:
        server.stop(0)


def test_an_export_comes_in_chunks_one_message_can_carry(database_url: str) -> None:
    """An entry whose line, escaped, is larger than a message spans chunks: each chunk
    fits the server's messages, and together they are the file."""
    server = start_server(database_url, max_message_mb=1, max_entry_bytes=700_000)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = pb_grpc.SessionStoreStub(channel)
            session = new_session(store, compaction=pb.CompactionPolicy(mode="off"))
            quoted = 'say "' * 120_000  # 600,000 bytes, some 720,000 once escaped
            bodies = [_prose(n, 300_000) for n in range(3)] + [quoted]
            for body in bodies:
                append(store, session.id, user(body))
            chunks = [
                c.data for c in store.ExportSession(pb.ExportSessionRequest(session_id=session.id))
            ]
            assert len(chunks) >= 2
            assert all(len(c) <= (1 << 20) - (64 << 10) for c in chunks)
            lines = [json.loads(line) for line in b"".join(chunks).decode().splitlines()]
            texts = [
                block["text"]
                for line in lines
                if line.get("type") == "message"
                for block in line["message"]["content"]
            ]
            assert texts == bodies
    finally:
        server.stop(0)


def test_an_append_as_large_as_a_message_is_read_back_whole(database_url: str) -> None:
    """The store adds ids, a time and a token count to every entry: an append of 10,000
    entries that just fits one request comes back as an event almost twice its size,
    which readers of the events (followers, replicas) still receive whole."""
    server = start_server(database_url, max_message_mb=1, max_entry_bytes=700_000)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = pb_grpc.SessionStoreStub(channel)
            session = new_session(store, compaction=pb.CompactionPolicy(mode="off"))
            entries = [user(f"entry {n} " + "x" * 80) for n in range(10_000)]
            request = pb.AppendEntriesRequest(session_id=session.id, entries=entries)
            assert (1 << 20) - request.ByteSize() < 64 << 10  # it just fits
            store.AppendEntries(request)
            (event,) = [
                e
                for e in store.ReadEvents(pb.ReadEventsRequest(session_id=session.id))
                if e.WhichOneof("event") == "entries_appended"
            ]
            assert event.ByteSize() > 1 << 20
            appended = event.entries_appended.entries
            assert [e.content[0].text.text for e in appended] == [
                e.content[0].text.text for e in entries
            ]
            assert all(e.id and e.token_count for e in appended)
    finally:
        server.stop(0)


def test_a_small_durable_log_comes_whole(store: Stub) -> None:
    session = new_session(store)
    append(store, session.id, user("one"), user("two"))
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    assert [e.content[0].text.text for e in log.entries] == ["one", "two"]
    assert not log.next_page_token


# -- settings a view could not work under -----------------------------------------------------


def test_window_guard_thresholds_out_of_order_are_invalid(store: Stub) -> None:
    """A hard minimum over the warning threshold used to be stored, then made every
    view of the session fail."""
    above_default = pb.WindowGuardPolicy(hard_min_tokens=40_000)  # warn_below: 32,000
    message = refused(lambda: new_session(store, window_guard=above_default), INVALID)
    assert "window_guard.hard_min_tokens (40,000)" in message
    session = new_session(store)
    append(store, session.id, user("hello"))
    swapped = pb.WindowGuardPolicy(hard_min_tokens=20_000, warn_below_tokens=10_000)
    message = refused(
        lambda: store.UpdateSettings(
            pb.UpdateSettingsRequest(
                session_id=session.id, settings=pb.SessionSettings(window_guard=swapped)
            )
        ),
        INVALID,
    )
    assert "warn_below_tokens (10,000)" in message
    assert version_of(store, session.id) == 2
    all_views_answer(store, session.id)


def test_a_fork_whose_window_cannot_hold_a_kept_message_is_refused(store: Stub) -> None:
    """As UpdateSettings refuses the same settings: the fork's views would all fail."""
    session = new_session(store)
    append(store, session.id, user("word " * 20_000))
    small = pb.SessionSettings(context_window_tokens=16_384)
    fork = pb.ForkSessionRequest(session_id=session.id, new_session_id="small-fork", settings=small)
    message = refused(lambda: store.ForkSession(fork), grpc.StatusCode.FAILED_PRECONDITION)
    assert "the largest message the prompt keeps needs ~20,005 tokens" in message
    refused(
        lambda: store.GetSession(pb.GetSessionRequest(session_id="small-fork")),
        grpc.StatusCode.NOT_FOUND,
    )
    roomy = pb.ForkSessionRequest(
        session_id=session.id,
        new_session_id="roomy-fork",
        settings=pb.SessionSettings(context_window_tokens=64_000),
    )
    store.ForkSession(roomy)
    all_views_answer(store, "roomy-fork")


# -- transcripts whose fields are not what their format says ----------------------------------

_PI_HEAD = '{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00Z"}\n'
_PI_USER = '{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"hi"}}\n'
_CC_USER = json.dumps(
    {"uuid": "u1", "parentUuid": None, "type": "user", "message": {"role": "user", "content": "hi"}}
)


def _cc_answer(usage: object) -> str:
    message = {"id": "m", "content": "yo", "usage": usage}
    return json.dumps({"uuid": "a1", "parentUuid": "u1", "type": "assistant", "message": message})


def _pi_answer(usage: object) -> str:
    message = {"role": "assistant", "content": [{"type": "text", "text": "yo"}], "usage": usage}
    return json.dumps({"type": "message", "id": "b", "parentId": "a", "message": message})


_DEEP = "[" * 100_000 + "]" * 100_000
MALFORMED_FILES = {
    "nested too deeply": ("openai", _DEEP, "nests JSON too deeply"),
    "tool arguments nested too deeply": (
        "openai",
        json.dumps(
            [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": _DEEP}}],
                },
            ]
        ),
        "the record nests JSON too deeply",
    ),
    "tool_calls a number": (
        "openai",
        json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": 5}]),
        "a field of the record does not have its format's type",
    ),
    "usage a word": (
        "claude-code",
        _CC_USER + "\n" + _cc_answer({"input_tokens": "abc"}),
        "line 2",
    ),
    "usage infinite": (
        "claude-code",
        _CC_USER + "\n" + _cc_answer({"input_tokens": 1e400}),
        "line 2",
    ),
    "usage true": ("pi", _PI_HEAD + _PI_USER + _pi_answer({"input": True}), "line 3: usage.input"),
    "image source a string": (
        "claude-code",
        json.dumps(
            {
                "uuid": "u1",
                "type": "user",
                "message": {"role": "user", "content": [{"type": "image", "source": "abc"}]},
            }
        ),
        "line 1: a field of the record",
    ),
    "tokensBefore beyond int64": (
        "pi",
        _PI_HEAD
        + _PI_USER
        + '{"type":"compaction","id":"k","parentId":"a","summary":"s","firstKeptEntryId":"a",'
        '"tokensBefore":1000000000000000000000000000000}',
        "line 3: tokensBefore",
    ),
    "a time past year 1 in UTC": (
        "pi",
        _PI_HEAD + _PI_USER.replace('"parentId":null', '"timestamp":"0001-01-01T00:00:00+01:00"'),
        "line 2: timestamp '0001-01-01T00:00:00+01:00'",
    ),
    "a time past year 9999 in UTC": (
        "claude-code",
        _CC_USER.replace('"type"', '"timestamp": "9999-12-31T23:59:59-01:00", "type"'),
        "line 1: timestamp",
    ),
}


def _import(store: Stub, file_format: str, data: str) -> object:
    requests = [
        pb.ImportSessionRequest(header=pb.ImportHeader(format=file_format, session_id="imported")),
        pb.ImportSessionRequest(chunk=data.encode()),
    ]
    return store.ImportSession(iter(requests))


@pytest.mark.parametrize(
    ("file_format", "data", "says"), MALFORMED_FILES.values(), ids=MALFORMED_FILES.keys()
)
def test_a_transcript_field_of_another_type_is_refused_with_its_line(
    store: Stub, file_format: str, data: str, says: str
) -> None:
    """Each of these was INTERNAL, and the time past year 1 was stored anyway: from
    then on its session, and every page of ListSessions that held it, failed."""
    message = refused(lambda: _import(store, file_format, data), INVALID)
    assert says in message
    assert not store.ListSessions(pb.ListSessionsRequest()).sessions


def test_an_imported_message_no_window_could_serve_is_refused(store: Stub) -> None:
    """AppendEntries refuses a message over the prompt's budget alone; an import of it
    was stored, and then every view of the session failed."""
    messages = [{"role": "user", "content": "hi"}, {"role": "user", "content": "word " * 20_000}]
    data = "\n".join(json.dumps(m) for m in messages)  # one a line: the line names the message
    small = pb.SessionSettings(context_window_tokens=16_384)

    def imported(settings: pb.SessionSettings) -> object:
        header = pb.ImportHeader(format="openai", session_id="imported", settings=settings)
        requests = [
            pb.ImportSessionRequest(header=header),
            pb.ImportSessionRequest(chunk=data.encode()),
        ]
        return store.ImportSession(iter(requests))

    message = refused(lambda: imported(small), INVALID)
    assert message.startswith("line 2: the entry 'm2' (user) needs ~20,005 tokens")
    assert "context_window_tokens" in message
    assert not store.ListSessions(pb.ListSessionsRequest()).sessions
    imported(pb.SessionSettings(context_window_tokens=64_000))
    all_views_answer(store, "imported")


# -- overflow reports whose figures no model comes near ------------------------------------

HUGE_FIGURES = {
    "past what int() reads": "This model's maximum context length is " + "9" * 5_000 + " tokens.",
    "past 64 bits": (
        "prompt is too long: 9999999999999999999999 tokens > 99999999999999999999 maximum"
    ),
}


@pytest.mark.parametrize("error_text", HUGE_FIGURES.values(), ids=HUGE_FIGURES.keys())
def test_an_overflow_stating_figures_no_model_has_states_nothing(
    store: Stub, error_text: str
) -> None:
    """The first was INTERNAL; the second was stored as a lesson whose counts no event
    could carry, and ReadEvents of the session failed from then on."""
    session = new_session(store)
    append(store, session.id, user("hello " * 200))
    shown = store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id))
    request = pb.ReportOverflowRequest(
        session_id=session.id,
        error_text=error_text,
        status_code=400,
        provider="openai",
        view_version=shown.version,
        view_hash=shown.request_hash,
    )
    try:
        store.ReportOverflow(request)
    except grpc.RpcError as error:
        assert error.code() not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
    all_views_answer(store, session.id)
    lessons = [
        e.overflow_reported.learned_window_tokens
        for e in store.ReadEvents(pb.ReadEventsRequest(session_id=session.id))
        if e.HasField("overflow_reported")
    ]
    # Nothing is read from the figures: the window learned is the one an error stating
    # none teaches, the refused prompt's (~200 tokens) raised to the guard's minimum.
    assert all(window in (0, 16_000) for window in lessons)


# -- tools a provider would refuse -------------------------------------------------------------


def _set_tools(store: Stub, session_id: str, *tools: pb.Tool) -> object:
    prompt = pb.SystemPrompt(text="be brief", tools=tools)
    return store.SetSystemPrompt(
        pb.SetSystemPromptRequest(session_id=session_id, system_prompt=prompt)
    )


@pytest.mark.parametrize("name", ["my tool/with spaces!", "t" * 65, "1st", "read.file"])
def test_a_tool_name_some_provider_refuses_is_invalid(store: Stub, name: str) -> None:
    """It went into every view, which OpenAI, Anthropic or Gemini would refuse."""
    session = new_session(store)
    message = refused(lambda: _set_tools(store, session.id, pb.Tool(name=name)), INVALID)
    assert "is not one every provider takes" in message
    assert version_of(store, session.id) == 1


def test_a_tool_schema_of_another_type_than_object_is_invalid(store: Stub) -> None:
    session = new_session(store)
    message = refused(
        lambda: _set_tools(
            store, session.id, pb.Tool(name="read", parameters_json='{"type": "string"}')
        ),
        INVALID,
    )
    assert "must be a JSON Schema of an object" in message


def test_a_tool_without_a_schema_type_is_sent_as_an_object(store: Stub) -> None:
    """Anthropic refuses an input_schema without "type": "object"."""
    session = new_session(store)
    _set_tools(
        store,
        session.id,
        pb.Tool(name="now"),
        pb.Tool(name="read", parameters_json='{"properties": {"path": {"type": "string"}}}'),
    )
    append(store, session.id, user("what time is it?"))
    view = store.GetPromptView(
        pb.GetPromptViewRequest(session_id=session.id, format=pb.PROMPT_FORMAT_ANTHROPIC)
    )
    schemas = {tool["name"]: tool["input_schema"] for tool in json.loads(view.tools_json)}
    assert schemas == {
        "now": {"type": "object", "properties": {}},
        "read": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
