"""Every string field of every request, refused at the door when no store can hold it.

The fields are walked from the proto's descriptors, so a field added later
is covered the day it is added: each is sent alone with a NUL, with a lone
surrogate (its UTF-8 bytes, which protobuf cannot carry as a string) and one
character over its limit, to a real server on SQLite and on PostgreSQL. Each
must be refused with INVALID_ARGUMENT naming the field, and nothing written.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.app.sessions import MESSAGE_ENVELOPE_BYTES
from services.grpc.request_strings import RequestStrings
from services.grpc.server import RunningServer
from tests.conftest import start_server
from tests.e2e.test_fuzz import SERVICE, pb_class
from tests.e2e.test_transfer import import_bytes
from tests.support.grpc_calls import Stub, refused

MAX_MESSAGE_MB = 1  # keeps the over-long content values small
STRINGS = RequestStrings((MAX_MESSAGE_MB << 20) - MESSAGE_ENVELOPE_BYTES)
# Three bytes the encoder writes as they are, swapped on the wire for the UTF-8
# encoding of the lone surrogate U+D800, which no protobuf library will send.
PLACEHOLDER = "\x01\x02\x03"
INVALID = grpc.StatusCode.INVALID_ARGUMENT
SURROGATE_BYTES = "\ud800".encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class StringField:
    method: str
    # Fields from the request down to the string, and whether it is a map's key.
    chain: tuple[FieldDescriptor, ...]
    map_key: bool = False

    @property
    def limit_name(self) -> str:
        last = self.chain[-1]
        if _is_map(last):
            return f"{last.name}.{'key' if self.map_key else 'value'}"
        return last.name

    @property
    def path(self) -> str:
        """The field's path as the refusal names it (maps: up to the map field)."""
        parts = [f.name + ("[0]" if f.is_repeated and not _is_map(f) else "") for f in self.chain]
        return ".".join(parts)

    def __str__(self) -> str:
        return f"{self.method}:{self.path}{' key' if self.map_key else ''}"


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def string_fields(
    descriptor: Descriptor, chain: tuple[FieldDescriptor, ...] = ()
) -> Iterator[tuple[tuple[FieldDescriptor, ...], bool]]:
    for field in descriptor.fields:
        here = (*chain, field)
        if _is_map(field):
            entry = field.message_type
            if entry.fields_by_name["key"].type == FieldDescriptor.TYPE_STRING:
                yield here, True
            value = entry.fields_by_name["value"]
            if value.type == FieldDescriptor.TYPE_STRING:
                yield here, False
            elif value.type == FieldDescriptor.TYPE_MESSAGE:
                yield from string_fields(value.message_type, here)
        elif field.type == FieldDescriptor.TYPE_STRING:
            yield here, False
        elif field.type == FieldDescriptor.TYPE_MESSAGE and len(chain) < 8:
            yield from string_fields(field.message_type, here)


FIELDS = [
    StringField(method.name, chain, map_key)
    for method in SERVICE.methods
    for chain, map_key in string_fields(method.input_type)
]


def test_the_walk_finds_the_strings_that_matter() -> None:
    found = {str(f) for f in FIELDS}
    for expected in (
        "AppendEntries:idempotency_key",
        "AppendEntries:entries[0].content[0].text.text",
        "AppendEntries:entries[0].metadata key",
        "CreateSession:settings.model",
        "CreateSession:settings.labels",
        "UpdateSettings:settings.compaction.summarizer_model",
        "RecordCompaction:reason",
        "UndoCompaction:requested_by",
        "ImportSession:header.settings.title",
        "SetSystemPrompt:system_prompt.tools[0].parameters_json",
    ):
        assert expected in found
    assert len(FIELDS) > 100


def request_with(field: StringField, value: str) -> Message:
    """The method's request with only this string set (and what holds it)."""
    request = pb_class(SERVICE.methods_by_name[field.method].input_type)()
    holder = request
    for step in field.chain[:-1]:
        if _is_map(step):
            holder = getattr(holder, step.name)["k"]
        elif step.is_repeated:
            holder = getattr(holder, step.name).add()
        else:
            holder = getattr(holder, step.name)
    last = field.chain[-1]
    if _is_map(last):
        items = getattr(holder, last.name)
        if field.map_key:
            items[value] = "v"
        else:
            items["k"] = value
    elif last.is_repeated:
        getattr(holder, last.name).append(value)
    else:
        setattr(holder, last.name, value)
    return request


def send(channel: grpc.Channel, field: StringField, body: bytes) -> tuple[grpc.StatusCode, str]:
    method = SERVICE.methods_by_name[field.method]
    path = f"/{SERVICE.full_name}/{method.name}"
    identity = lambda b: b  # noqa: E731
    try:
        if method.client_streaming:
            channel.stream_unary(path, identity, identity)(iter([body]), timeout=30)
        elif method.server_streaming:
            list(channel.unary_stream(path, identity, identity)(body, timeout=30))
        else:
            channel.unary_unary(path, identity, identity)(body, timeout=30)
    except grpc.RpcError as error:
        return error.code(), str(error.details())  # type: ignore[attr-defined]
    return grpc.StatusCode.OK, ""


@pytest.fixture
def small_server(database_url: str) -> Iterator[RunningServer]:
    running = start_server(database_url, max_message_mb=MAX_MESSAGE_MB)
    yield running
    running.stop(0)


def test_every_request_string_is_refused_naming_its_field(
    small_server: RunningServer, tmp_path: Path
) -> None:
    failures: list[str] = []
    with grpc.insecure_channel(
        f"127.0.0.1:{small_server.port}",
        options=[("grpc.max_send_message_length", 4 << 20)],
    ) as channel:
        position = small_server.service.latest_position()
        for field in FIELDS:
            over = "x" * (STRINGS.limit(field.limit_name) + 1)
            bodies = {
                "NUL": request_with(field, "a\x00b").SerializeToString(),
                "over-long": request_with(field, over).SerializeToString(),
                "lone surrogate": request_with(field, PLACEHOLDER)
                .SerializeToString()
                .replace(PLACEHOLDER.encode(), SURROGATE_BYTES),
            }
            for what, body in bodies.items():
                code, message = send(channel, field, body)
                named = field.path in message and (not field.map_key or "key" in message)
                if code is not grpc.StatusCode.INVALID_ARGUMENT or not named:
                    failures.append(f"{field} with {what}: {code.name} {message[:200]}")
        assert small_server.service.latest_position() == position, "a refused request wrote"
    assert not failures, "\n".join(failures)


def test_an_imported_file_is_held_to_the_same_rule(store: Stub) -> None:
    """Strings that come in a transcript, not in fields, are refused with their line."""
    cases = {
        b'[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a\\u0000b"}]': (
            "line 1: content[0].text 'a\\x00b' contains a NUL character"
        ),
        b'[{"role": "user", "content": "\\ud800"}]': "contains a lone surrogate",
    }
    for data, expected in cases.items():
        message = refused(lambda data=data: import_bytes(store, data, "openai"), INVALID)
        assert expected in message
    assert not store.ListSessions(pb.ListSessionsRequest()).sessions
