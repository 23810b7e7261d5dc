"""Every RPC fed hostile requests, against a real server on SQLite and PostgreSQL.

Requests are built from the proto's own descriptors, so a field added later is
fuzzed too: strings with NUL, huge and wide strings, unrenderable JSON,
integers at and past their limits, enum numbers nobody defined, impossible
times. Whatever comes in, the server must answer with a status that is neither
INTERNAL nor UNKNOWN, within a bounded time (never at a deadline), keep
serving, change nothing on a refusal, and answer every read of every session
after what it accepted: no accepted write may leave a session whose views
are refused.

Seeded and bounded by default, so CI is deterministic and quick; set
SESSIONSTORE_FUZZ_EXAMPLES for a longer run (and SESSIONSTORE_FUZZ_RANDOM=1 for
fresh inputs each run).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.e2e.test_hostile import call_with
from tests.support.grpc_calls import Stub, append, text, tool_result, user

EXAMPLES = int(os.environ.get("SESSIONSTORE_FUZZ_EXAMPLES", "25"))
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=not os.environ.get("SESSIONSTORE_FUZZ_RANDOM"),
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
SERVICE = pb.DESCRIPTOR.services_by_name["SessionStore"]
WRITES = {
    "UpdateSettings",
    "AppendEntries",
    "RecordCompaction",
    "RecordPrune",
    "SetSystemPrompt",
    "Compact",
    "ReportOverflow",
}
BAD_CODES = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}
TIMEOUT_SECONDS = 30
INT64 = (-(1 << 63), (1 << 63) - 1)
INT32 = (-(1 << 31), (1 << 31) - 1)

# -- hostile values ----------------------------------------------------------------------

SPECIAL_TEXT = [
    "",
    "\x00",
    "a\x00b",
    " ",
    "\n\t ",
    "x" * 100_000,
    # A message (or summary) that no window of the default model could hold.
    "word " * 200_000,
    " " * 200_000,
    " \t" * 50_000,
    "é" * 5_000,
    "🙂" * 1_000,
    "١٢",
    "9" * 30,
    "-1",
    "5.1",
    "0.0",
    "../../etc/passwd",
    "%s%n{0}",
    "gpt-4o",
    "prompt is too long: 250000 tokens > 200000 maximum",
    "This model's maximum context length is 128000 tokens. However, your messages resulted "
    "in 130000 tokens.",
]
DEEP = 300
SPECIAL_JSON = [
    "{}",
    '{"path": "a.txt"}',
    "[]",
    "null",
    "not json",
    '{"a": "\\ud800"}',
    '{"a": 123456789012345678901234567890}',
    '{"a": 1e999}',
    '{"a":' + "[" * DEEP + "]" * DEEP + "}",
    '{"a":' + "[" * 100_000 + "]" * 100_000 + "}",
    '{"a": "\\u0000"}',
    '{"type": "object", "properties": {"x": {"type": "string"}}}',
]

# Strings without lone surrogates: protobuf refuses them on the client side
# (bytes that are not UTF-8 are fuzzed raw, below).
plain_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
hostile_text = st.one_of(plain_text, st.sampled_from(SPECIAL_TEXT))
json_text = st.one_of(st.sampled_from(SPECIAL_JSON), plain_text)


def integers(bounds: tuple[int, int]) -> st.SearchStrategy[int]:
    low, high = bounds
    edges = [low, high, -1, 0, 1, 2, high // 2, 1 << 31, (1 << 31) - 1, (1 << 32)]
    return st.one_of(
        st.sampled_from([e for e in edges if low <= e <= high]),
        st.integers(-3, 1_000),
        st.integers(low, high),
    )


INT_BOUNDS = {
    FieldDescriptor.TYPE_INT64: INT64,
    FieldDescriptor.TYPE_SINT64: INT64,
    FieldDescriptor.TYPE_SFIXED64: INT64,
    FieldDescriptor.TYPE_UINT64: (0, (1 << 64) - 1),
    FieldDescriptor.TYPE_FIXED64: (0, (1 << 64) - 1),
    FieldDescriptor.TYPE_INT32: INT32,
    FieldDescriptor.TYPE_SINT32: INT32,
    FieldDescriptor.TYPE_SFIXED32: INT32,
    FieldDescriptor.TYPE_UINT32: (0, (1 << 32) - 1),
    FieldDescriptor.TYPE_FIXED32: (0, (1 << 32) - 1),
}


class Target:
    """A session with a little history, whose ids requests may aim at."""

    def __init__(self, store: Stub) -> None:
        self.session = store.CreateSession(pb.CreateSessionRequest())
        append(store, self.session.id, user("read a.txt please"))
        append(store, self.session.id, call_with("c1", '{"path": "a.txt"}'))
        response = append(store, self.session.id, tool_result("c1", "A" * 3_000))
        append(store, self.session.id, user("and now?"))
        log = store.GetDurableLog(pb.GetViewRequest(session_id=self.session.id))
        self.entry_ids = [e.id for e in log.entries]
        self.result_id = response.entry_ids[0]


def field_value(draw: st.DrawFn, field: FieldDescriptor, target: Target, depth: int) -> Any:
    name = field.name
    if field.type == FieldDescriptor.TYPE_STRING:
        if name == "session_id":
            # Mostly the real session, so requests get past the door.
            return target.session.id if draw(st.integers(0, 5)) else draw(hostile_text)
        if name.endswith("entry_id") or name in ("parent_id", "tool_call_id", "id"):
            known = st.sampled_from([*target.entry_ids, target.result_id, "c1"])
            return draw(st.one_of(known, known, hostile_text))
        if name.endswith("_json"):
            return draw(json_text)
        if name == "summarizer_model":
            return draw(st.sampled_from(["", "offline", "\x00", "m" * 10_000, "no-such-model"]))
        if name == "summarizer_api_base":
            return draw(st.sampled_from(["", "\x00", "not a url", "http://127.0.0.1:1/v1"]))
        if name == "engine":
            return draw(st.sampled_from(["", "layered", "sliding_window", "\x00", "e" * 5_000]))
        return draw(hostile_text)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return draw(st.binary(max_size=64))
    if field.type == FieldDescriptor.TYPE_BOOL:
        if name == "follow":  # a followed stream never ends by itself
            return False
        return draw(st.booleans())
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return draw(
            st.one_of(
                st.floats(allow_nan=True, allow_infinity=True, width=32),
                st.sampled_from([0.0, -1.0, 0.5, 1.0, 2.0, 1e308]),
            )
        )
    if field.type == FieldDescriptor.TYPE_ENUM:
        known = st.sampled_from([v.number for v in field.enum_type.values if v.number])
        return draw(st.one_of(known, known, known, st.integers(-5, 20), st.just(INT32[1])))
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        if field.message_type.full_name == "sessionstore.v1.Entry":
            if draw(st.integers(0, 3)):
                return draw(plausible_entry(target))
            return draw(message_of(field.message_type, target, depth + 1))
        return draw(message_of(field.message_type, target, depth + 1))
    return draw(integers(INT_BOUNDS[field.type]))


@st.composite
def plausible_entry(draw: st.DrawFn, target: Target) -> pb.Entry:
    """An entry a session could take, but for one hostile detail or another."""
    role = draw(st.sampled_from([pb.ROLE_USER, pb.ROLE_ASSISTANT, pb.ROLE_TOOL, pb.ROLE_SYSTEM]))
    words = st.one_of(st.just("hello"), hostile_text)
    if role == pb.ROLE_TOOL:
        block = pb.ContentBlock(
            tool_result=pb.ToolResultBlock(
                tool_call_id=draw(st.sampled_from(["c1", "c2", "\x00", ""])),
                content=draw(words),
            )
        )
    elif role == pb.ROLE_ASSISTANT and draw(st.booleans()):
        block = pb.ContentBlock(
            tool_call=pb.ToolCallBlock(
                id=draw(st.sampled_from(["c1", "c2", "c3", "\x00", "x" * 1_000])),
                name=draw(st.one_of(st.just("read"), hostile_text)),
                arguments_json=draw(json_text),
            )
        )
    else:
        block = pb.ContentBlock(text=pb.TextBlock(text=draw(words)))
    entry = pb.Entry(role=role, content=[block])
    if role == pb.ROLE_ASSISTANT and draw(st.booleans()):
        entry.usage.input_tokens = draw(integers(INT64))
        entry.usage.output_tokens = draw(integers(INT64))
        entry.usage.cache_read_tokens = draw(integers(INT64))
    if draw(st.booleans()):
        entry.id = draw(st.one_of(hostile_text, st.sampled_from(target.entry_ids)))
    if draw(st.booleans()):
        entry.metadata.update(draw(st.dictionaries(hostile_text, hostile_text, max_size=2)))
    if role == pb.ROLE_ASSISTANT and draw(st.booleans()):
        entry.prompt_ref.version = draw(integers(INT64))
        entry.prompt_ref.format = draw(st.integers(0, 3))
        entry.prompt_ref.hash = draw(hostile_text)
    return entry


@st.composite
def message_of(draw: st.DrawFn, descriptor: Descriptor, target: Target, depth: int = 0) -> Message:
    """A message of this type with a hostile selection of its fields set."""
    message = pb_class(descriptor)()
    if descriptor.full_name == "google.protobuf.Timestamp":
        message.seconds = draw(integers(INT64))
        message.nanos = draw(integers(INT32))
        return message
    # One member of each oneof at most: setting several would keep only the last.
    chosen = {
        oneof.name: draw(st.sampled_from([None, *oneof.fields]))
        for oneof in descriptor.oneofs
        if not oneof.name.startswith("_")  # proto3 optional fields: set like others
    }
    for field in descriptor.fields:
        oneof = field.containing_oneof
        if oneof is not None and oneof.name in chosen and chosen[oneof.name] is not field:
            continue
        # Fields are mostly set, so requests get past "x is required"; an expected
        # version mostly not, or nearly every write would be a version conflict.
        if depth > 4 or (field.name != "session_id" and not draw(st.integers(0, 3))):
            continue
        if field.name == "expected_version" and draw(st.integers(0, 3)):
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].type != FieldDescriptor.TYPE_STRING:
                continue
            items = draw(st.dictionaries(hostile_text, hostile_text, max_size=3))
            getattr(message, field.name).update(items)
            continue
        if field.is_repeated:
            count = draw(st.sampled_from([1, 1, 1, 0, 2, 3]))
            values = [field_value(draw, field, target, depth) for _ in range(count)]
            getattr(message, field.name).extend(values)
            continue
        value = field_value(draw, field, target, depth)
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            getattr(message, field.name).CopyFrom(value)
        else:
            setattr(message, field.name, value)
    return message


def pb_class(descriptor: Descriptor) -> Callable[[], Message]:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)


# -- the checks --------------------------------------------------------------------------


def call(channel: grpc.Channel, method: str, request: Message) -> tuple[grpc.StatusCode, str]:
    """The RPC's status code and message (OK and "" when it answered)."""
    descriptor = SERVICE.methods_by_name[method]
    response_class = pb_class(descriptor.output_type)
    path = f"/{SERVICE.full_name}/{method}"
    try:
        if descriptor.server_streaming:
            stream = channel.unary_stream(
                path,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response_class.FromString,  # type: ignore[attr-defined]
            )
            list(stream(request, timeout=TIMEOUT_SECONDS))
        else:
            unary = channel.unary_unary(
                path,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response_class.FromString,  # type: ignore[attr-defined]
            )
            unary(request, timeout=TIMEOUT_SECONDS)
    except grpc.RpcError as error:
        return error.code(), str(error.details())  # type: ignore[attr-defined]
    return grpc.StatusCode.OK, ""


def reads(session_id: str) -> Iterator[tuple[str, Message]]:
    yield "GetSession", pb.GetSessionRequest(session_id=session_id)
    yield "ListSessions", pb.ListSessionsRequest(page_size=500)
    yield "GetDurableLog", pb.GetViewRequest(session_id=session_id)
    for view_format in (pb.PROMPT_FORMAT_OPENAI, pb.PROMPT_FORMAT_ANTHROPIC):
        yield "GetPromptView", pb.GetPromptViewRequest(session_id=session_id, format=view_format)
    yield "GetContextReport", pb.GetContextReportRequest(session_id=session_id)
    yield "ReadEvents", pb.ReadEventsRequest(session_id=session_id)


def version_of(store: Stub, session_id: str) -> int | None:
    try:
        return store.GetSession(pb.GetSessionRequest(session_id=session_id)).version
    except grpc.RpcError:
        return None


def all_sessions(store: Stub) -> list[str]:
    ids, token = [], ""
    while True:
        page = store.ListSessions(pb.ListSessionsRequest(page_size=500, page_token=token))
        ids += [s.id for s in page.sessions]
        token = page.next_page_token
        if not token:
            return ids


def session_count(store: Stub) -> int:
    return len(all_sessions(store))


def still_serving(channel: grpc.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    answer = health.Check(health_pb2.HealthCheckRequest(), timeout=TIMEOUT_SECONDS)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.parametrize("method", list(SERVICE.methods_by_name))
def test_hostile_requests_get_clean_answers(
    channel: grpc.Channel, store: Stub, method: str
) -> None:
    target = Target(store)
    request_type = SERVICE.methods_by_name[method].input_type

    @FUZZ
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        request = data.draw(message_of(request_type, target), label="request")
        session_id = getattr(request, "session_id", "")
        before = version_of(store, session_id) if session_id else None
        sessions_before = session_count(store) if method == "CreateSession" else 0
        code, message = call(channel, method, request)
        event(code.name if code is grpc.StatusCode.OK else f"{code.name}: {message[:60]}")
        assert code not in BAD_CODES, f"{method}: {code.name} {message}"
        assert code is not grpc.StatusCode.DEADLINE_EXCEEDED, f"{method} hung: {message}"
        assert code is not grpc.StatusCode.RESOURCE_EXHAUSTED, f"{method}: {message[:200]}"
        still_serving(channel)
        if code is not grpc.StatusCode.OK:
            assert message, f"{method}: {code.name} without a message"
            if method in WRITES and before is not None:
                assert version_of(store, session_id) == before, f"{method} refused but wrote"
            if method == "CreateSession":
                assert session_count(store) == sessions_before, "refused but created"
        for read, read_request in reads(session_id or target.session.id):
            if version_of(store, getattr(read_request, "session_id", "") or target.session.id):
                read_code, read_message = call(channel, read, read_request)
                assert read_code not in BAD_CODES, (
                    f"{read} after {method} ({code.name}): {read_code.name} {read_message}"
                )

    started = time.monotonic()
    run()
    assert time.monotonic() - started < EXAMPLES * TIMEOUT_SECONDS / 10, "the fuzz took too long"
    refused_views = [
        f"{read} of {session_id}: {read_code.name} {read_message[:200]}"
        for session_id in all_sessions(store)
        for read, read_request in reads(session_id)
        for read_code, read_message in [call(channel, read, read_request)]
        if read_code is not grpc.StatusCode.OK
    ]
    assert not refused_views, "accepted writes left views refused:\n" + "\n".join(refused_views)


@FUZZ
@given(body=st.binary(max_size=200), method=st.sampled_from(list(SERVICE.methods_by_name)))
def test_raw_bytes_get_clean_answers(channel: grpc.Channel, body: bytes, method: str) -> None:
    path = f"/{SERVICE.full_name}/{method}"
    descriptor = SERVICE.methods_by_name[method]
    identity: Callable[[bytes], bytes] = lambda b: b  # noqa: E731
    try:
        if descriptor.server_streaming:
            stream = channel.unary_stream(path, identity, identity)
            list(stream(body, timeout=TIMEOUT_SECONDS))
        else:
            channel.unary_unary(path, identity, identity)(body, timeout=TIMEOUT_SECONDS)
    except grpc.RpcError as error:
        assert error.code() not in BAD_CODES, f"{method}: {error.details()}"  # type: ignore[attr-defined]
    still_serving(channel)


HUGE = "word " * 200_000  # ~200,000 tokens: more than the default model's whole budget


def test_a_message_or_summary_over_the_budget_never_leaves_views_refused(store: Stub) -> None:
    """The fuzzer's rarest find, asked for directly: each write is refused (the budget
    is checked at the write), or its session's views answer afterwards."""
    message = store.CreateSession(pb.CreateSessionRequest())
    summary = store.CreateSession(pb.CreateSessionRequest())
    kept = append(store, summary.id, user("hi"), text(pb.ROLE_ASSISTANT, "hello")).entry_ids[1]
    append(store, summary.id, user("next"))
    writes = [
        lambda: append(store, message.id, user(HUGE)),
        lambda: store.RecordCompaction(
            pb.RecordCompactionRequest(
                session_id=summary.id, summary=HUGE, first_kept_entry_id=kept, tokens_before=2**62
            )
        ),
    ]
    for write, session in zip(writes, (message, summary), strict=True):
        try:
            write()
        except grpc.RpcError:
            continue  # refused at the write: what the budget asks
        store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id))
