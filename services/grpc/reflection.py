"""Server reflection under both names clients ask for: v1 and v1alpha.

grpcio-reflection ships only the v1alpha service, while current grpcurl and
Postman ask for grpc.reflection.v1 first. The two protocols are the same
messages under another package name, identical on the wire, so the v1alpha
servicer answers both.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2

V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"


def enable_reflection(service_names: Sequence[str], server: grpc.aio.Server) -> None:
    names = (*service_names, reflection.SERVICE_NAME, V1_SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    # The asyncio servicer, like the one the library adds for v1alpha.
    servicer = reflection.aio.ReflectionServicer(names)  # type: ignore[attr-defined]
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(V1_SERVICE_NAME, {"ServerReflectionInfo": handler})]
    )
