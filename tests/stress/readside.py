"""The read side under the run: a poison request, a SIGTERM with waiting queries.

The poison is what froze every read model before, for good: NUL in a model
name, a title, a label, an idempotency key. Each server must refuse each with
INVALID_ARGUMENT, and at the end the read models must have caught up with
every event of the run with nothing quarantined.

The SIGTERM comes while queries wait on read models that cannot move (their
tracking rows locked from outside): the server must exit within its grace
period plus one second, and every waiting query end UNAVAILABLE (retry
elsewhere), not at its deadline. The server is then started again and the
load goes on.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass, field

import grpc
import psycopg

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.grpc.server import GRACE_SECONDS
from tests.stress.workload import CHANNEL_OPTIONS, turn_entries
from tests.support.server_process import ServerProcess

WAITERS = 8
WAITER_DEADLINE_SECONDS = 60
CAUGHT_UP_WITHIN_SECONDS = 60


@dataclass
class ReadSideChecks:
    """What the read-side steps found wrong; empty lists when all held."""

    poison: list[str] = field(default_factory=list)
    shutdown: list[str] = field(default_factory=list)
    read_models: list[str] = field(default_factory=list)
    sigterm_exit_seconds: float = 0.0

    def reasons(self) -> list[str]:
        return [*self.poison, *self.shutdown, *self.read_models]


def poison_requests(session_id: str) -> list[tuple[str, object]]:
    nul = "a\x00b"
    return [
        ("CreateSession", pb.CreateSessionRequest(settings=pb.SessionSettings(model=nul))),
        ("CreateSession", pb.CreateSessionRequest(settings=pb.SessionSettings(title=nul))),
        ("CreateSession", pb.CreateSessionRequest(settings=pb.SessionSettings(labels={nul: "v"}))),
        (
            "UpdateSettings",
            pb.UpdateSettingsRequest(session_id=session_id, settings=pb.SessionSettings(title=nul)),
        ),
        (
            "AppendEntries",
            pb.AppendEntriesRequest(
                session_id=session_id, entries=turn_entries("poison", 1), idempotency_key=nul
            ),
        ),
    ]


def send_poison(addresses: list[str], session_id: str, checks: ReadSideChecks) -> None:
    """Every poison request to every server: each must be refused as malformed."""
    for address in addresses:
        with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
            stub = pb_grpc.SessionStoreStub(channel)
            for method, request in poison_requests(session_id):
                try:
                    getattr(stub, method)(request, timeout=10)
                    checks.poison.append(f"poison {method} accepted by {address}")
                except grpc.RpcError as error:
                    if error.code() is not grpc.StatusCode.INVALID_ARGUMENT:
                        checks.poison.append(
                            f"poison {method} on {address}: {error.code().name} {error.details()}"
                        )


def sigterm_with_waiters(server: ServerProcess, database_url: str, checks: ReadSideChecks) -> None:
    """Stalls the read models, lets queries wait on them and SIGTERMs the server."""
    codes: list[str] = []
    with psycopg.connect(database_url) as locker, grpc.insecure_channel(server.address) as channel:
        locker.execute("SELECT * FROM read_model_tracking FOR UPDATE")
        # A write after the lock, so that the listings have something to wait for.
        stub = pb_grpc.SessionStoreStub(channel)
        stub.CreateSession(pb.CreateSessionRequest(), timeout=10)

        def wait() -> None:
            try:
                stub.ListSessions(pb.ListSessionsRequest(), timeout=WAITER_DEADLINE_SECONDS)
                codes.append("OK")
            except grpc.RpcError as error:
                codes.append(error.code().name)

        waiters = [threading.Thread(target=wait) for _ in range(WAITERS)]
        for waiter in waiters:
            waiter.start()
        time.sleep(1.0)
        assert server.process is not None
        sent = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout=GRACE_SECONDS + 10)
        except Exception:
            server.kill()
        checks.sigterm_exit_seconds = time.monotonic() - sent
        for waiter in waiters:
            waiter.join(10)
        locker.rollback()
    if checks.sigterm_exit_seconds > GRACE_SECONDS + 1:
        checks.shutdown.append(
            f"SIGTERM with waiting queries took {checks.sigterm_exit_seconds:.1f} s to exit "
            f"(at most {GRACE_SECONDS + 1} s)"
        )
    if codes != ["UNAVAILABLE"] * WAITERS:
        checks.shutdown.append(f"waiting queries cut by SIGTERM answered {codes}")


def check_read_models(address: str, checks: ReadSideChecks) -> None:
    """The read models reach the store's head, and quarantined nothing."""
    give_up_at = time.monotonic() + CAUGHT_UP_WITHIN_SECONDS
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.SessionStoreStub(channel)
        while True:
            status = stub.GetReadModelStatus(pb.GetReadModelStatusRequest(), timeout=10)
            if all(m.lag == 0 for m in status.models) or time.monotonic() > give_up_at:
                break
            time.sleep(0.2)
    behind = [f"{m.name} {m.lag:,} events behind" for m in status.models if m.lag]
    if behind:
        checks.read_models.append(
            f"read models not caught up {CAUGHT_UP_WITHIN_SECONDS} s after the load: "
            + ", ".join(behind)
        )
    if status.quarantined:
        checks.read_models.append(
            f"read models quarantined {len(status.quarantined)} event(s): "
            + "; ".join(f"{q.model} #{q.position}: {q.error}" for q in status.quarantined[:5])
        )
