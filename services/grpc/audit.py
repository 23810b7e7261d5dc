"""The audit RPCs and the catalog's filters: requests in, read-model rows out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from domain.errors import InvalidRequest
from domain.pruning import PruneAction
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.adapters.read_model_queries import AuditFilter, CatalogFilter
from services.app.audit import AuditService
from services.grpc import mapping
from services.grpc import request_fields as fields
from services.grpc.rpc_base import RpcBase

RECORD_FIELDS = {f.name for f in pb.CompactionRecord.DESCRIPTOR.fields}
PRUNE_ACTIONS = {
    PruneAction.SOFT_TRIM.value: pb.PRUNE_ACTION_SOFT_TRIM,
    PruneAction.HARD_CLEAR.value: pb.PRUNE_ACTION_HARD_CLEAR,
}


def catalog_filter(request: pb.ListSessionsRequest) -> CatalogFilter:
    return CatalogFilter(
        labels=dict(request.labels),
        model=request.model,
        title_contains=request.title_contains,
        updated_after_us=fields.micros(request, "updated_after"),
        updated_before_us=fields.micros(request, "updated_before"),
        order_by=request.order_by or "created",
    )


def _timestamp(micros: int) -> Any:
    timestamp = Timestamp()
    timestamp.FromMicroseconds(micros)
    return timestamp


def compaction_record(row: Mapping[str, Any]) -> pb.CompactionRecord:
    values = {k: v for k, v in row.items() if k in RECORD_FIELDS}
    return pb.CompactionRecord(**values, timestamp=_timestamp(row["recorded_us"]))


def prune_record(row: Mapping[str, Any]) -> pb.PruneRecord:
    optional = ("head_chars", "tail_chars", "chars_before", "chars_after")
    return pb.PruneRecord(
        session_id=row["session_id"],
        version=row["version"],
        timestamp=_timestamp(row["recorded_us"]),
        entry_id=row["entry_id"],
        action=PRUNE_ACTIONS.get(row["action"], pb.PRUNE_ACTION_UNSPECIFIED),
        reason=row["reason"],
        position=row["position"],
        **{name: row[name] for name in optional if row[name] is not None},
    )


def _action(action: int) -> str:
    if action == pb.PRUNE_ACTION_UNSPECIFIED:
        return ""
    for name, value in PRUNE_ACTIONS.items():
        if value == action:
            return name
    raise InvalidRequest(f"unknown prune action {action}")


class AuditRpcs(RpcBase):
    """ListCompactions, GetCompaction, ListPrunes and GetReadModelStatus, mixed into the
    servicer."""

    audit: AuditService

    def _stream_or_all(self, session_id: str) -> str:
        """The stream of the session a filter names ("": every session)."""
        return self.audit.sessions.ids.stream(session_id) if session_id else ""

    def _record_shown(self, record: Any) -> Any:
        """The record with its session named as the caller names it."""
        record.session_id = self.audit.sessions.ids.client(record.session_id)
        return record

    def ListCompactions(
        self, request: pb.ListCompactionsRequest, context: grpc.ServicerContext
    ) -> pb.ListCompactionsResponse:
        where = AuditFilter(
            session_id=self._stream_or_all(request.session_id),
            since_us=fields.micros(request, "since"),
            until_us=fields.micros(request, "until"),
            trigger=request.trigger,
            model=request.model,
            outcome=request.outcome,
        )
        rows, token, position = self.audit.list_compactions(
            where,
            request.page_size,
            request.page_token,
            request.min_position,
            fields.deadline(context),
        )
        return pb.ListCompactionsResponse(
            compactions=[self._record_shown(compaction_record(r)) for r in rows],
            next_page_token=token,
            position=position,
        )

    def GetCompaction(
        self, request: pb.GetCompactionRequest, context: grpc.ServicerContext
    ) -> pb.GetCompactionResponse:
        if not request.session_id or request.version < 1:
            raise InvalidRequest("session_id and a version of 1 or more are required")
        size, offset = fields.page_size(request), _replaced_offset(request)
        detail = self.audit.get_compaction(
            self._stream_or_all(request.session_id),
            request.version,
            request.min_position,
            fields.deadline(context),
        )
        fields.check_page_offset(offset, len(detail.replaced))
        response = pb.GetCompactionResponse(
            record=self._record_shown(compaction_record(detail.row)),
            in_force=detail.in_force,
            changes=[self._record_shown(compaction_record(r)) for r in detail.changes],
        )
        if detail.compaction is not None:
            response.compaction.CopyFrom(
                mapping.compaction_to_pb(
                    detail.compaction,
                    request.version,
                    mapping.to_datetime(_timestamp(detail.row["recorded_us"])),
                    detail.idempotency_key,
                )
            )
        # Replaced raw entries are as large as they were stored (a guarded tool
        # result whole): together they may outgrow a message.
        next_offset = mapping.fill_page(
            response,
            response.replaced_entries,
            lambda i: mapping.entry_to_pb(*detail.replaced[i]),
            range(offset, len(detail.replaced)),
            size,
            self._page_bytes,
        )
        if next_offset is not None:
            response.next_page_token = f"{request.version}.{next_offset}"
        return response

    def ListPrunes(
        self, request: pb.ListPrunesRequest, context: grpc.ServicerContext
    ) -> pb.ListPrunesResponse:
        where = AuditFilter(
            session_id=self._stream_or_all(request.session_id),
            since_us=fields.micros(request, "since"),
            until_us=fields.micros(request, "until"),
            action=_action(request.action),
        )
        rows, token, position = self.audit.list_prunes(
            where,
            request.page_size,
            request.page_token,
            request.min_position,
            fields.deadline(context),
        )
        return pb.ListPrunesResponse(
            prunes=[self._record_shown(prune_record(r)) for r in rows],
            next_page_token=token,
            position=position,
        )

    def GetReadModelStatus(
        self, request: pb.GetReadModelStatusRequest, context: grpc.ServicerContext
    ) -> pb.ReadModelStatus:
        head, statuses, quarantined = self.audit.read_model_status()
        response = pb.ReadModelStatus(head=head, projections=self.audit.sessions.config.projections)
        for status in statuses:
            state = response.models.add(
                name=status.name,
                position=status.position,
                lag=status.lag,
                quarantined=status.quarantined,
                error=status.error,
                retry_in_seconds=status.retry_in_seconds,
            )
            if status.failing_since is not None:
                state.failing_since.FromMicroseconds(int(status.failing_since * 1_000_000))
        for event in quarantined:
            response.quarantined.add(
                model=event.model,
                position=event.position,
                session_id=self.audit.sessions.ids.client(event.session_id),
                topic=event.topic,
                error=event.error,
                quarantined_at=_timestamp(event.recorded_us),
                attempts=event.attempts,
            )
        return response


def _replaced_offset(request: pb.GetCompactionRequest) -> int:
    """The replaced entry a page starts at: a token names the compaction it pages."""
    if not request.page_token:
        return 0
    version, offset = fields.page_token(request.page_token)
    if version != request.version:
        raise InvalidRequest(fields.FOREIGN_TOKEN.format(field="page_token"))
    return offset
