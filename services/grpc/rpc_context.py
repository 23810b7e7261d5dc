"""The context RPCs: prompt views, compactions and prunes (recorded, asked for,
taken back), overflow reports, the system prompt and the context report."""

from __future__ import annotations

import grpc

from domain.context.overflow import OverflowReport
from domain.errors import InvalidRequest
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.grpc import context_mapping, mapping
from services.grpc import request_fields as fields
from services.grpc.rpc_base import RpcBase


class ContextRpcs(RpcBase):
    def GetPromptView(
        self, request: pb.GetPromptViewRequest, context: grpc.ServicerContext
    ) -> pb.PromptView:
        served = self.context.prompt_view(
            self._session_id(request),
            fields.as_of(request),
            mapping.prompt_format(request.format),
            fields.deadline(context),
            fields.token_budget(request),
            fields.held(request),
        )
        view = context_mapping.served_view_to_pb(served)
        view.session_id = request.session_id
        return view

    def RecordCompaction(
        self, request: pb.RecordCompactionRequest, context: grpc.ServicerContext
    ) -> pb.RecordCompactionResponse:
        written = self.commands.compactions.record_compaction(
            self._session_id(request),
            mapping.compaction_from_pb(request),
            fields.expected_version(request),
        )
        recorded = written.result
        return pb.RecordCompactionResponse(
            version=recorded.originator_version,
            compaction=mapping.compaction_to_pb(
                recorded.compaction,
                recorded.originator_version,
                recorded.timestamp,
                recorded.idempotency_key,
            ),
            position=self._position(written.position),
        )

    def RecordPrune(
        self, request: pb.RecordPruneRequest, context: grpc.ServicerContext
    ) -> pb.RecordPruneResponse:
        written = self.commands.compactions.record_prune(
            self._session_id(request),
            mapping.prune_decisions_from_pb(list(request.entries)),
            request.reason,
            fields.expected_version(request),
            applied_edits_json=request.applied_edits_json,
        )
        recorded = written.result
        return pb.RecordPruneResponse(
            version=recorded.originator_version,
            entries=[mapping.prune_decision_to_pb(d) for d in recorded.decisions],
            position=self._position(written.position),
        )

    def SetSystemPrompt(
        self, request: pb.SetSystemPromptRequest, context: grpc.ServicerContext
    ) -> pb.SetSystemPromptResponse:
        written = self.commands.sessions.set_system_prompt(
            self._session_id(request),
            mapping.system_prompt_from_pb(request.system_prompt),
            fields.expected_version(request),
        )
        stored, changed = written.result
        return pb.SetSystemPromptResponse(
            version=written.session.version,
            system_prompt=mapping.system_prompt_to_pb(stored),
            changed=changed,
            position=self._position(written.position),
        )

    def Compact(
        self, request: pb.CompactRequest, context: grpc.ServicerContext
    ) -> pb.CompactResponse:
        outcome = self.context.compact(
            self._session_id(request),
            instructions=request.instructions,
            force=request.force,
            dry_run=request.dry_run,
            expected_version=fields.expected_version(request),
            idempotency_key=request.idempotency_key,
        )
        response = context_mapping.compaction_outcome_to_pb(outcome)
        # The engine compacts on its runner's thread: the store's head is at or
        # beyond what it wrote.
        response.position = self.service.latest_position()
        return response

    def ReportOverflow(
        self, request: pb.ReportOverflowRequest, context: grpc.ServicerContext
    ) -> pb.PromptView:
        report = OverflowReport(
            provider=request.provider,
            status_code=request.status_code,
            message=request.error_text,
            view_version=request.view_version,
            view_hash=request.view_hash,
            sent_bytes=request.request_bytes,
        )
        served = self.context.report_overflow(
            self._session_id(request),
            report,
            provider_format=mapping.prompt_format(request.format),
            deadline=fields.deadline(context),
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
            redone = self.commands.compactions.redo_compaction(
                session_id,
                request.undo_version,
                request.reason,
                fields.expected_version(request),
                request.requested_by,
            )
            return pb.UndoCompactionResponse(
                version=redone.session.version,
                redone=mapping.compaction_redone_to_pb(redone.result),
                position=self._position(redone.position),
            )
        undone = self.commands.compactions.undo_compaction(
            session_id,
            request.compaction_version,
            request.reason,
            fields.expected_version(request),
            request.requested_by,
        )
        return pb.UndoCompactionResponse(
            version=undone.session.version,
            undone=mapping.compaction_undone_to_pb(undone.result),
            position=self._position(undone.position),
        )
