"""The transfer RPCs: importing agent transcripts, exporting sessions as pi files."""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from domain.errors import InvalidRequest
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.app.imports import ImportResult, ImportService
from services.grpc import mapping
from services.grpc.rpc_base import RpcBase


class TransferRpcs(RpcBase):
    imports: ImportService

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
        response.position = result.position
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
