"""The gRPC server: the session store, health checking and reflection.

`python -m services.grpc.server` serves until SIGTERM or SIGINT, then stops taking
calls, lets running ones finish (within a grace period) and closes the store.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import os
import signal
import socket
import sys
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.adapters import sealing
from services.adapters.litellm_loader import load_in_background
from services.adapters.model_info import model_metadata
from services.adapters.start_errors import START_ERRORS, redacted, start_refusal
from services.adapters.tokenizers import tokenizer_for
from services.app.authentication import TokenBook
from services.app.sessions import MESSAGE_ENVELOPE_BYTES, SessionService
from services.bootstrap import Application, build_application
from services.config import Config, load_config
from services.grpc.auth import Authentication
from services.grpc.database_monitor import SERVICE, SERVICE_NAME, DatabaseMonitor, set_health
from services.grpc.deadlines import Deadlines
from services.grpc.errors import ErrorMapping
from services.grpc.event_loop import EventLoopThread
from services.grpc.layers import Layer, LayeredServer
from services.grpc.observing import Observing
from services.grpc.reflection import enable_reflection
from services.grpc.request_strings import RequestStrings
from services.grpc.security import load_security, security_mode
from services.grpc.servicer import SessionStoreServicer
from services.logs import configure_logging, warn_of_unread_variables

if TYPE_CHECKING:
    # The SDK is imported only when tracing is on (services.observability.tracing).
    from opentelemetry.sdk.trace import TracerProvider

# A health service name that says only that the process answers, whatever the
# database does: for liveness probes, which restart what fails them.
LIVENESS = "liveness"
GRACE_SECONDS = 10
# What the stop may take beyond the grace period: closing the store's connections.
STOP_MARGIN_SECONDS = 0.7
# How long a stopping server refuses new calls (UNAVAILABLE) before gRPC shuts
# down and cancels the calls it has taken but not handed over: time for it to
# hand them over, to be refused (services.grpc.stopping).
REFUSING_SECONDS = 0.1
STOPPING = "the server is stopping"
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
# How much larger than the largest request an answer may be (see _serve).
ANSWER_ALLOWANCE_BYTES = 2 << 20


log = structlog.get_logger(__name__)
# The asyncio health servicer; the stubs know only the threaded one.
AsyncHealthServicer: Any = health.aio.HealthServicer  # type: ignore[attr-defined]


@dataclass
class RunningServer:
    server: grpc.aio.Server
    app: Application
    health: Any  # AsyncHealthServicer
    port: int
    monitor: DatabaseMonitor
    loop: EventLoopThread
    deadlines: Deadlines
    # Where the service's handlers are added; it refuses the calls that reach a
    # stopping server.
    layered: LayeredServer
    # The plain-text listener of the health service alone (SESSIONSTORE_HEALTH_ADDRESS).
    health_server: grpc.aio.Server | None = None
    health_port: int = 0
    stop_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def service(self) -> SessionService:
        return self.app.sessions

    @property
    def metrics_port(self) -> int:
        """Where /metrics is served (0: nowhere, SESSIONSTORE_METRICS_ADDRESS unset)."""
        return self.app.observability.metrics_port if self.app.observability else 0

    def stop(self, grace: float = GRACE_SECONDS) -> None:
        started = time.monotonic()
        self.loop.run(self._stop(grace))
        self.loop.close()
        calls_ended = time.monotonic()
        self.app.close()
        # Where a slow stop spent its time (logged with "stopped"): calls still
        # running, or the store's close.
        self.stop_seconds = {
            "calls_seconds": round(calls_ended - started, 3),
            "close_seconds": round(time.monotonic() - calls_ended, 3),
        }

    async def _stop(self, grace: float) -> None:
        # First, so that a caller told NOT_SERVING is refused from then on too.
        self.layered.refuse_all(STOPPING)
        await self.monitor.stop()
        await self.health.enter_graceful_shutdown()
        # Followed streams never end by themselves, and waits (for the read
        # models, a lock, a retry) may last until their deadline: end them first
        # (UNAVAILABLE, to retry elsewhere), so that the grace period is for
        # calls that work.
        self.service.end_streams()
        self.deadlines.cut_all(STOPPING)
        # Running calls go on meanwhile: the grace period counts from here.
        refusing = min(REFUSING_SECONDS, grace)
        await asyncio.sleep(refusing)
        await self.server.stop(grace - refusing)
        if self.health_server is not None:
            await self.health_server.stop(0)


def start(config: Config, tracer_provider: TracerProvider | None = None) -> RunningServer:
    """Starts serving in background threads and returns at once. ``tracer_provider``:
    where spans go (None: as the OTEL_* variables say)."""
    if not structlog.is_configured():
        configure_logging(config)  # else log lines would go to stdout
    tokens, credentials = load_security(config)
    app = build_application(config, tracer_provider)
    service = app.sessions
    # Fail now if the database cannot be reached, and open its connection
    # pool, rather than in the first request.
    service.store.recorder.max_notification_id()
    # Likewise load the default model's tokenizer (a few tenths of a second
    # and its tables' memory), and read the model map the context windows
    # come from (some 10 ms a first view would otherwise pay).
    tokenizer_for(config.default_model).count_text("warm up")
    model_metadata.context_window(config.default_model)
    sealing.warm_up()
    if config.providers_file:
        load_in_background()  # its models summarise: have litellm ready for them
    _tune_interpreter()
    if app.read_models is not None:
        # Catch up before serving, then follow the store in the background.
        app.read_models.start()
    if app.retention is not None:
        app.retention.start()
    loop = EventLoopThread()
    try:
        return loop.run(_serve(config, app, loop, tokens, credentials))
    except BaseException:
        loop.close()
        app.close()
        raise


async def _serve(
    config: Config,
    app: Application,
    loop: EventLoopThread,
    tokens: TokenBook | None,
    credentials: grpc.ServerCredentials | None,
) -> RunningServer:
    max_message = config.max_message_mb << 20
    # An answer may carry an append back with what the store added to each entry
    # (ids, time, token count, tokenizer: under 160 bytes each, 10,000 entries at
    # most), so answers may exceed the largest request by that much: an event
    # stored from a request that fitted is always sent whole.
    max_answer = max_message + ANSWER_ALLOWANCE_BYTES
    strings = RequestStrings(content_chars=max_message - MESSAGE_ENVELOPE_BYTES)
    # Plain handlers run here, calls and the streams that work while they stream.
    workers = futures.ThreadPoolExecutor(max_workers=config.max_workers, thread_name_prefix="rpc")
    deadlines = Deadlines(workers)
    health_servicer = AsyncHealthServicer()
    monitor = DatabaseMonitor(app.sessions, health_servicer)
    # Outermost first. Observing sees the status the error layer gives, and the
    # whole call's time. Authentication innermost but for the deadline: the
    # error layer answers its refusals like any other, and nothing runs for a
    # caller it refuses. The monitor hears of each refusal: one for a damaged
    # database takes the server out of rotation.
    errors = ErrorMapping(SERVICE, strings, max_answer, noticed=monitor.noticed)
    layers: list[Layer] = [errors, deadlines]
    if tokens is not None:
        layers.insert(1, Authentication(tokens, SERVICE_NAME))
    if app.observability is not None:
        observability = app.observability
        layers.insert(0, Observing(observability.metrics, observability.tracer))
    server = grpc.aio.server(
        migration_thread_pool=workers,
        options=[
            ("grpc.max_receive_message_length", max_message),
            ("grpc.max_send_message_length", max_answer),
            # grpcio shares a port between processes by default: a second
            # server on a taken address would start and split the traffic.
            ("grpc.so_reuseport", 0),
        ],
    )
    pb_grpc.add_SessionStoreServicer_to_server(
        SessionStoreServicer(
            app.sessions,
            app.context,
            imports=app.imports,
            audit=app.audit,
            streams=app.streams,
            recall=app.recall,
            # As the error layer, of what the view after an append failed with.
            noticed=monitor.noticed,
        ),
        (layered := LayeredServer(server, layers, stoppable=SERVICE_NAME)).adding,
    )
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, layered.adding)
    if config.reflection:
        enable_reflection(
            (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name),
            layered.adding,
        )
    port = _listen(server, config.address, credentials)
    if app.observability is not None:
        # Before serving: a taken metrics address stops the start, like a taken address.
        app.observability.serve_metrics()
    health_server, health_port = None, 0
    if config.health_address is not None:
        # Health alone, in plain text: probes that cannot speak TLS reach it, and
        # nothing else is served there.
        health_server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        health_pb2_grpc.add_HealthServicer_to_server(
            health_servicer, LayeredServer(health_server, []).adding
        )
        health_port = _listen(health_server, config.health_address)
        await health_server.start()
    await server.start()
    await set_health(health_servicer, serving=True)
    await health_servicer.set(LIVENESS, health_pb2.HealthCheckResponse.SERVING)
    monitor.start()
    return RunningServer(
        server,
        app,
        health_servicer,
        port,
        monitor,
        loop,
        deadlines,
        layered,
        health_server,
        health_port,
    )


def _listen(
    server: grpc.aio.Server, address: str, credentials: grpc.ServerCredentials | None = None
) -> int:
    """Binds ``address`` (port 0: a free one) and answers the port."""
    _resolve(address)
    try:
        if credentials is not None:
            port = server.add_secure_port(address, credentials)
        else:
            port = server.add_insecure_port(address)
    except RuntimeError:
        port = 0
    if port == 0:
        raise OSError(f"cannot listen on {address}: is another server using it?")
    return port


def _resolve(address: str) -> None:
    """Refuses a host that does not resolve: gRPC would only fail to bind, which
    reads as a taken address."""
    host, _, port = address.rpartition(":")
    try:
        socket.getaddrinfo(host.strip("[]"), int(port), proto=socket.IPPROTO_TCP)
    except socket.gaierror as error:
        raise OSError(
            f"cannot listen on {address}: {host} does not resolve ({error.strerror})"
        ) from None


def bound_address(address: str, port: int) -> str:
    """``address`` with the port it was bound to (port 0 asks for a free one)."""
    return f"{address.rpartition(':')[0]}:{port}"


SWITCH_INTERVAL_SECONDS = 0.001
# glibc's mallopt parameter for the number of malloc arenas, and ours.
M_ARENA_MAX = -8
MALLOC_ARENAS = 1


def bound_malloc_arenas() -> bool:
    """One malloc arena for all threads instead of glibc's default of up to eight
    per core.

    Each thread that allocates gets an arena of its own; memory freed in one
    serves no other, so the worker threads taking turns on sessions the cache
    loads and evicts each keep their own high-water mark. The interpreter
    lock lets one thread allocate at a time anyway (two arenas still left
    group memory's server some 6 MB higher, at the same rate). An operator's
    MALLOC_ARENA_MAX stands; elsewhere than glibc nothing changes. Answers
    whether the bound was set here."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_ARENA_MAX, MALLOC_ARENAS))


def _tune_interpreter() -> None:
    # Cached session histories are many long-lived objects without reference
    # cycles. With the default thresholds the collector scans them again and
    # again while a long session is folded, which made a cold prompt view a
    # third slower. Collect young objects less often, and leave what start-up
    # made (modules, tokenizer tables) out of every scan.
    gc.set_threshold(50_000, 20, 100)
    gc.freeze()
    # A request thread whose database reply has come waits for the interpreter
    # lock while another thread (the projection, the gRPC poller) computes: by
    # default up to 5 ms, longer than a whole turn. Hand it over sooner.
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)


def main() -> None:
    # Stop signals are taken synchronously by sigwait below instead of by a
    # handler: a handler runs between any two bytecodes of the main thread,
    # and one that logs or sets an Event can deadlock on a lock that thread
    # holds (structlog's print lock is not re-entrant, and `uv run` forwards
    # SIGTERM while the process group gets one too). Blocked before any
    # thread starts, so every thread inherits the mask.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    bound_malloc_arenas()  # before the threads that would each take an arena
    config = load_config("sessionstore")
    configure_logging(config)
    warn_of_unread_variables(os.environ)
    try:
        running = start(config)
    except START_ERRORS as error:
        # A misconfigured or unreachable database, or a taken address: say
        # which, without a traceback, and do not serve.
        reason, database = start_refusal(error), redacted(config.database_url)
        log.error("cannot start", reason=reason, database=database)
        sys.exit(1)
    log.info(
        "serving",
        address=bound_address(config.address, running.port),
        health_address=config.health_address
        and bound_address(config.health_address, running.health_port),
        database=redacted(config.database_url),
        **security_mode(config),
    )
    received = signal.sigwait(STOP_SIGNALS)
    log.info("shutting down", signal=signal.Signals(received).name, grace_seconds=GRACE_SECONDS)
    # Signals that arrive from here on stay blocked and pending. The stop is
    # given the grace period and a little more; then the process ends,
    # whatever still runs: a call stuck on a provider, a connection the
    # database does not answer. A transaction cut short commits nothing, and
    # the worker threads (which the interpreter would wait for) are not daemons.
    stopping = threading.Thread(target=running.stop, name="stop", daemon=True)
    stopping.start()
    stopping.join(GRACE_SECONDS + STOP_MARGIN_SECONDS)
    if stopping.is_alive():
        log.info("stopped; abandoning what still runs")
    else:
        log.info("stopped", **running.stop_seconds)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
