"""The API's calls as the end-to-end tests make them: entries built, sessions created,
appends made, refusals caught, and a short history of three turns written."""

from __future__ import annotations

import json

import grpc
import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc

Stub = pb_grpc.SessionStoreStub


def text(role: int, body: str, **fields: object) -> pb.Entry:
    return pb.Entry(role=role, content=[pb.ContentBlock(text=pb.TextBlock(text=body))], **fields)  # type: ignore[arg-type]


def user(body: str, **fields: object) -> pb.Entry:
    return text(pb.ROLE_USER, body, **fields)


def tool_call(call_id: str, name: str, arguments: dict[str, object]) -> pb.Entry:
    return pb.Entry(
        role=pb.ROLE_ASSISTANT,
        content=[
            pb.ContentBlock(
                tool_call=pb.ToolCallBlock(
                    id=call_id, name=name, arguments_json=json.dumps(arguments)
                )
            )
        ],
        usage=pb.Usage(input_tokens=120, output_tokens=15, cache_read_tokens=100),
    )


def tool_result(call_id: str, output: str, is_error: bool = False) -> pb.Entry:
    return pb.Entry(
        role=pb.ROLE_TOOL,
        content=[
            pb.ContentBlock(
                tool_result=pb.ToolResultBlock(
                    tool_call_id=call_id, content=output, is_error=is_error
                )
            )
        ],
    )


def append(
    store: Stub, session_id: str, *entries: pb.Entry, **fields: object
) -> pb.AppendEntriesResponse:
    return store.AppendEntries(
        pb.AppendEntriesRequest(session_id=session_id, entries=list(entries), **fields)  # type: ignore[arg-type]
    )


def refused(call: object, code: grpc.StatusCode) -> str:
    """Runs ``call`` and returns the refusal's message, failing unless it has ``code``."""
    with pytest.raises(grpc.RpcError) as raised:
        call()  # type: ignore[operator]
    assert raised.value.code() == code, raised.value.details()
    return str(raised.value.details())


def new_session(store: Stub, **settings: object) -> pb.Session:
    return store.CreateSession(
        pb.CreateSessionRequest(settings=pb.SessionSettings(**settings))  # type: ignore[arg-type]
    )


def three_turns(store: Stub, session_id: str) -> list[str]:
    """A question, a tool call with its 10,000-character result and an answer, and a
    second question: the five entries' ids, in order."""
    ids = list(append(store, session_id, user("Turn one: read a.txt")).entry_ids)
    ids += append(
        store,
        session_id,
        tool_call("c1", "read", {"path": "a.txt"}),
        tool_result("c1", "A" * 10_000),
        text(pb.ROLE_ASSISTANT, "a.txt is all As."),
    ).entry_ids
    ids += append(store, session_id, user("Turn three: and b.txt?")).entry_ids
    return ids
