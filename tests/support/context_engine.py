"""The calls the context engine's end-to-end tests make over gRPC: sessions made and
read back, agent turns written, overflows reported."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.support.fake_provider import FakeProvider
from tests.support.grpc_calls import Stub, append, new_session, text, tool_call, tool_result, user

CJK = "上下文窗口的管理需要精确地计算词元数量否则压缩会来得太晚。"

# A session of the settings given: the API tests' own, by the name these tests read with.
create = new_session


def view(store: Stub, session_id: str, **fields: object) -> pb.PromptView:
    return store.GetPromptView(pb.GetPromptViewRequest(session_id=session_id, **fields))  # type: ignore[arg-type]


def events(store: Stub, session_id: str) -> list[pb.SessionEvent]:
    return list(store.ReadEvents(pb.ReadEventsRequest(session_id=session_id)))


def of_kind(store: Stub, session_id: str, kind: str) -> list[pb.SessionEvent]:
    return [e for e in events(store, session_id) if e.WhichOneof("event") == kind]


def turn(store: Stub, session_id: str, n: int, output_chars: int) -> None:
    """One agent turn: a question (CJK), a tool call, its large output, an answer."""
    append(store, session_id, user(f"第{n}轮 {CJK * 4} Please read file_{n}.py"))
    append(store, session_id, tool_call(f"call_{n}", "read", {"path": f"src/file_{n}.py"}))
    output = f"# file_{n}.py\n" + "".join(f"line {i}: value = {i * n}\n" for i in range(99_999))
    append(store, session_id, tool_result(f"call_{n}", output[:output_chars]))
    append(store, session_id, text(pb.ROLE_ASSISTANT, f"file_{n}.py holds {n} values."))


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    (detail,) = status.details
    info = error_details_pb2.ErrorInfo()
    assert detail.Unpack(info)
    return info


def session_summarised_by(
    store: Stub, provider: FakeProvider, threshold_ratio: float
) -> pb.Session:
    """A session of a 40,000-token window whose compactions, once over
    ``threshold_ratio`` of it, ask ``provider``'s model for the summary and keep the
    last 4,000 tokens."""
    return create(
        store,
        model="gpt-4o",
        context_window_tokens=40_000,
        compaction=pb.CompactionPolicy(
            threshold_ratio=threshold_ratio,
            keep_recent_tokens=4_000,
            summarizer_model="openai/fake-summarizer",
            summarizer_api_base=provider.openai_base,
            summarizer_window_tokens=128_000,
        ),
    )


def report_overflow(
    store: Stub,
    refused_view: pb.PromptView,
    error_text: str,
    provider: str = "openai",
    *,
    status_code: int = 400,
    request_bytes: int = 0,
) -> pb.PromptView:
    """``refused_view`` reported refused by ``provider`` with ``status_code``, in its
    words ``error_text`` (``request_bytes``: the refused request's size, 0 unsaid)."""
    return store.ReportOverflow(
        pb.ReportOverflowRequest(
            session_id=refused_view.session_id,
            provider=provider,
            status_code=status_code,
            error_text=error_text,
            view_version=refused_view.version,
            view_hash=refused_view.request_hash,
            format=pb.PROMPT_FORMAT_OPENAI,
            request_bytes=request_bytes,
        )
    )
