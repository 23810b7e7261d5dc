"""The entry RPCs: append (and the view after it), read the log, an entry and the
events, and take entries out of the views (abandon, retract, clear)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol, TypeVar

import grpc

from domain.errors import InvalidRequest
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.app.event_streams import EventStreams
from services.app.queries import AsOf
from services.grpc import context_mapping, mapping
from services.grpc import request_fields as fields
from services.grpc.errors import failure_text
from services.grpc.rpc_base import RpcBase


class _Paged(Protocol):
    """What a paged read pages: a version's entries."""

    @property
    def version(self) -> int: ...

    @property
    def entries(self) -> Sequence[Any]: ...


# As the error layer names the method in its log.
APPEND_METHOD = "/sessionstore.v1.SessionStore/AppendEntries"

P = TypeVar("P", bound=_Paged)
M = TypeVar("M", pb.DurableLog, pb.ViewAudit)


class EntryRpcs(RpcBase):
    streams: EventStreams

    def AppendEntries(
        self, request: pb.AppendEntriesRequest, context: grpc.ServicerContext
    ) -> pb.AppendEntriesResponse:
        drafts = [mapping.entry_from_pb(e, i) for i, e in enumerate(request.entries)]
        session_id = self._session_id(request)
        wanted = request.view_after_append if request.HasField("view_after_append") else None
        held_version = 0
        if wanted is not None:
            # Checked before writing: a bad view request writes nothing.
            held = fields.held(wanted)
            view_args = (
                mapping.prompt_format(wanted.format),
                fields.deadline(context),
                fields.token_budget(wanted),
                held,
            )
            held_version = held[0] if held is not None else 0
        written = self.commands.entries.append(
            session_id,
            drafts,
            expected_version=fields.expected_version(request),
            idempotency_key=request.idempotency_key,
            held_version=held_version,
        )
        result = written.result
        response = pb.AppendEntriesResponse(
            version=result.version,
            entry_ids=[e.id for e in result.entries],
            token_counts=[e.token_count for e in result.entries],
            replayed=result.replayed,
            position=self._position(written.position),
        )
        if wanted is not None:
            try:
                served = self.context.prompt_view(
                    session_id,
                    AsOf(),
                    *view_args,
                    # A replayed append wrote nothing now: its view catches up.
                    just_written=None if result.replayed else result.version,
                )
                view = context_mapping.served_view_to_pb(served)
            except Exception as error:
                # The append stands whatever kept its view from being served (a
                # refusal, the database, a fault of the server's): a failed call
                # would have the client send the written turn again.
                response.view_after_append_error = failure_text(
                    error, APPEND_METHOD, "view after append", self.noticed
                )
            else:
                view.session_id = request.session_id
                response.view_after_append.CopyFrom(view)
        return response

    def GetDurableLog(
        self, request: pb.GetViewRequest, context: grpc.ServicerContext
    ) -> pb.DurableLog:
        return self._page(request, self.service.durable_log, mapping.durable_log_to_pb)

    def AuditView(
        self, request: pb.AuditViewRequest, context: grpc.ServicerContext
    ) -> pb.ViewAudit:
        return self._page(request, self.service.audit_view, mapping.view_audit_to_pb)

    def _page(
        self,
        request: pb.GetViewRequest | pb.AuditViewRequest,
        read: Callable[[str, AsOf], P],
        page_of: Callable[[P, int, int, int], tuple[M, int | None]],
    ) -> M:
        """A page of what ``read`` answers for the request's session, as ``page_of``
        lays it out: the first page as of the request, later ones as of the first."""
        session_id = self._session_id(request)
        as_of, offset = _page_start(request)
        whole = read(session_id, as_of)
        fields.check_page_offset(offset, len(whole.entries))
        message, next_offset = page_of(whole, offset, request.page_size, self._page_bytes)
        if next_offset is not None:
            message.next_page_token = f"{whole.version}.{next_offset}"
        message.session_id = request.session_id
        return message

    def GetEntry(self, request: pb.GetEntryRequest, context: grpc.ServicerContext) -> pb.Entry:
        entry_id = fields.entry_id(request.entry_id, "entry_id")
        entry, version = self.service.entry(self._session_id(request), entry_id)
        return mapping.entry_to_pb(entry, version)

    async def ReadEvents(
        self, request: pb.ReadEventsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[pb.SessionEvent]:
        # Served on the event loop, so that a follower holds no worker thread.
        if request.after_version < 0:
            raise InvalidRequest("after_version must not be negative")
        events = self.streams.read(
            self._session_id(request), request.after_version, follow=request.follow
        )
        async for event in events:
            yield self._event_shown(mapping.event_to_pb(event), request.session_id)

    def _event_shown(self, event: pb.SessionEvent, session_id: str) -> pb.SessionEvent:
        """The event with the session ids it names as the caller names them."""
        event.session_id = session_id
        ids = self.service.ids
        if event.started.parent_session_id:
            event.started.parent_session_id = ids.client(event.started.parent_session_id)
        if event.erasure.erased_with:
            event.erasure.erased_with = ids.client(event.erasure.erased_with)
        return event

    def AbandonToolCalls(
        self, request: pb.AbandonToolCallsRequest, context: grpc.ServicerContext
    ) -> pb.AbandonToolCallsResponse:
        written = self.commands.entries.abandon_tool_calls(
            self._session_id(request),
            list(request.tool_call_ids),
            request.reason,
            fields.expected_version(request),
        )
        version, entry = written.session.version, written.result
        return pb.AbandonToolCallsResponse(
            version=version,
            tool_call_ids=[r.tool_call_id for r in entry.tool_results],
            entry=mapping.entry_to_pb(entry, version),
            position=self._position(written.position),
        )

    def RetractEntry(
        self, request: pb.RetractEntryRequest, context: grpc.ServicerContext
    ) -> pb.RetractEntryResponse:
        written = self.commands.entries.retract_entry(
            self._session_id(request),
            request.entry_id,
            request.reason,
            fields.expected_version(request),
        )
        plan = written.result
        return pb.RetractEntryResponse(
            version=written.session.version,
            entry=mapping.entry_to_pb(plan.entry, plan.appended_at),
            position=self._position(written.position),
        )

    def ClearSession(
        self, request: pb.ClearSessionRequest, context: grpc.ServicerContext
    ) -> pb.ClearSessionResponse:
        written = self.commands.entries.clear_session(
            self._session_id(request), request.reason, fields.expected_version(request)
        )
        return pb.ClearSessionResponse(
            version=written.session.version,
            entries_cleared=written.result,
            position=self._position(written.position),
        )


def _page_start(request: pb.GetViewRequest | pb.AuditViewRequest) -> tuple[AsOf, int]:
    """The version a paged read is of, and the entry its page starts at. Later pages
    are of the first page's version, however the session moved on."""
    fields.page_size(request)  # refused before any reading
    if not request.page_token:
        return fields.as_of(request), 0
    version, offset = fields.page_token(request.page_token)
    return AsOf(version=version), offset
