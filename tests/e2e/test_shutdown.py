"""SIGTERM ends the server within its grace period plus one second, whatever waits.

A server process (as `make run` starts it), under a load of appends, with
queries waiting on read models that will not catch up: no projection at all
(SESSIONSTORE_PROJECTIONS=worker and no worker), or one stalled on a lock.
The waiting queries answer UNAVAILABLE (retry elsewhere) as soon as the
server stops, and the process exits in bounded time. So do followed event
streams, and calls that reach the server once it is stopping.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator

import grpc
import psycopg
from psycopg import sql
from sessionstore_client._methods.events import AsyncEventsMethods, SyncEventsMethods

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.grpc.server import GRACE_SECONDS
from tests.support.grpc_calls import Stub, user
from tests.support.server_process import ServerProcess

WAIT_DEADLINE_SECONDS = 60
WAITERS = 12
# What a stopping server's refusals say.
STOPPING = "the server is stopping; the call was not started"


@contextlib.contextmanager
def serving(database_url: str, **settings: str) -> Iterator[ServerProcess]:
    server = ServerProcess(database_url, **settings)
    server.start()
    try:
        yield server
    finally:
        server.kill()
        server.remove_log()


def waiting_queries(store: Stub) -> list[Callable[[], object]]:
    """Queries of the read models that wait for the store's head."""
    return [
        lambda: store.ListSessions(pb.ListSessionsRequest(), timeout=WAIT_DEADLINE_SECONDS),
        lambda: store.ListCompactions(pb.ListCompactionsRequest(), timeout=WAIT_DEADLINE_SECONDS),
        lambda: store.ListPrunes(pb.ListPrunesRequest(), timeout=WAIT_DEADLINE_SECONDS),
    ]


def sigterm_with_waiters(server: ServerProcess) -> tuple[float, list[grpc.StatusCode]]:
    """Seconds from SIGTERM to the process's exit, and how each waiting query ended."""
    with grpc.insecure_channel(server.address) as channel:
        store = Stub(channel)
        session = store.CreateSession(pb.CreateSessionRequest())
        answers: list[grpc.StatusCode] = []
        stop_load = threading.Event()

        def wait(query: Callable[[], object]) -> None:
            try:
                query()
                answers.append(grpc.StatusCode.OK)
            except grpc.RpcError as error:
                answers.append(error.code())

        def load() -> None:
            while not stop_load.is_set():
                try:
                    store.AppendEntries(
                        pb.AppendEntriesRequest(session_id=session.id, entries=[user("load")]),
                        timeout=5,
                    )
                except grpc.RpcError:
                    return

        queries = waiting_queries(store)
        threads = [
            threading.Thread(target=wait, args=(queries[n % len(queries)],)) for n in range(WAITERS)
        ]
        threads += [threading.Thread(target=load) for _ in range(4)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)  # the queries are waiting, the appends flowing
        assert not answers, f"the queries should still be waiting: {answers}"
        assert server.process is not None
        sent = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=GRACE_SECONDS + 10)
        exited = time.monotonic() - sent
        stop_load.set()
        for thread in threads:
            thread.join(10)
    return exited, answers


def test_sigterm_with_waiters_and_no_projection_exits_at_once(database_url: str) -> None:
    with serving(database_url, projections="worker") as server:
        exited, answers = sigterm_with_waiters(server)
        log = server.log_tail()
    assert exited < GRACE_SECONDS + 1, log
    # Cut, not left to their 60 s deadlines: told to retry elsewhere.
    assert answers == [grpc.StatusCode.UNAVAILABLE] * WAITERS, log
    assert exited < 3, (
        f"waiters were cut, so the stop had nothing to wait for: {exited:.1f} s\n{log}"
    )


def test_sigterm_with_a_stalled_projection_exits_in_bounded_time(
    postgres_schema_url: str,
) -> None:
    """The projection blocked on the read models' tracking rows, which another
    connection holds: the waiting queries are cut, and the stuck projection does
    not hold the exit."""
    base, schema = postgres_schema_url.split("?schema=")
    with (
        serving(postgres_schema_url) as server,
        psycopg.connect(base) as locker,
    ):
        with grpc.insecure_channel(server.address) as channel:
            # The models' tracking rows exist once they applied a first event.
            Stub(channel).CreateSession(pb.CreateSessionRequest())
            Stub(channel).ListSessions(pb.ListSessionsRequest(), timeout=20)
        locker.execute(
            sql.SQL("SELECT * FROM {} FOR UPDATE").format(
                sql.Identifier(schema, "read_model_tracking")
            )
        )
        exited, answers = sigterm_with_waiters(server)
        log = server.log_tail()
        locker.rollback()
    assert exited < GRACE_SECONDS + 1, log
    assert answers == [grpc.StatusCode.UNAVAILABLE] * WAITERS, log


def test_a_cancelled_waiting_query_frees_its_worker(database_url: str) -> None:
    """A client that cancels a waiting query frees the server's worker at once (not
    after the 10 s a query without a deadline may wait)."""
    with (
        serving(database_url, projections="worker", max_workers="2") as server,
        grpc.insecure_channel(server.address) as channel,
    ):
        store = Stub(channel)
        store.CreateSession(pb.CreateSessionRequest())
        for _ in range(3):  # more than the server has workers
            call = store.ListSessions.future(pb.ListSessionsRequest())
            time.sleep(0.3)
            call.cancel()
        # Both workers are free again: a plain call is served at once.
        started = time.monotonic()
        store.CreateSession(pb.CreateSessionRequest(), timeout=5)
        assert time.monotonic() - started < 1


def test_a_sigterm_tells_a_follower_to_resume_elsewhere(database_url: str) -> None:
    """A followed stream has no end of its own: one ended OK would read as complete.
    UNAVAILABLE tells the follower to ask another server for what came after."""
    with serving(database_url) as server, grpc.insecure_channel(server.address) as channel:
        store = Stub(channel)
        session = store.CreateSession(pb.CreateSessionRequest())
        request = pb.ReadEventsRequest(session_id=session.id, follow=True)
        stream = store.ReadEvents(request, timeout=WAIT_DEADLINE_SECONDS)
        assert next(stream).version == 1
        assert server.process is not None
        sent = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        try:
            rest = list(stream)
        except grpc.RpcError as error:
            ended, details = error.code(), error.details() or ""
        else:
            ended, details = grpc.StatusCode.OK, f"ended after {rest}"
        server.process.wait(timeout=GRACE_SECONDS + 10)
        exited = time.monotonic() - sent
        log = server.log_tail()
    assert ended == grpc.StatusCode.UNAVAILABLE, f"{ended.name}: {details}\n{log}"
    assert "after version 1" in details
    assert exited < 3, log


def test_calls_reaching_a_stopping_server_are_refused_unavailable(database_url: str) -> None:
    """From the moment it stops, the server answers a call it has not started
    UNAVAILABLE, which clients retry elsewhere, rather than serving it and then
    leaving gRPC to cancel what it had not handed over when it shuts down.

    Callers without backoff, each on its own connection, call again as soon as
    they are answered, until the server has gone. gRPC itself may still cancel
    the call each had sent as it shut down (the client retries that:
    test_client_server_stop.py)."""
    with serving(database_url) as server:
        with grpc.insecure_channel(server.address) as channel:
            session = Stub(channel).CreateSession(pb.CreateSessionRequest())
        gone = threading.Event()
        answers: list[list[tuple[grpc.StatusCode, str]]] = [[] for _ in range(4)]

        def call(answered: list[tuple[grpc.StatusCode, str]]) -> None:
            with grpc.insecure_channel(server.address) as own:
                store = Stub(own)
                while not gone.is_set():
                    try:
                        store.GetSession(pb.GetSessionRequest(session_id=session.id), timeout=5)
                        answered.append((grpc.StatusCode.OK, ""))
                    except grpc.RpcError as error:
                        answered.append((error.code(), error.details() or ""))

        callers = [threading.Thread(target=call, args=(each,)) for each in answers]
        for caller in callers:
            caller.start()
        time.sleep(0.5)
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=GRACE_SECONDS + 10)
        gone.set()
        for caller in callers:
            caller.join(10)
        log = server.log_tail()
    refusals = [code for each in answers for code, details in each if STOPPING in details]
    assert refusals, f"no call was refused as the server stopped\n{log}"
    assert set(refusals) == {grpc.StatusCode.UNAVAILABLE}, refusals
    for each in answers:
        refused = next((n for n, (_, details) in enumerate(each) if STOPPING in details), None)
        if refused is None:
            continue
        # Refused from then on: nothing more served, whatever the server's going away
        # answered last (a call gRPC cancelled as it shut down, or one sent as the
        # process exited that no one answered before its deadline).
        after = {code for code, _ in each[refused:]}
        assert grpc.StatusCode.OK not in after, log
        gone_codes = {
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.CANCELLED,
            grpc.StatusCode.DEADLINE_EXCEEDED,
        }
        assert after <= gone_codes, after


def test_the_api_tells_a_follower_how_a_stopping_server_ends_its_stream() -> None:
    """Part of the contract, not only of the server: the proto's comment on ReadEvents
    (and the client's docstring generated from it) said nothing of how a followed
    stream ends, so a client written from the proto could not tell a stop from a
    failure, nor where to follow on from."""
    for method in (SyncEventsMethods.read_events, AsyncEventsMethods.read_events):
        said = " ".join((method.__doc__ or "").split())
        assert "a server that stops ends it UNAVAILABLE" in said
        assert "naming the version to follow on from" in said
        assert "read again with that after_version" in said
