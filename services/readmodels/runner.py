"""The projection runner: follows the event store and moves every read model on.

On PostgreSQL it sleeps until the store's NOTIFY (a listener thread) or a
timeout, whichever is first, so a lost notification only delays; on SQLite,
which cannot notify, it polls, and a server's own saves wake it at once.
Stopping it at any moment loses nothing: a batch commits with its position,
or not at all.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import psycopg
import structlog

from services.adapters.event_store import EventStore
from services.adapters.read_model_store import ReadModelStore

BATCH = 500
# After a catch-up, events that arrive within this pause are applied together:
# under a stream of writes the projection then costs a transaction per pause,
# not per write (a catch-up is some ten round trips and the events' decoding,
# taken from the writes it runs beside). A query waiting for a position cuts
# the pause short (``hurry``), so it never waits for the pause.
COALESCE_SECONDS = 0.1

log = structlog.get_logger(__name__)


class ReadModelRunner:
    def __init__(
        self, events: EventStore, models: ReadModelStore, poll_seconds: float, batch: int = BATCH
    ) -> None:
        self.events = events
        self.models = models
        self.poll_seconds = poll_seconds
        self.batch = batch
        self._wake = threading.Event()
        self._hurry = threading.Event()
        self._stopping = threading.Event()
        self.progress = threading.Condition()
        self._threads: list[threading.Thread] = []
        # The store's head as of this runner's latest catch-up.
        self._reached = -1

    def fetch(self, position: int, topics: Sequence[str]) -> tuple[list[tuple[int, Any]], int]:
        """The next batch of events after ``position`` of the given topics, and the
        position it reaches (the store's head, when the batch is its last)."""
        recorder = self.events.recorder
        head = recorder.max_notification_id() or 0
        if head <= position:
            return [], position
        found = recorder.select_notifications(
            start=position,
            limit=self.batch,
            stop=head,
            topics=topics,
            inclusive_of_start=False,
        )
        # The read models count entries and their tokens: their content stays sealed.
        events = self.events.decode_notifications(found, entry_content=False)
        batch = list(zip([n.id for n in found], events, strict=True))
        reached = found[-1].id if len(found) == self.batch else head
        return batch, reached

    def catch_up(self) -> int:
        """Applies batches until every model has reached the store's head; answers
        how many events were read. Takes no lock when the head has not moved."""
        if (self.events.recorder.max_notification_id() or 0) == self._reached:
            return 0
        applied = 0
        while not self._stopping.is_set():
            count, self._reached = self.models.catch_up_all(self.fetch)
            applied += count
            if count < self.batch:
                break
        with self.progress:
            self.progress.notify_all()
        return applied

    def wake(self) -> None:
        """New events: catch up once the pause after the last catch-up is over."""
        self._wake.set()

    def hurry(self) -> None:
        """Someone waits for the read models: catch up now, pause or not."""
        self._hurry.set()
        self._wake.set()

    def start(self) -> None:
        self._stopping.clear()
        self._threads = [threading.Thread(target=self._run, name="read-models", daemon=True)]
        channel = getattr(self.events.recorder, "channel_name", None)
        if self.models.database.postgres and channel:
            self._threads.append(
                threading.Thread(
                    target=self._listen, args=(channel,), name="read-models-listen", daemon=True
                )
            )
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._hurry.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self._threads = []

    def run_forever(self) -> None:
        """The worker's loop: ``start`` without a thread of its own."""
        self.start()
        self._stopping.wait()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            self._hurry.clear()
            try:
                self.catch_up()
            except Exception:
                # The database may be down for a while: retry at the next tick.
                self._reached = -1
                log.exception("read models could not catch up; retrying")
            self._hurry.wait(COALESCE_SECONDS)
            self._wake.wait(self.poll_seconds)

    def _listen(self, channel: str) -> None:
        env = self.models.database.env
        while not self._stopping.is_set():
            try:
                with psycopg.connect(
                    host=env["POSTGRES_HOST"],
                    port=int(env["POSTGRES_PORT"]),
                    dbname=env["POSTGRES_DBNAME"],
                    user=env["POSTGRES_USER"],
                    password=env["POSTGRES_PASSWORD"] or None,
                    autocommit=True,
                    connect_timeout=10,
                ) as conn:
                    conn.execute(f'LISTEN "{channel}"')
                    while not self._stopping.is_set():
                        for _ in conn.notifies(timeout=self.poll_seconds, stop_after=1):
                            self._wake.set()
                        # The runner pauses after a catch-up anyway: the notifications
                        # of the pause wait in the socket and are read together, not
                        # one wake-up of this thread per write.
                        self._stopping.wait(COALESCE_SECONDS)
            except psycopg.Error:
                # Polling goes on meanwhile; listen again after a pause.
                self._stopping.wait(self.poll_seconds * 5)
