"""Server reflection under both names clients ask for: v1 and v1alpha.

grpcio-reflection ships only the v1alpha service, while current grpcurl and
Postman ask for grpc.reflection.v1 first. The two protocols are the same
messages under another package name, identical on the wire, so the v1alpha
servicer answers both.

The servicer is made on the first reflection call, not at start: the library
imports protobuf's descriptor_pb2 (some 3 MB of resident memory) to answer,
and reflection is for a person exploring the API with grpcurl, not for the
clients a server spends its life on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
from grpc_reflection.v1alpha import reflection_pb2

V1ALPHA_SERVICE_NAME = reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"].full_name
V1_SERVICE_NAME = "grpc.reflection.v1.ServerReflection"


class _ReflectionOnFirstCall:
    """The library's asyncio servicer, made when first asked for."""

    def __init__(self, service_names: Sequence[str]) -> None:
        self._names = tuple(service_names)
        self._servicer: Any = None

    async def info(
        self, requests: AsyncIterator[reflection_pb2.ServerReflectionRequest], context: Any
    ) -> AsyncIterator[reflection_pb2.ServerReflectionResponse]:
        if self._servicer is None:
            # Lazy: see the module's docstring.
            from grpc_reflection.v1alpha import reflection

            self._servicer = reflection.aio.ReflectionServicer(self._names)  # type: ignore[attr-defined]
        async for response in self._servicer.ServerReflectionInfo(requests, context):
            yield response


def enable_reflection(service_names: Sequence[str], server: grpc.aio.Server) -> None:
    names = (*service_names, V1ALPHA_SERVICE_NAME, V1_SERVICE_NAME)
    servicer = _ReflectionOnFirstCall(names)
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.info,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(name, {"ServerReflectionInfo": handler})
            for name in (V1ALPHA_SERVICE_NAME, V1_SERVICE_NAME)
        ]
    )
