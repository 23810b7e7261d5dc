"""Two servers racing to use the same entry id: one wins, the other hears why.

Each id is sent by four clients through two servers at once. Exactly one
append per id lands; every other is refused as a duplicate or a version
conflict (both tell the client what to do), never as an internal error.
"""

from __future__ import annotations

import threading

import grpc

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.conftest import start_server
from tests.support.grpc_calls import Stub, append, new_session, user

IDS = 15
CLIENTS = 4


def test_racing_servers_land_each_entry_id_once(database_url: str) -> None:
    servers = [start_server(database_url), start_server(database_url)]
    channels = [grpc.insecure_channel(f"127.0.0.1:{s.port}") for s in servers]
    try:
        stores = [Stub(c) for c in channels]
        session = new_session(stores[0])
        landed: list[str] = []
        refusals: list[grpc.StatusCode] = []
        start = threading.Barrier(CLIENTS)

        def client(store: Stub, n: int) -> None:
            start.wait()
            for i in range(IDS):
                try:
                    append(store, session.id, user(f"{n}", id=f"e{i}"))
                    landed.append(f"e{i}")
                except grpc.RpcError as error:
                    refusals.append(error.code())

        threads = [threading.Thread(target=client, args=(stores[n % 2], n)) for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

        assert sorted(landed) == sorted(f"e{i}" for i in range(IDS))
        assert set(refusals) <= {grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.ABORTED}
        log = stores[1].GetDurableLog(pb.GetViewRequest(session_id=session.id))
        assert sorted(e.id for e in log.entries) == sorted(landed)
    finally:
        for channel in channels:
            channel.close()
        for server in servers:
            server.stop(0)
