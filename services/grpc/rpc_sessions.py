"""The session RPCs: create, read, list, change settings, fork and erase."""

from __future__ import annotations

from typing import Any

import grpc

from domain.errors import InvalidRequest
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.app.audit import AuditService
from services.app.commands.erasure import Erased
from services.grpc import mapping
from services.grpc import request_fields as fields
from services.grpc.audit import catalog_filter
from services.grpc.rpc_base import RpcBase


class SessionRpcs(RpcBase):
    audit: AuditService

    def CreateSession(
        self, request: pb.CreateSessionRequest, context: grpc.ServicerContext
    ) -> pb.Session:
        written = self.commands.sessions.create_session(
            self._new_session_id(request.session_id),
            lambda defaults: mapping.settings_from_pb(request.settings, defaults),
        )
        return self._written(mapping.session_to_pb(written.session), written.position)

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
            fields.deadline(context),
        )
        return pb.ListSessionsResponse(
            sessions=[self._shown(mapping.session_to_pb(s)) for s in sessions],
            next_page_token=token,
            position=position,
        )

    def UpdateSettings(
        self, request: pb.UpdateSettingsRequest, context: grpc.ServicerContext
    ) -> pb.Session:
        written = self.commands.sessions.update_settings(
            self._session_id(request),
            lambda current: mapping.settings_from_pb(
                request.settings, current, request.remove_labels
            ),
            fields.expected_version(request),
            sets_window=request.settings.context_window_tokens > 0,
            forget_learned_limits=request.forget_learned_limits,
        )
        return self._written(mapping.session_to_pb(written.session), written.position)

    def ForkSession(
        self, request: pb.ForkSessionRequest, context: grpc.ServicerContext
    ) -> pb.Session:
        which = request.WhichOneof("at")
        if which == "version" and request.version < 1:
            raise InvalidRequest("version must be 1 or more; leave it unset to fork now")
        if which == "entry_id" and not request.entry_id:
            raise InvalidRequest("entry_id is empty; name an entry, or leave it unset")
        fork = self.commands.forks.fork_session(
            self._session_id(request),
            version=request.version if which == "version" else None,
            entry_id=request.entry_id if which == "entry_id" else "",
            new_session_id=self._new_session_id(request.new_session_id),
            choose=(lambda current: mapping.settings_from_pb(request.settings, current))
            if request.HasField("settings")
            else None,
            sets_window=request.settings.context_window_tokens > 0,
        )
        return self._written(mapping.session_to_pb(fork.session), fork.position)

    def EraseSession(
        self, request: pb.EraseSessionRequest, context: grpc.ServicerContext
    ) -> pb.EraseResponse:
        return self._erased(
            self.commands.erasure.erase_session(
                self._session_id(request), erased_by=request.erased_by, reason=request.reason
            )
        )

    def EraseEntries(
        self, request: pb.EraseEntriesRequest, context: grpc.ServicerContext
    ) -> pb.EraseResponse:
        return self._erased(
            self.commands.erasure.erase_entries(
                self._session_id(request),
                list(request.entry_ids),
                erased_by=request.erased_by,
                reason=request.reason,
            )
        )

    def _erased(self, erased: Erased[Any]) -> pb.EraseResponse:
        ids = self.service.ids
        response = pb.EraseResponse(
            version=erased.session.version,
            erasure=mapping.erasure_event_to_pb(erased.event),
            position=self._position(erased.position),
            forks_erased=[ids.client(fork) for fork in erased.forks],
        )
        if response.erasure.erased_with:
            response.erasure.erased_with = ids.client(response.erasure.erased_with)
        return response
