"""What every group of RPCs shares: the use cases, and how session ids are shown."""

from __future__ import annotations

from domain.errors import InvalidRequest
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.app.context import ContextService
from services.app.session_rules import MESSAGE_ENVELOPE_BYTES
from services.app.sessions import SessionCommandSet, SessionService
from services.grpc.errors import Noticed


class RpcBase:
    service: SessionService
    commands: SessionCommandSet
    context: ContextService
    # Told what a part of a call that must not fail it failed with (as the error
    # layer is told of each refusal): the database monitor.
    noticed: Noticed

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

    @property
    def _page_bytes(self) -> int:
        """The most a paged answer holds: one message, less its envelope."""
        return (self.service.config.max_message_mb << 20) - MESSAGE_ENVELOPE_BYTES

    def _position(self, written: int | None) -> int:
        """The position a write answers: its own, or (it saved nothing) the store's
        head, which is at or beyond the write it repeats."""
        return written if written is not None else self.service.latest_position()

    def _written(self, session: pb.Session, position: int | None) -> pb.Session:
        session.position = self._position(position)
        return self._shown(session)
