"""The v1 gRPC servicer: requests in, use cases called, responses out.

No rules live here: the domain decides, errors.py maps refusals to statuses.
The RPCs are grouped by area, one module each (rpc_sessions, rpc_entries,
rpc_context, rpc_transfer, audit, recall); a new RPC goes with its area. The use
cases come ready-made from the composition root (services.bootstrap).
"""

from __future__ import annotations

from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.app.audit import AuditService
from services.app.context import ContextService
from services.app.event_streams import EventStreams
from services.app.imports import ImportService
from services.app.recall import RecallService
from services.app.sessions import SessionService
from services.grpc.audit import AuditRpcs
from services.grpc.errors import Noticed
from services.grpc.recall import RecallRpcs
from services.grpc.rpc_context import ContextRpcs
from services.grpc.rpc_entries import EntryRpcs
from services.grpc.rpc_sessions import SessionRpcs
from services.grpc.rpc_transfer import TransferRpcs


class SessionStoreServicer(
    SessionRpcs,
    EntryRpcs,
    ContextRpcs,
    TransferRpcs,
    AuditRpcs,
    RecallRpcs,
    pb_grpc.SessionStoreServicer,
):
    def __init__(
        self,
        service: SessionService,
        context: ContextService,
        *,
        imports: ImportService,
        audit: AuditService,
        streams: EventStreams,
        recall: RecallService | None = None,
        noticed: Noticed = lambda _error: None,
    ) -> None:
        self.service = service
        self.commands = service.commands
        self.context = context
        self.imports = imports
        self.audit = audit
        self.streams = streams
        # Without one (no read models), Recall answers that it is not available.
        self.recall = recall or RecallService(service, None)
        # The database monitor, told of the failures a call answers as text.
        self.noticed = noticed
