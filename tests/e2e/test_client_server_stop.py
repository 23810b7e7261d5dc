"""The Python client through a server's SIGTERM, as in a rolling deploy: two server
processes on one database, the client given both addresses; one is stopped.

Reads and appends go on on the other server without an error reaching the caller:
the stopping server answers UNAVAILABLE, and what its gRPC cancels as it shuts
down (CANCELLED, which the client did not cause) is retried too. A follower
picks up after its last event. The client's own close() is never retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Iterator

import pytest
from sessionstore_client import AsyncClient, Client, Entry, Retry, Role, TextBlock, errors

from services.grpc.server import GRACE_SECONDS
from tests.support.server_process import ServerProcess

CALLERS = 24
# Enough tries to outlast the stopping server's refusals, found on the other server.
RETRY = Retry(attempts=10, backoff=0.05, max_backoff=0.5)
# Tried again at once, many times: a call is then always under way when the
# stopping server's gRPC shuts down, and its CANCELLED comes every time.
AT_ONCE = Retry(attempts=2_000, backoff=0.001, max_backoff=0.002)


@contextlib.contextmanager
def two_servers(database_url: str, **settings: str) -> Iterator[list[ServerProcess]]:
    servers = [ServerProcess(database_url, **settings) for _ in range(2)]
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.kill()
            server.remove_log()


def both(servers: list[ServerProcess]) -> str:
    """A target naming both servers: the channel moves to the second when the first goes."""
    return "ipv4:" + ",".join(server.address for server in servers)


def sigterm(server: ServerProcess) -> None:
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(timeout=GRACE_SECONDS + 10)


def user(text: str) -> Entry:
    return Entry(role=Role.USER, content=[TextBlock(text)])


def test_reads_and_appends_go_on_through_a_servers_sigterm(database_url: str) -> None:
    with two_servers(database_url) as servers:
        shared = Client(both(servers), retry=AT_ONCE)
        sessions = [shared.create_session().id for _ in range(CALLERS)]
        stop = threading.Event()
        failures: list[errors.SessionStoreError] = []
        appended = [0] * CALLERS

        def call(n: int) -> None:
            # Half share one channel, half have their own: both see the stop.
            client = shared if n % 2 else Client(both(servers), retry=AT_ONCE)
            while not stop.is_set():
                try:
                    client.append_entries(sessions[n], entries=[user(f"{appended[n]}")])
                    appended[n] += 1
                    client.get_session(sessions[n])
                except errors.SessionStoreError as failure:
                    failures.append(failure)
                    return

        callers = [threading.Thread(target=call, args=(n,)) for n in range(CALLERS)]
        for caller in callers:
            caller.start()
        time.sleep(1.0)
        sigterm(servers[0])
        time.sleep(1.0)  # the calls go on on the other server
        stop.set()
        for caller in callers:
            caller.join(30)
        log = servers[0].log_tail()
        assert not failures, f"{failures[:3]}\n{log}"
        # Each acknowledged append landed once: retries sent the same key.
        with Client(servers[1].address) as reader:
            for n, session_id in enumerate(sessions):
                assert reader.get_session(session_id).entry_count == appended[n]
        shared.close()


def test_the_async_clients_reads_go_on_through_a_servers_sigterm(database_url: str) -> None:
    with two_servers(database_url) as servers:

        async def run() -> list[errors.SessionStoreError]:
            failures: list[errors.SessionStoreError] = []
            async with AsyncClient(both(servers), retry=AT_ONCE) as client:
                session = await client.create_session()
                stop = asyncio.Event()

                async def read() -> None:
                    while not stop.is_set():
                        try:
                            await client.get_session(session.id)
                        except errors.SessionStoreError as failure:
                            failures.append(failure)
                            return

                readers = [asyncio.create_task(read()) for _ in range(CALLERS)]
                await asyncio.sleep(1.0)
                await asyncio.to_thread(sigterm, servers[0])
                await asyncio.sleep(1.0)
                stop.set()
                await asyncio.gather(*readers)
            return failures

        failures = asyncio.run(run())
        assert not failures, f"{failures[:3]}\n{servers[0].log_tail()}"


def test_a_follower_goes_on_after_its_last_event_when_its_server_stops(
    database_url: str,
) -> None:
    with (
        two_servers(database_url) as servers,
        Client(both(servers), retry=RETRY) as follower,
        Client(servers[1].address) as writer,
    ):
        session = writer.create_session()
        events = follower.read_events(session.id, follow=True, timeout=30)
        seen = [next(events).version]
        writer.append_entries(session.id, entries=[user("before the stop")])
        seen.append(next(events).version)
        sigterm(servers[0])
        writer.append_entries(session.id, entries=[user("after the stop")])
        seen.append(next(events).version)
        events.close()
    assert seen == [1, 2, 3]


def test_a_call_its_own_close_cancels_is_not_retried(database_url: str) -> None:
    """A listing waits for the read models (none runs here); the client's close()
    cancels it, and that CANCELLED is raised, not tried again on the closed channel
    until the call's timeout."""
    server = ServerProcess(database_url, projections="worker")
    server.start()
    try:
        client = Client(server.address, retry=RETRY, timeout=20)
        client.create_session()
        threading.Timer(0.5, client.close).start()
        began = time.monotonic()
        with pytest.raises(errors.SessionStoreError) as ended:
            client.list_sessions()
        assert ended.value.code.name == "CANCELLED", ended.value
        assert time.monotonic() - began < 5
    finally:
        server.kill()
        server.remove_log()
