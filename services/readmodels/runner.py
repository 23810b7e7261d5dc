"""The projection runner: follows the event store and moves each read model on.

On PostgreSQL it sleeps until the store's NOTIFY (a listener thread,
services.readmodels.listener) or a timeout, whichever is first, so a lost
notification only delays; on SQLite, which cannot notify, it polls, and a
server's own saves wake it at once.
Stopping it at any moment loses nothing: a batch commits with its position,
or not at all.

Each model moves on by itself: healthy models at the same position share one
read of the events and one transaction; when that fails, each applies the
batch in a transaction of its own, and none waits for a lock held elsewhere
for more than a moment. A model that must wait for a lock, or fails (its
database down or busy), leaves that loop for a recovery thread, where it
waits and retries alone, with exponential backoff and jitter once it fails
(logged once when it starts failing and once when it recovers), while the
others go on; back at the store's head, it rejoins them. An event a model
cannot apply is quarantined by the store, and the model goes on past it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import structlog

from services.adapters.database_refusals import operator_refusal
from services.adapters.event_store import EventStore
from services.adapters.read_model_db import is_lock_wait, is_transient, role_of
from services.adapters.read_model_store import Applied, ReadModelStore, describe_error
from services.readmodels.event_batches import BATCH, EventBatches
from services.readmodels.listener import listen
from services.readmodels.model_state import ModelState
from services.readmodels.thread_sets import ThreadSets

# After a catch-up, events that arrive within this pause are applied together:
# under a stream of writes the projection then costs a transaction per pause,
# not per write (a catch-up is some ten round trips and the events' decoding,
# taken from the writes it runs beside). A query waiting for a position cuts
# the pause short (``hurry``), so it never waits for the pause; it cannot cut
# short a backoff.
COALESCE_SECONDS = 0.1
# How long a stop waits for a batch in flight, and a start for the threads a stop
# left running.
STOP_SECONDS = 10.0

log = structlog.get_logger(__name__)


class ReadModelRunner:
    def __init__(
        self, events: EventStore, models: ReadModelStore, poll_seconds: float, batch: int = BATCH
    ) -> None:
        self.events = events
        self.batches = EventBatches(events, batch)
        self.models = models
        self.poll_seconds = poll_seconds
        self.states = {name: ModelState() for name in models.models}
        # The failing models, retried on the recovery thread, not in the shared loop.
        self._recovering: set[str] = set()
        self._states_lock = threading.Lock()
        self._recovery_wake = threading.Event()
        self._wake = threading.Event()
        self._hurry = threading.Event()
        self._stopping = threading.Event()
        self.progress = threading.Condition()
        # A start looks for the end of threads a stop left running as often as the
        # projection polls.
        self._sets = ThreadSets(self._new_threads, self._stopping, self._rouse, poll_seconds)
        # The store's head as of this runner's latest catch-up of every model to it.
        self._reached = -1
        # A query found a model behind: read the stored positions at the next catch-up,
        # moved or not the head (another process may have set one back).
        self._recheck = False

    def catch_up(self) -> int:
        """Applies batches until every model that is not backing off has reached the
        store's head; answers how many events were applied. Takes no lock when the
        head has not moved, unless a query hurried it."""
        recheck, self._recheck = self._recheck, False
        try:
            head = self.events.recorder.max_notification_id() or 0
        except Exception as error:
            for name in self.states:
                self._failed(name, error)
            return 0
        if head == self._reached and not self.failing() and not recheck:
            return 0
        applied, more = 0, True
        # No head is known reached until every model reaches this one: a catch-up
        # stopped short leaves none (not even an earlier head, which a model set back
        # since no longer holds), so a start anew reads the positions again instead
        # of waiting for a write or a query.
        self._reached = -1
        try:
            # The first round goes on from the head just read; later ones read it again.
            known: int | None = head
            while more and not self._stopping.is_set():
                count, more = self._round(known)
                known = None
                applied += count
            if not more and not self.failing():
                self._reached = head
        finally:
            with self.progress:
                self.progress.notify_all()
        return applied

    def _round(self, head: int | None = None) -> tuple[int, bool]:
        """One batch for each healthy model, up to the store's ``head`` (read here when
        not given); answers (events applied, more to do)."""
        with self._states_lock:
            due = [name for name in self.states if name not in self._recovering]
        if not due:
            return 0, False
        try:
            positions = self.models.positions(due)
            if head is None:
                head = self.events.recorder.max_notification_id() or 0
        except Exception as error:
            for name in due:
                self._failed(name, error)
            return 0, False
        # Models that read entries' content share no read with those that do not:
        # opening every entry's content costs what the others need not pay.
        groups: dict[tuple[int, bool], list[str]] = {}
        for name in due:
            if positions[name] < head:
                content = self.models.model(name).entry_content
                groups.setdefault((positions[name], content), []).append(name)
            else:
                self._recovered(name)
        applied, more = 0, False
        for (start, content), names in sorted(groups.items()):
            try:
                batch, reached = self.batches.fetch(start, self._topics(names), content, head)
            except Exception as error:
                for name in names:
                    self._failed(name, error)
                continue
            together = self.models.apply_together(names, batch, start, reached)
            for name in names:
                if together is not None:
                    result = together[name]
                else:
                    try:
                        result = self.models.apply(name, batch, start, reached, quick=True)
                    except Exception as error:
                        if is_lock_wait(error):
                            self._defer(name)  # another holds its rows: wait apart
                        else:
                            self._failed(name, error)
                        continue
                self._applied(name, result)
                applied += result.events
                more = more or result.moved or result.position < head
        return applied, more

    def _topics(self, names: Sequence[str]) -> list[str]:
        """What a group's shared read must fetch: every event if one of them reads all."""
        topics: set[str] = set()
        for name in names:
            own = self.models.model(name).topics
            if not own:
                return []
            topics.update(own)
        return sorted(topics)

    def _applied(self, name: str, result: Applied) -> None:
        self._recovered(name)
        self._report_quarantined(name, result)

    def _report_quarantined(self, name: str, result: Applied) -> None:
        for event in result.quarantined:
            log.warning(
                "read model quarantined an event it cannot apply, and went on past it",
                model=name,
                position=event.position,
                session=event.session_id,
                error=event.error,
                retry="sessionstore readmodels retry",
            )

    def _retry(self, name: str) -> None:
        """On the recovery thread: one model alone, batch after batch, until it reaches
        the store's head (it rejoins the shared loop) or fails again (it backs off)."""
        topics = self._topics([name])
        content = self.models.model(name).entry_content
        try:
            while not self._stopping.is_set():
                position = self.models.positions([name])[name]
                head = self.events.recorder.max_notification_id() or 0
                if position >= head:
                    self._recovered(name)
                    return
                batch, reached = self.batches.fetch(position, topics, content, head)
                applied = self.models.apply(name, batch, position, reached)
                self._report_quarantined(name, applied)
                if applied.position >= head:
                    # Said before readers wake: whoever sees it served has seen it recover.
                    self._recovered(name)
                with self.progress:
                    self.progress.notify_all()
                if applied.position >= head:
                    return
        except Exception as error:
            self._failed(name, error)

    def _recover(self) -> None:
        while not self._stopping.is_set():
            self._recovery_wake.clear()
            with self._states_lock:
                waiting = sorted(self._recovering)
            for name in waiting:
                if self.states[name].retry_in() <= 0:
                    self._retry(name)
            with self._states_lock:
                pending = [self.states[n].retry_in() for n in self._recovering]
            self._recovery_wake.wait(min(pending, default=self.poll_seconds))

    def _defer(self, name: str) -> None:
        """Hands a model whose rows another transaction holds (another server's batch,
        or a busy database) to the recovery thread, which waits for them; it is not
        failing unless that wait fails too."""
        with self._states_lock:
            self._recovering.add(name)
        self._recovery_wake.set()

    def _failed(self, name: str, error: Exception) -> None:
        with self._states_lock:
            self._recovering.add(name)
        self._recovery_wake.set()
        described = describe_error(error)
        refusal = operator_refusal(error, role_of(self.models.database.writer))
        if self.states[name].failed(described, refusal):
            log.warning(
                "read model cannot catch up; retrying with backoff",
                model=name,
                error=described,
                transient=is_transient(error),
            )
        # The head must be read again once the model recovers.
        self._reached = -1

    def _recovered(self, name: str) -> None:
        with self._states_lock:
            if name in self._recovering:
                self._recovering.discard(name)
                self._wake.set()  # back in the shared loop: events may have come meanwhile
        state = self.states[name]
        if state.failing_since is None:
            return
        log.info(
            "read model caught up again",
            model=name,
            failed_seconds=round(time.time() - state.failing_since, 1),
            attempts=state.attempts,
        )
        self.states[name] = ModelState()

    def failing(self, names: Sequence[str] | None = None) -> dict[str, ModelState]:
        """The models (of ``names``, or all) that are backing off, with why."""
        wanted = self.states if names is None else names
        return {n: self.states[n] for n in wanted if self.states[n].failing_since is not None}

    @property
    def running(self) -> bool:
        """Whether it projects now (started and not stopped)."""
        return self._sets.running

    def wake(self) -> None:
        """New events: catch up once the pause after the last catch-up is over."""
        self._wake.set()

    def hurry(self) -> None:
        """Someone waits for the read models: catch up now, pause or not, from the
        positions stored, even if the head has not moved since the last catch-up:
        another process may have set a model back (`sessionstore migrate` making its
        dropped tables again, for its projection to rebuild)."""
        self._recheck = True
        self._hurry.set()
        self._wake.set()

    def start(self, timeout: float = STOP_SECONDS) -> None:
        """Starts projecting, unless it already does or will. Threads a stop left
        running (held by the database) are waited for first, at most ``timeout``
        seconds as a stop waits; still held then, they are left to end first, and a
        thread of the runner's own starts projecting once they have
        (services.readmodels.thread_sets): one set of threads projects at a time, and
        a worker that took the lead back goes on watching its lock meanwhile."""
        self._sets.start(timeout)

    def _new_threads(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self._run, name="read-models", daemon=True),
            threading.Thread(target=self._recover, name="read-models-recover", daemon=True),
        ]
        channel = getattr(self.events.recorder, "channel_name", None)
        if self.models.database.postgres and channel:
            listening = (
                self.models.database,
                channel,
                self._wake,
                self._stopping,
                self.poll_seconds,
                COALESCE_SECONDS,
            )
            threads.append(
                threading.Thread(
                    target=listen, args=listening, name="read-models-listen", daemon=True
                )
            )
        return threads

    def stop(self, timeout: float = STOP_SECONDS) -> list[str]:
        """Stops the threads (and calls off a start still waiting for earlier ones),
        waiting at most ``timeout`` seconds for a batch in flight (an unfinished batch
        is rolled back: nothing is lost); answers the names of those still running
        then (held by the database), which end once it lets them go, and which a
        later ``start`` waits for."""
        still = self._sets.stop(timeout)
        if still:
            log.warning(
                "read model threads still running after stop; each ends once the "
                "database lets it go",
                threads=still,
                timeout_seconds=timeout,
            )
        return still

    def _rouse(self) -> None:
        """Wakes the threads from their waits, to see that they must stop."""
        self._hurry.set()
        self._wake.set()
        self._recovery_wake.set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            self._hurry.clear()
            self.catch_up()
            self._hurry.wait(COALESCE_SECONDS)
            self._wake.wait(self.poll_seconds)
