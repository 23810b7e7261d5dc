"""The clients: appends with idempotency keys, retried on another server until answered.

Each client appends turns of one to three entries, mostly to sessions of its
own and sometimes to a few sessions every client shares. Each append carries
an idempotency key, so a retry of an append whose answer was lost (the server
was killed, the database went away after the commit) is answered from the
first one instead of writing it twice. Every entry's text names its append and
its place in it ("c3-a17/1/3": client 3's append 17, entry 1 of 3), so the
stored stream can be checked against what the clients were told.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context

import grpc

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from tests.stress.config import StressConfig

# What a client retries, on the next server: the server or its database is away
# for now, or the answer did not come in time (the append may have landed: the
# retry's idempotency key finds it).
RETRYABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
# A stream the transport reset (HTTP/2 RST_STREAM) as a server went away: gRPC
# answers CANCELLED, though no one cancelled the call. gRPC's own stop also
# answers CANCELLED for a call still running when a stopping server ends. The
# append may have landed either way, so it is retried like UNAVAILABLE; the
# report accepts a plain CANCELLED only at a server's stop (report.judge).
RESET_STREAM = "RST_STREAM"


def is_retryable(error: grpc.RpcError) -> bool:
    return error.code() in RETRYABLE or error.code() == grpc.StatusCode.CANCELLED


def code_name(error: grpc.RpcError) -> str:
    """The status as counted: a transport's reset stream apart from a real CANCELLED."""
    if error.code() == grpc.StatusCode.CANCELLED and RESET_STREAM in (error.details() or ""):
        return "CANCELLED (stream reset)"
    return str(error.code().name)


CALL_TIMEOUT_SECONDS = 5.0
FIRST_BACKOFF_SECONDS = 0.02
MAX_BACKOFF_SECONDS = 0.5
# A killed server comes back within seconds: find it again soon, not after
# gRPC's default reconnect backoff of up to two minutes.
CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 500),
    ("grpc.max_receive_message_length", 64 << 20),
]
ROLES = (pb.ROLE_USER, pb.ROLE_ASSISTANT, pb.ROLE_ASSISTANT)
TURN_SIZES = (1, 1, 2, 3)
# Share of acknowledged appends sent once more, to another server, as a client
# does whose answer got lost: each must be answered as a replay of the first.
RESEND_RATIO = 0.02
# Share of appends whose first attempt waits only briefly: some of those land
# and time out before the answer arrives, so their retry must find the first.
IMPATIENT_RATIO = 0.05
IMPATIENT_TIMEOUT_SECONDS = 0.05
# Time for the client processes to start (each imports gRPC) before the load begins.
CLIENT_START_SECONDS = 4.0
# Far beyond what the run writes: the context engine never compacts, so every
# event is an append the clients made.
WINDOW_TOKENS = 10_000_000


def entry_text(key: str, index: int, size: int) -> str:
    return f"{key}/{index}/{size}"


def turn_entries(key: str, size: int) -> list[pb.Entry]:
    return [
        pb.Entry(
            role=ROLES[index],
            content=[pb.ContentBlock(text=pb.TextBlock(text=entry_text(key, index, size)))],
        )
        for index in range(size)
    ]


def own_session_ids(run: str, client: int, count: int) -> list[str]:
    return [f"stress-{run}-c{client}-own{k}" for k in range(count)]


def shared_session_ids(run: str, count: int) -> list[str]:
    return [f"stress-{run}-shared{k}" for k in range(count)]


@dataclass(frozen=True)
class Outcome:
    """One append as its client last knew it."""

    key: str
    session_id: str
    size: int
    # "acknowledged", "refused" (a status not worth retrying) or "unresolved"
    # (still unanswered when the drain time ran out).
    state: str
    version: int = 0
    entry_ids: tuple[str, ...] = ()
    replayed: bool = False
    attempts: int = 0
    # Wall-clock time of the acknowledgement.
    at: float = 0.0
    refusal: str = ""


@dataclass
class WorkerPlan:
    """What one client process does: its clients' numbers, where, and until when."""

    run: str
    addresses: list[str]
    clients: list[int]
    own_sessions: int
    shared_sessions: int
    shared_ratio: float
    seed: int
    # Wall-clock times: the first append at start_at (once every process is up),
    # no new one after stop_at, no retry after give_up_at.
    start_at: float
    stop_at: float
    give_up_at: float
    # A gRPC service config for the clients' channels (one per address), e.g.
    # round robin over the addresses of one target.
    service_config: str = ""


@dataclass
class WorkerResult:
    outcomes: list[Outcome] = field(default_factory=list)
    codes: Counter[str] = field(default_factory=Counter)
    resends: int = 0
    # The first details of each status no append should answer, with its time.
    odd_answers: dict[str, str] = field(default_factory=dict)
    # When each plain CANCELLED came (time.time()).
    cancelled_at: list[float] = field(default_factory=list)
    # Resent appends not answered as a replay of the first, saying how.
    resend_failures: list[str] = field(default_factory=list)


class Client:
    """One client: a thread that appends until stop_at, each append until answered."""

    def __init__(self, number: int, stubs: list[pb_grpc.SessionStoreStub], plan: WorkerPlan):
        self.number = number
        self.stubs = stubs
        self.plan = plan
        self.random = random.Random(plan.seed * 100_003 + number)
        self.own = own_session_ids(plan.run, number, plan.own_sessions)
        self.shared = shared_session_ids(plan.run, plan.shared_sessions)
        # Clients start spread over the servers and move on when one fails them.
        self.server = number % len(stubs)
        self.result = WorkerResult()

    def run(self) -> None:
        appended = 0
        time.sleep(max(0.0, self.plan.start_at - time.time()))
        while time.time() < self.plan.stop_at:
            shared = self.shared and self.random.random() < self.plan.shared_ratio
            session = self.random.choice(self.shared if shared else self.own)
            key = f"c{self.number}-a{appended}"
            appended += 1
            self.result.outcomes.append(self.append(key, session, self.random.choice(TURN_SIZES)))

    def append(self, key: str, session_id: str, size: int) -> Outcome:
        # Plain appends (no expected_version): they must land whatever others write.
        request = pb.AppendEntriesRequest(
            session_id=session_id, entries=turn_entries(key, size), idempotency_key=key
        )
        impatient = self.random.random() < IMPATIENT_RATIO
        answer, attempts, refusal = self._send(request, impatient)
        if answer is None:
            state = "refused" if refusal else "unresolved"
            return Outcome(key, session_id, size, state, attempts=attempts, refusal=refusal)
        outcome = Outcome(
            key,
            session_id,
            size,
            "acknowledged",
            version=answer.version,
            entry_ids=tuple(answer.entry_ids),
            replayed=answer.replayed,
            attempts=attempts,
            at=time.time(),
        )
        if self.random.random() < RESEND_RATIO:
            self._resend(request, outcome)
        return outcome

    def _resend(self, request: pb.AppendEntriesRequest, first: Outcome) -> None:
        """Sends an acknowledged append again, to the next server: a retry of a lost answer."""
        self.server = (self.server + 1) % len(self.stubs)
        answer, _, refusal = self._send(request)
        self.result.resends += 1
        if answer is None:
            self.result.resend_failures.append(f"{first.key}: resent, {refusal or 'unanswered'}")
        elif not answer.replayed or (answer.version, tuple(answer.entry_ids)) != (
            first.version,
            first.entry_ids,
        ):
            self.result.resend_failures.append(
                f"{first.key}: first v{first.version} {first.entry_ids}, resent "
                f"v{answer.version} {tuple(answer.entry_ids)} replayed={answer.replayed}"
            )

    def _send(
        self, request: pb.AppendEntriesRequest, impatient: bool = False
    ) -> tuple[pb.AppendEntriesResponse | None, int, str]:
        """The answer (None if refused or given up), the attempts it took, any refusal."""
        backoff = FIRST_BACKOFF_SECONDS
        attempts = 0
        while True:
            attempts += 1
            timeout = (
                IMPATIENT_TIMEOUT_SECONDS if impatient and attempts == 1 else CALL_TIMEOUT_SECONDS
            )
            try:
                answer = self.stubs[self.server].AppendEntries(request, timeout=timeout)
            except grpc.RpcError as error:
                code = code_name(error)
                self.result.codes[code] += 1
                if error.code() not in RETRYABLE:
                    self.result.odd_answers.setdefault(
                        code, f"at {time.time():.1f}: {error.details()}"
                    )
                if code == "CANCELLED":
                    self.result.cancelled_at.append(time.time())
                if not is_retryable(error):
                    return None, attempts, f"{code}: {error.details()}"
                if time.time() > self.plan.give_up_at:
                    return None, attempts, ""
                self.server = (self.server + 1) % len(self.stubs)
                time.sleep(backoff * (0.5 + self.random.random()))
                backoff = min(MAX_BACKOFF_SECONDS, backoff * 2)
                continue
            self.result.codes["OK"] += 1
            return answer, attempts, ""


def run_worker(plan: WorkerPlan) -> WorkerResult:
    """One client process: a thread per client, sharing a channel per server."""
    options = [*CHANNEL_OPTIONS]
    if plan.service_config:
        options.append(("grpc.service_config", plan.service_config))
    channels = [grpc.insecure_channel(a, options=options) for a in plan.addresses]
    try:
        stubs = [pb_grpc.SessionStoreStub(channel) for channel in channels]
        clients = [Client(number, stubs, plan) for number in plan.clients]
        threads = [threading.Thread(target=client.run) for client in clients]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for channel in channels:
            channel.close()
    merged = WorkerResult()
    for client in clients:
        merged.outcomes.extend(client.result.outcomes)
        merged.codes.update(client.result.codes)
        for code, details in client.result.odd_answers.items():
            merged.odd_answers.setdefault(code, details)
        merged.cancelled_at.extend(client.result.cancelled_at)
        merged.resends += client.result.resends
        merged.resend_failures.extend(client.result.resend_failures)
    return merged


def create_sessions(address: str, run: str, config: StressConfig) -> list[str]:
    """Creates the run's sessions (every client's own, then the shared ones)."""
    ids = [
        *(
            session_id
            for client in range(config.clients)
            for session_id in own_session_ids(run, client, config.own_sessions_per_client)
        ),
        *shared_session_ids(run, config.shared_sessions),
    ]
    settings = pb.SessionSettings(context_window_tokens=WINDOW_TOKENS)
    with grpc.insecure_channel(address, options=CHANNEL_OPTIONS) as channel:
        stub = pb_grpc.SessionStoreStub(channel)
        for session_id in ids:
            request = pb.CreateSessionRequest(session_id=session_id, settings=settings)
            for attempt in range(20):
                try:
                    stub.CreateSession(request, timeout=10)
                    break
                except grpc.RpcError as error:
                    if not is_retryable(error) or attempt == 19:
                        raise
                    time.sleep(0.1)
    return ids


def plan_load(
    run: str, addresses: list[str], config: StressConfig, start_at: float, service_config: str = ""
) -> list[WorkerPlan]:
    """What each client process does: its share of the clients, on these addresses."""
    stop_at = start_at + config.seconds
    return [
        WorkerPlan(
            run=run,
            addresses=addresses,
            clients=list(range(n, config.clients, config.client_processes)),
            own_sessions=config.own_sessions_per_client,
            shared_sessions=config.shared_sessions,
            shared_ratio=config.shared_ratio,
            seed=config.seed,
            start_at=start_at,
            stop_at=stop_at,
            give_up_at=stop_at + config.drain_seconds,
            service_config=service_config,
        )
        for n in range(config.client_processes)
    ]


def start_load(plans: list[WorkerPlan]) -> tuple[ProcessPoolExecutor, list[Future[WorkerResult]]]:
    """Starts one process per plan; their results come back through the futures."""
    # spawn, not fork: a forked child would inherit the parent's gRPC threads.
    pool = ProcessPoolExecutor(max_workers=len(plans), mp_context=get_context("spawn"))
    return pool, [pool.submit(run_worker, plan) for plan in plans]
