"""The projection's ear on PostgreSQL: LISTEN for the store's NOTIFY, and wake the runner.

Saves send one NOTIFY after they commit (services.adapters.postgres_wakeups).
A lost connection only delays: the runner polls meanwhile, and the listener
says so once, and once when it listens again.
"""

from __future__ import annotations

import threading

import psycopg
import structlog

from services.adapters.read_model_db import ReadModelDatabase, connect_postgres
from services.adapters.read_model_store import describe_error
from services.logs import StateLog

log = structlog.get_logger(__name__)


def listen(
    database: ReadModelDatabase,
    channel: str,
    wake: threading.Event,
    stopping: threading.Event,
    poll_seconds: float,
    pause_seconds: float,
) -> None:
    """Sets ``wake`` on each NOTIFY of ``channel`` until ``stopping`` is set; reads
    the notifications of each ``pause_seconds`` together (the runner pauses after a
    catch-up anyway: no wake-up of this thread per write)."""
    listening = StateLog(
        log,
        "cannot listen for the store's notifications; polling until it can",
        "listening for the store's notifications again",
    )
    while not stopping.is_set():
        try:
            with connect_postgres(database) as conn:
                conn.execute(f'LISTEN "{channel}"')
                listening.ok()
                while not stopping.is_set():
                    for _ in conn.notifies(timeout=poll_seconds, stop_after=1):
                        wake.set()
                    stopping.wait(pause_seconds)
        except psycopg.Error as error:
            # Polling goes on meanwhile; listen again after a pause.
            listening.failed(describe_error(error))
            stopping.wait(poll_seconds * 5)
