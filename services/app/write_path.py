"""The write path: load a session, run one command on it, save what it decided.

Writers to one session queue on a striped lock instead of failing each
other's optimistic checks; sessions saved at the same moment share one insert
(group commit); a write that lost the race to another server is tried again
on a fresh copy. After a save the history cache is extended and the
listeners hear of it (the context engine's ingest, the read models' wake-up).
"""

from __future__ import annotations

import contextlib
import copy
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from eventsourcing.persistence import IntegrityError

from domain.errors import (
    DeadlineExceeded,
    DomainError,
    DuplicateEntry,
    SessionExists,
    Unavailable,
    VersionConflict,
    quoted,
)
from domain.session import Session, SessionEvent
from domain.session_events import Started
from projections.session_history import SessionHistory
from services import deadline
from services.adapters.event_store import EventStore
from services.adapters.group_commit import GroupCommit
from services.adapters.id_index import IdTaken
from services.app.access import SessionAccess
from services.app.history_cache import LOCK_STRIPES, HistoryCache
from services.app.saved_versions import SavedVersions

# A write that lost the race to another server's is tried again this many
# times at most, for this long at most, after a random pause of up to
# RETRY_PAUSE * 2**attempt seconds (never more than RETRY_PAUSE_MAX).
WRITE_ATTEMPTS = 50
WRITE_RETRY_SECONDS = 10.0
RETRY_PAUSE = 0.001
RETRY_PAUSE_MAX = 0.05
# How often a write queued on a session's lock looks whether the database is known
# to be unreachable, or its call was cut.
LOCK_WAIT_SLICE = 0.2
T = TypeVar("T")

# Told of each session just saved, with the events saved.
SaveListener = Callable[[Session, Sequence[SessionEvent]], None]


class RaceLost(VersionConflict):
    """Another writer stored the version this save was for. ``fresh``: the session
    as the store now holds it, read to tell the versions apart, for the next try."""

    def __init__(self, expected: int, fresh: Session) -> None:
        super().__init__(expected, fresh.version)
        self.fresh = fresh


@dataclass(frozen=True)
class Written(Generic[T]):
    """What a write did: the session after it, what its command answered, and the
    position of its last event for a client to wait on in a read model (None
    when it saved nothing: a replayed append, a prompt set again)."""

    session: Session
    result: T
    position: int | None


class WritePath:
    def __init__(
        self,
        store: EventStore,
        access: SessionAccess,
        histories: HistoryCache,
        saved_versions: SavedVersions,
    ) -> None:
        self.store = store
        self.access = access
        self.histories = histories
        # What followed event streams wait on (services.app.event_streams).
        self.saved_versions = saved_versions
        self._group_commit = GroupCommit(store.save_sessions, store.known_outage)
        self._locks = [threading.Lock() for _ in range(LOCK_STRIPES)]
        self._listeners: list[SaveListener] = []
        # Saves that found their copy stale: another server had stored that
        # version (the cost of round robin, for the metrics). Counted under a
        # lock: saves to different sessions run at once.
        self._lost_races = 0
        self._counting = threading.Lock()

    @property
    def lost_races(self) -> int:
        return self._lost_races

    def on_saved(self, listener: SaveListener) -> None:
        self._listeners.append(listener)

    def write(
        self,
        session_id: str,
        expected_version: int | None,
        command: Callable[[Session], T],
        *,
        seen_version: int = 0,
    ) -> Written[T]:
        """Runs a command on the session and saves the events it decided on.

        The aggregate comes from this server's cache of the sessions it wrote,
        trusted without a read. If another server wrote in between, the save
        hits the store's unique (session, version) key, and a refusal may be
        the stale copy's mistake: either way the command runs again on a copy
        fresh from the store, whose verdict stands. A write that only lost the
        race to another server is tried again (a few times, after a short
        random pause), so a command without an expected version lands; one
        with an expected version hears the conflict from the fresh copy.

        ``seen_version``: a version of the session the caller has seen (the view
        it holds, the view its answer was made from). A cached copy older than
        that is known to be stale and is not tried: behind a round-robin
        balancer that spares a save bound to fail. A hint only: a version the
        store never reached costs a read, never a wrong write.
        """
        self.access.check_tenant(session_id)
        # A write inside a read decides on the store's state.
        with self.histories.deciding(), self.locked(session_id):
            return self._write_locked(session_id, expected_version, command, seen_version)

    def _write_locked(
        self,
        session_id: str,
        expected_version: int | None,
        command: Callable[[Session], T],
        seen_version: int,
    ) -> Written[T]:
        cached = self.access.written.get(session_id)
        if cached is not None and cached.version < seen_version:
            self.access.written.discard(session_id)
            cached = None
        # Behind a round-robin balancer the cached copy is mostly stale (other
        # servers wrote the turns between): the save that finds so reads the
        # store's copy, and the next try starts from it rather than reading again.
        fresh: Session | None = None
        if cached is not None:
            try:
                return self._attempt(copy.deepcopy(cached), expected_version, command)
            except (Unavailable, DeadlineExceeded):
                raise  # not the stale copy's doing: a fresh one would fare no better
            except RaceLost as lost:
                fresh = lost.fresh
            except DomainError:
                pass
            self.access.written.discard(session_id)
        give_up_at = time.monotonic() + WRITE_RETRY_SECONDS
        attempt = 0
        while True:
            attempt += 1
            session, fresh = fresh or self.access.load(session_id), None
            try:
                return self._attempt(session, expected_version, command)
            except RaceLost:
                if attempt >= WRITE_ATTEMPTS or time.monotonic() >= give_up_at:
                    raise
            pause = random.uniform(0, min(RETRY_PAUSE_MAX, RETRY_PAUSE * 2**attempt))
            deadline.pause(pause)
            deadline.check("writing to a session other servers were writing to")

    @contextlib.contextmanager
    def locked(self, session_id: str) -> Iterator[None]:
        """The session's write lock, waited for no longer than the call's deadline,
        nor once the call is cut or the database is known to be unreachable."""
        lock = self._locks[hash(session_id) % LOCK_STRIPES]
        if not lock.acquire(blocking=False):  # free: the common case costs one acquire
            self._wait_for(lock)
        try:
            yield
        finally:
            lock.release()

    def _wait_for(self, lock: threading.Lock) -> None:
        """Waits for a lock another writer holds, in slices: the writer ahead may be
        blocked on a database that stopped answering, for as long as it stays so. Once
        the probe finds it unreachable the wait ends with the refusal a new request
        gets at once (UNAVAILABLE, retried alike) rather than at the call's deadline
        (or never, for a call without one). It ends too when the call is cut (the
        client cancelled, the server stops), so that a write nobody waits for any
        more is not made once the lock comes free."""
        while True:
            outage = self.store.known_outage()
            if outage is not None:
                raise outage
            deadline.check("waiting for other writes to the session", outcome="nothing was written")
            if lock.acquire(timeout=deadline.bounded(LOCK_WAIT_SLICE)):
                return

    def _attempt(
        self, session: Session, expected_version: int | None, command: Callable[[Session], T]
    ) -> Written[T]:
        session.check_expected_version(expected_version)
        result = command(session)
        position = self.save(session) if session.pending_events else None
        return Written(session, result, position)

    def save(self, session: Session) -> int:
        """Saves the pending events, snapshotting as configured; answers their position."""
        pending = list(session.pending_events)
        saved = cast(list[SessionEvent], pending)
        try:
            position = self._group_commit.save(session)
        except IdTaken:
            # Another server used one of the ids between the check and the insert.
            raise DuplicateEntry(
                "an entry id or tool call id of this append was just used by another "
                "writer; ids must be unique"
            ) from None
        except IntegrityError:
            # Another writer took the version first (or, for a new session, the id).
            if isinstance(pending[0], Started):
                raise SessionExists(
                    f"a session with id {quoted(self.access.ids.client(session.id))} already exists"
                ) from None
            with self._counting:
                self._lost_races += 1
            raise RaceLost(
                pending[0].originator_version - 1, self.access.load(session.id)
            ) from None
        self.access.written.put(session.id, session)
        self.histories.extend(session.id, saved)
        for listener in self._listeners:
            listener(session, saved)
        self.saved_versions.saved(session.id, session.version)
        return position

    def save_new(self, built: Sequence[tuple[Session, SessionHistory]]) -> int:
        """Saves new sessions (an import: a session and its forks) in one insert,
        all or nothing, and keeps their histories, folded while they were built;
        answers the position of the last event saved."""
        for session, _ in built:
            self.access.check_new_session_id(session.id)
        try:
            positions = self.store.save_sessions([session for session, _ in built])
            position = max(positions.values(), default=0)
        except IntegrityError:
            raise SessionExists(
                "a session of this import was just created by another writer: "
                + ", ".join(repr(self.access.ids.client(s.id)) for s, _ in built)
            ) from None
        for session, history in built:
            self.access.written.put(session.id, session)
            self.histories.keep(session.id, history)
        for session, _ in built:
            self.saved_versions.saved(session.id, session.version)
        return position
