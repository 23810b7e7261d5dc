"""The Recall RPC: a request in, the recall service's hits out."""

from __future__ import annotations

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from domain.errors import InvalidRequest
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.app.recall import RecallHit, RecallQuery, RecallService
from services.grpc.request_fields import deadline, micros


class RecallRpcs:
    """Recall, mixed into the servicer."""

    recall: RecallService

    def Recall(self, request: pb.RecallRequest, context: grpc.ServicerContext) -> pb.RecallResponse:
        ids = self.recall.sessions.ids
        query = RecallQuery(
            query=request.query,
            limit=request.limit,
            tenant_wide=request.tenant_wide,
            labels=dict(request.labels),
            since_us=micros(request, "since"),
            until_us=micros(request, "until"),
            min_position=request.min_position,
        )
        session_id = request.session_id
        if not session_id:
            raise InvalidRequest("session_id is required: the session whose history to search")
        result = self.recall.recall(ids.stream(session_id), query, deadline(context))
        return pb.RecallResponse(
            hits=[_hit(hit, ids.client(hit.session_id)) for hit in result.hits],
            position=result.position,
            embedding_model=result.embedding_model,
        )


def _hit(hit: RecallHit, session_id: str) -> pb.RecallHit:
    timestamp = Timestamp()
    timestamp.FromMicroseconds(hit.recorded_us)
    return pb.RecallHit(
        entry_id=hit.entry_id,
        session_id=session_id,
        version=hit.version,
        score=hit.score,
        snippet=hit.snippet,
        hidden_by_compaction=hit.hidden_by_compaction,
        role=hit.role,
        timestamp=timestamp,
        matched_by=hit.matched_by,
    )
