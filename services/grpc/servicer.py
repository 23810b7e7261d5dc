"""The v1 gRPC servicer: requests in, use cases called, responses out.

No rules live here: the domain decides, errors.py maps refusals to statuses.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc

from domain.content import validate_id
from domain.errors import DomainError, InvalidRequest
from domain.session import Session
from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.app.audit import AuditService
from services.app.context import ContextService
from services.app.event_streams import EventStreams
from services.app.imports import ImportResult, ImportService
from services.app.recall import RecallService
from services.app.sessions import MESSAGE_ENVELOPE_BYTES, AsOf, SessionService
from services.grpc import context_mapping, mapping
from services.grpc.audit import AuditRpcs, catalog_filter
from services.grpc.errors import status_for
from services.grpc.recall import RecallRpcs
from services.readmodels import ReadModels

NO_DEADLINE_SECONDS = 365 * 24 * 3600


_FOREIGN_TOKEN = "{field} is not one this server gave out; send the next_page_token of a page"


def _count(token: str, field: str) -> int:
    """A non-negative int64 written in ASCII digits, as page tokens carry them."""
    if not (token.isascii() and token.isdigit() and len(token) <= 18):
        raise InvalidRequest(_FOREIGN_TOKEN.format(field=field))
    return int(token)


def _log_page_token(token: str) -> tuple[int, int]:
    """A durable log page token: "<version>.<offset>"."""
    version, _, offset = token.partition(".")
    parsed = _count(version, "page_token"), _count(offset, "page_token")
    if parsed[0] < 1:
        raise InvalidRequest(_FOREIGN_TOKEN.format(field="page_token"))
    return parsed


def _entry_id(value: str, field: str) -> str:
    if not value:
        raise InvalidRequest(f"{field} is required")
    validate_id(value, field)
    return value


def _expected_version(request: object) -> int | None:
    return request.expected_version if request.HasField("expected_version") else None  # type: ignore[attr-defined]


def _as_of(request: pb.GetViewRequest | pb.GetPromptViewRequest | pb.AuditViewRequest) -> AsOf:
    which = request.WhichOneof("as_of")
    if which == "version":
        if request.version < 1:
            raise InvalidRequest("version must be 1 or more; leave as_of unset for the latest")
        return AsOf(version=request.version)
    if which == "time":
        return AsOf(time=mapping.to_datetime(request.time, "time"))
    return AsOf()


def _token_budget(request: pb.GetPromptViewRequest | pb.ViewAfterAppend) -> int | None:
    if not request.HasField("token_budget"):
        return None
    if request.token_budget < 1:
        raise InvalidRequest("token_budget must be 1 or more; leave it unset for the session's own")
    return request.token_budget


def _held(request: pb.GetPromptViewRequest | pb.ViewAfterAppend) -> tuple[int, str] | None:
    if not request.HasField("held_version"):
        return None
    if request.held_version < 1 or not request.held_hash:
        raise InvalidRequest(
            "held_version must be 1 or more and come with held_hash, the request_hash of "
            "the view you hold"
        )
    return request.held_version, request.held_hash


def _deadline(context: grpc.ServicerContext) -> float | None:
    """The client's deadline on the time.monotonic() clock, if it set one."""
    remaining = context.time_remaining()
    # Without a deadline gRPC answers a remaining time of centuries.
    if remaining is None or remaining > NO_DEADLINE_SECONDS:
        return None
    return time.monotonic() + remaining


class SessionStoreServicer(AuditRpcs, RecallRpcs, pb_grpc.SessionStoreServicer):
    def __init__(
        self,
        service: SessionService,
        context: ContextService,
        read_models: ReadModels | None = None,
        recall: RecallService | None = None,
    ) -> None:
        self.service = service
        self.context = context
        self.imports = ImportService(service)
        self.audit = AuditService(service, read_models)
        self.streams = EventStreams(service)
        self.recall = recall or RecallService(service, read_models)

    def _session_id(self, request: object) -> str:
        """The stream of the request's session, refused unless the id could name one."""
        session_id: str = getattr(request, "session_id", "")
        if not session_id:
            raise InvalidRequest("session_id is required")
        return self.service.ids.stream(session_id)

    def _new_session_id(self, session_id: str) -> str:
        """The stream a session the caller names is to be created in ("": a new id)."""
        return self.service.ids.stream(session_id) if session_id else ""

    def _shown(self, session: pb.Session) -> pb.Session:
        """The session with its ids as the caller names them."""
        ids = self.service.ids
        session.id = ids.client(session.id)
        if session.parent_session_id:
            session.parent_session_id = ids.client(session.parent_session_id)
        return session

    def _written(self, session: pb.Session) -> pb.Session:
        session.position = self.service.written_position()
        return self._shown(session)

    def CreateSession(
        self, request: pb.CreateSessionRequest, context: grpc.ServicerContext
    ) -> pb.Session:
        session = self.service.create_session(
            self._new_session_id(request.session_id),
            lambda defaults: mapping.settings_from_pb(request.settings, defaults),
        )
        return self._written(mapping.session_to_pb(session))

    def GetSession(
        self, request: pb.GetSessionRequest, context: grpc.ServicerContext
    ) -> pb.Session:
        return self._shown(
            mapping.session_to_pb(self.service.get_session(self._session_id(request)))
        )

    def ListSessions(
        self, request: pb.ListSessionsRequest, context: grpc.ServicerContext
    ) -> pb.ListSessionsResponse:
        sessions, token, position = self.audit.list_sessions(
            catalog_filter(request),
            request.page_size,
            request.page_token,
            request.min_position,
            _deadline(context),
        )
        return pb.ListSessionsResponse(
            sessions=[self._shown(mapping.session_to_pb(s)) for s in sessions],
            next_page_token=token,
            position=position,
        )

    def UpdateSettings(
        self, request: pb.UpdateSettingsRequest, context: grpc.ServicerContext
    ) -> pb.Session:
        session = self.service.update_settings(
            self._session_id(request),
            lambda current: mapping.settings_from_pb(
                request.settings, current, request.remove_labels
            ),
            _expected_version(request),
        )
        return self._written(mapping.session_to_pb(session))

    def AppendEntries(
        self, request: pb.AppendEntriesRequest, context: grpc.ServicerContext
    ) -> pb.AppendEntriesResponse:
        drafts = [mapping.entry_from_pb(e, i) for i, e in enumerate(request.entries)]
        session_id = self._session_id(request)
        wanted = request.view_after_append if request.HasField("view_after_append") else None
        if wanted is not None:
            # Checked before writing: a bad view request writes nothing.
            view_args = (
                mapping.prompt_format(wanted.format),
                _deadline(context),
                _token_budget(wanted),
                _held(wanted),
            )
        result = self.service.append(
            session_id,
            drafts,
            expected_version=_expected_version(request),
            idempotency_key=request.idempotency_key,
        )
        response = pb.AppendEntriesResponse(
            version=result.version,
            entry_ids=[e.id for e in result.entries],
            token_counts=[e.token_count for e in result.entries],
            replayed=result.replayed,
            position=self.service.written_position(),
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
            except DomainError as error:
                # The append stands: say why its view is missing rather than
                # fail a call whose write succeeded.
                code, message = status_for(error)
                response.view_after_append_error = f"{code.name}: {message}"
            else:
                response.view_after_append.CopyFrom(context_mapping.served_view_to_pb(served))
                response.view_after_append.session_id = request.session_id
        return response

    def RecordCompaction(
        self, request: pb.RecordCompactionRequest, context: grpc.ServicerContext
    ) -> pb.RecordCompactionResponse:
        recorded = self.service.record_compaction(
            self._session_id(request),
            mapping.compaction_from_pb(request),
            _expected_version(request),
        )
        return pb.RecordCompactionResponse(
            version=recorded.originator_version,
            compaction=mapping.compaction_to_pb(
                recorded.compaction, recorded.originator_version, recorded.timestamp
            ),
            position=self.service.written_position(),
        )

    def RecordPrune(
        self, request: pb.RecordPruneRequest, context: grpc.ServicerContext
    ) -> pb.RecordPruneResponse:
        recorded = self.service.record_prune(
            self._session_id(request),
            mapping.prune_decisions_from_pb(list(request.entries)),
            request.reason,
            _expected_version(request),
            applied_edits_json=request.applied_edits_json,
        )
        return pb.RecordPruneResponse(
            version=recorded.originator_version,
            entries=[mapping.prune_decision_to_pb(d) for d in recorded.decisions],
            position=self.service.written_position(),
        )

    def GetDurableLog(
        self, request: pb.GetViewRequest, context: grpc.ServicerContext
    ) -> pb.DurableLog:
        session_id = self._session_id(request)
        if request.page_size < 0:
            raise InvalidRequest(
                f"page_size {request.page_size} is negative; send 0 for as many entries as "
                "fit in one message"
            )
        as_of, offset = _as_of(request), 0
        if request.page_token:
            # Later pages are of the first page's version, however the session moved on.
            version, offset = _log_page_token(request.page_token)
            as_of = AsOf(version=version)
        log = self.service.durable_log(session_id, as_of)
        if offset > len(log.entries):
            raise InvalidRequest(_FOREIGN_TOKEN.format(field="page_token"))
        message, next_offset = mapping.durable_log_to_pb(
            log, offset, request.page_size, self._page_bytes
        )
        if next_offset is not None:
            message.next_page_token = f"{log.version}.{next_offset}"
        message.session_id = request.session_id
        return message

    @property
    def _page_bytes(self) -> int:
        return (self.service.config.max_message_mb << 20) - MESSAGE_ENVELOPE_BYTES

    def GetPromptView(
        self, request: pb.GetPromptViewRequest, context: grpc.ServicerContext
    ) -> pb.PromptView:
        served = self.context.prompt_view(
            self._session_id(request),
            _as_of(request),
            mapping.prompt_format(request.format),
            _deadline(context),
            _token_budget(request),
            _held(request),
        )
        view = context_mapping.served_view_to_pb(served)
        view.session_id = request.session_id
        return view

    def SetSystemPrompt(
        self, request: pb.SetSystemPromptRequest, context: grpc.ServicerContext
    ) -> pb.SetSystemPromptResponse:
        version, stored, changed = self.context.set_system_prompt(
            self._session_id(request),
            mapping.system_prompt_from_pb(request.system_prompt),
            _expected_version(request),
        )
        return pb.SetSystemPromptResponse(
            version=version,
            system_prompt=mapping.system_prompt_to_pb(stored),
            changed=changed,
            position=self.service.written_position(),
        )

    def Compact(
        self, request: pb.CompactRequest, context: grpc.ServicerContext
    ) -> pb.CompactResponse:
        outcome = self.context.compact(
            self._session_id(request),
            instructions=request.instructions,
            force=request.force,
            dry_run=request.dry_run,
            expected_version=_expected_version(request),
        )
        response = context_mapping.compaction_outcome_to_pb(outcome)
        response.position = self.service.written_position()
        return response

    def ReportOverflow(
        self, request: pb.ReportOverflowRequest, context: grpc.ServicerContext
    ) -> pb.PromptView:
        served = self.context.report_overflow(
            self._session_id(request),
            error_text=request.error_text,
            status_code=request.status_code,
            provider=request.provider,
            view_version=request.view_version,
            view_hash=request.view_hash,
            provider_format=mapping.prompt_format(request.format),
            deadline=_deadline(context),
        )
        view = context_mapping.served_view_to_pb(served)
        view.session_id = request.session_id
        return view

    def GetContextReport(
        self, request: pb.GetContextReportRequest, context: grpc.ServicerContext
    ) -> pb.ContextReport:
        report = context_mapping.context_report_to_pb(
            self.context.context_report(self._session_id(request))
        )
        report.session_id = request.session_id
        return report

    def AuditView(
        self, request: pb.AuditViewRequest, context: grpc.ServicerContext
    ) -> pb.ViewAudit:
        audit = self.service.audit_view(self._session_id(request), _as_of(request))
        message = mapping.view_audit_to_pb(audit)
        message.session_id = request.session_id
        return message

    def GetEntry(self, request: pb.GetEntryRequest, context: grpc.ServicerContext) -> pb.Entry:
        entry_id = _entry_id(request.entry_id, "entry_id")
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

    def UndoCompaction(
        self, request: pb.UndoCompactionRequest, context: grpc.ServicerContext
    ) -> pb.UndoCompactionResponse:
        session_id = self._session_id(request)
        if request.undo_version < 0 or request.compaction_version < 0:
            raise InvalidRequest(
                "compaction_version and undo_version must not be negative; send the version "
                "of a compaction in force, or of an undo to take back"
            )
        if request.undo_version:
            if request.compaction_version:
                raise InvalidRequest(
                    "send compaction_version (a compaction to take back) or undo_version "
                    "(an undo to take back), not both"
                )
            session, redone = self.service.redo_compaction(
                session_id,
                request.undo_version,
                request.reason,
                _expected_version(request),
                request.requested_by,
            )
            return pb.UndoCompactionResponse(
                version=session.version,
                redone=mapping.compaction_redone_to_pb(redone),
                position=self.service.written_position(),
            )
        session, undone = self.service.undo_compaction(
            session_id,
            request.compaction_version,
            request.reason,
            _expected_version(request),
            request.requested_by,
        )
        return pb.UndoCompactionResponse(
            version=session.version,
            undone=mapping.compaction_undone_to_pb(undone),
            position=self.service.written_position(),
        )

    def EraseSession(
        self, request: pb.EraseSessionRequest, context: grpc.ServicerContext
    ) -> pb.EraseResponse:
        return self._erased(
            *self.service.erase_session(
                self._session_id(request), erased_by=request.erased_by, reason=request.reason
            )
        )

    def EraseEntries(
        self, request: pb.EraseEntriesRequest, context: grpc.ServicerContext
    ) -> pb.EraseResponse:
        return self._erased(
            *self.service.erase_entries(
                self._session_id(request),
                list(request.entry_ids),
                erased_by=request.erased_by,
                reason=request.reason,
            )
        )

    def _erased(
        self,
        session: Session,
        erased: Session.EntriesErased | Session.SessionErased,
        forks: list[str],
    ) -> pb.EraseResponse:
        ids = self.service.ids
        response = pb.EraseResponse(
            version=session.version,
            erasure=mapping.erasure_event_to_pb(erased),
            position=self.service.written_position(),
            forks_erased=[ids.client(fork) for fork in forks],
        )
        if response.erasure.erased_with:
            response.erasure.erased_with = ids.client(response.erasure.erased_with)
        return response

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
        session, entry = self.service.abandon_tool_calls(
            self._session_id(request),
            list(request.tool_call_ids),
            request.reason,
            _expected_version(request),
        )
        return pb.AbandonToolCallsResponse(
            version=session.version,
            tool_call_ids=[r.tool_call_id for r in entry.tool_results],
            entry=mapping.entry_to_pb(entry, session.version),
            position=self.service.written_position(),
        )

    def RetractEntry(
        self, request: pb.RetractEntryRequest, context: grpc.ServicerContext
    ) -> pb.RetractEntryResponse:
        session, plan = self.service.retract_entry(
            self._session_id(request), request.entry_id, request.reason, _expected_version(request)
        )
        return pb.RetractEntryResponse(
            version=session.version,
            entry=mapping.entry_to_pb(plan.entry, plan.appended_at),
            position=self.service.written_position(),
        )

    def ClearSession(
        self, request: pb.ClearSessionRequest, context: grpc.ServicerContext
    ) -> pb.ClearSessionResponse:
        session, cleared = self.service.clear_session(
            self._session_id(request), request.reason, _expected_version(request)
        )
        return pb.ClearSessionResponse(
            version=session.version,
            entries_cleared=cleared,
            position=self.service.written_position(),
        )

    def ForkSession(
        self, request: pb.ForkSessionRequest, context: grpc.ServicerContext
    ) -> pb.Session:
        which = request.WhichOneof("at")
        if which == "version" and request.version < 1:
            raise InvalidRequest("version must be 1 or more; leave it unset to fork now")
        if which == "entry_id" and not request.entry_id:
            raise InvalidRequest("entry_id is empty; name an entry, or leave it unset")
        fork = self.service.fork_session(
            self._session_id(request),
            version=request.version if which == "version" else None,
            entry_id=request.entry_id if which == "entry_id" else "",
            new_session_id=self._new_session_id(request.new_session_id),
            choose=(lambda current: mapping.settings_from_pb(request.settings, current))
            if request.HasField("settings")
            else None,
        )
        return self._written(mapping.session_to_pb(fork))

    def ImportSession(
        self, request_iterator: Iterator[pb.ImportSessionRequest], context: grpc.ServicerContext
    ) -> pb.ImportSessionResponse:
        header: pb.ImportHeader | None = None
        chunks: list[bytes] = []
        for index, part in enumerate(request_iterator):
            which = part.WhichOneof("part")
            if index == 0:
                if which != "header":
                    raise InvalidRequest("the first message of an import must be its header")
                header = part.header
            elif which == "chunk":
                chunks.append(part.chunk)
            else:
                raise InvalidRequest(f"message {index} of the import is a second header")
        if header is None:
            raise InvalidRequest("an import needs a header, then the file's bytes")
        settings = header.settings
        result = self.imports.import_transcript(
            b"".join(chunks),
            header.format,
            session_id=self._new_session_id(header.session_id),
            choose=lambda defaults: mapping.settings_from_pb(settings, defaults),
            file_name=header.file_name,
        )
        response = _import_result_to_pb(result)
        response.position = self.service.written_position()
        for imported in response.sessions:
            imported.session.position = response.position
            self._shown(imported.session)
        return response

    def ExportSession(
        self, request: pb.ExportSessionRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.ExportSessionChunk]:
        if request.version < 0:
            raise InvalidRequest("version must not be negative; 0 or unset exports the latest")
        chunks = self.imports.export_pi(self._session_id(request), request.version or None)
        # The first chunk is made before the stream starts, so a refusal is a status.
        first = next(chunks, None)
        if first is None:
            return
        yield pb.ExportSessionChunk(data=first)
        for chunk in chunks:
            yield pb.ExportSessionChunk(data=chunk)


def _import_result_to_pb(result: ImportResult) -> pb.ImportSessionResponse:
    return pb.ImportSessionResponse(
        format=result.format,
        bytes=result.bytes,
        sessions=[
            pb.ImportedSession(
                session=mapping.session_to_pb(s.session),
                entries=s.entries,
                compactions=s.compactions,
                abandoned_tool_calls=s.abandoned_tool_calls,
                lines=s.lines,
                branch_point_entry_id=s.branch_point_entry_id,
            )
            for s in result.sessions
        ],
    )
