"""Paging ListSessions while two server processes create sessions never misses one.

Sessions are listed by the notification id of their creation. If ids could
commit out of order, a paging that passed an id before its session committed
would never see that session. The rule checked here, for every paging: a
session whose creation was acknowledged before one of the paging's pages was
requested appears in that paging.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from tests.e2e.test_quarantine import reason_of
from tests.e2e.test_server_process import _free_port, _wait_until_serving

CREATE_SECONDS = 3.0
CREATORS_PER_SERVER = 3
PAGE_SIZE = 3


@pytest.fixture
def two_servers(database_url: str, tmp_path: Path) -> Iterator[list[str]]:
    addresses = [f"127.0.0.1:{_free_port()}" for _ in range(2)]
    processes = []
    for n, address in enumerate(addresses):
        env = {
            **os.environ,
            "SESSIONSTORE_ADDRESS": address,
            "SESSIONSTORE_DATABASE_URL": database_url,
        }
        with open(tmp_path / f"server{n}.log", "wb") as log:
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "services.grpc.server"], env=env, stderr=log
                )
            )
        # One at a time: both would otherwise create the tables at once.
        _wait_until_serving(address)
    try:
        yield addresses
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)


def _paging(store: pb_grpc.SessionStoreStub) -> tuple[list[str], float]:
    """Every session one paging saw, and when its last page was requested."""
    seen: list[str] = []
    token = ""
    while True:
        requested = time.monotonic()
        try:
            page = store.ListSessions(pb.ListSessionsRequest(page_size=PAGE_SIZE, page_token=token))
        except grpc.RpcError as error:
            # The catalog did not reach the store's head in time: on a loaded
            # machine six creators can outrun the projection for a while. The
            # refusal says to retry, as a client would; the page is asked again.
            if reason_of(error) != "read_models_behind":
                raise
            continue
        seen.extend(s.id for s in page.sessions)
        token = page.next_page_token
        if not token:
            return seen, requested


def test_a_paging_misses_no_session_created_while_it_ran(two_servers: list[str]) -> None:
    acknowledged: dict[str, float] = {}
    stop = threading.Event()
    failures: list[BaseException] = []

    def create(address: str, creator: int) -> None:
        with grpc.insecure_channel(address) as channel:
            store = pb_grpc.SessionStoreStub(channel)
            n = 0
            while not stop.is_set():
                session_id = f"{address.rsplit(':', 1)[1]}-{creator}-{n}"
                try:
                    store.CreateSession(pb.CreateSessionRequest(session_id=session_id))
                except BaseException as error:
                    failures.append(error)
                    return
                acknowledged[session_id] = time.monotonic()
                n += 1

    creators = [
        threading.Thread(target=create, args=(address, c))
        for address in two_servers
        for c in range(CREATORS_PER_SERVER)
    ]
    for creator in creators:
        creator.start()
    # A paging ends only once it catches up with the creators.
    timer = threading.Timer(CREATE_SECONDS, stop.set)
    timer.start()
    pagings: list[tuple[list[str], float]] = []
    with grpc.insecure_channel(two_servers[0]) as channel:
        reader = pb_grpc.SessionStoreStub(channel)
        while not stop.is_set():
            pagings.append(_paging(reader))
        for creator in creators:
            creator.join()
        pagings.append(_paging(reader))

    assert not failures, failures[0]
    assert len(pagings) >= 2 and len(acknowledged) > 50
    for seen, last_request in pagings:
        assert len(seen) == len(set(seen)), "a paging listed a session twice"
        due = {s for s, at in acknowledged.items() if at < last_request}
        missed = due - set(seen)
        assert not missed, f"a paging missed {len(missed)} acknowledged sessions"
    assert set(pagings[-1][0]) == set(acknowledged)
