"""This server's copies of sessions' histories and renderings, kept caught up.

Reads are served from a cached, incrementally updated ``SessionHistory`` per
session, caught up from the store before each read so that several servers
can share one database. An erasure found on the way drops the copy: the
session is folded again from the store, where the content is gone.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from eventsourcing.application import AggregateNotFoundError

from domain.errors import SessionNotFound
from domain.session import Session, SessionEvent
from domain.session_events import EntriesErased, SessionErased
from projections.prompt_formats import PromptRenderer
from projections.rendered_prompt import RenderedPrompt
from projections.session_history import PromptView, SessionHistory, load_from_cut
from services.adapters.event_store import EventStore
from services.app.access import SessionAccess
from services.app.cache import RSS_PER_LIVE_BYTE, WeightedLRU

LOCK_STRIPES = 1024
ERASURES_PER_LOOK = 1_000
ERASURES = (EntriesErased, SessionErased)


@dataclass
class _OneRead:
    """Set by ``one_read``: the session whose reads share one catch-up."""

    session_id: str
    # The version this server's copy must hold to be taken as it is (None: the
    # first read has yet to catch up).
    fresh_at: int | None


_ONE_READ: ContextVar[_OneRead | None] = ContextVar("one_read", default=None)


class HistoryCache:
    def __init__(self, store: EventStore, access: SessionAccess, budget_bytes: int) -> None:
        self.store = store
        self.access = access
        # The cache budget: two thirds for histories, one third for the
        # rendered JSON that makes repeated prompt views cheap. Weights are
        # scaled by what the process really holds per byte of live objects
        # while caches churn (measured with `make bench`, memory group).
        self._histories: WeightedLRU[str, SessionHistory] = WeightedLRU(
            budget_bytes * 2 // 3, lambda h: h.weight * RSS_PER_LIVE_BYTE
        )
        self._renderers: WeightedLRU[str, PromptRenderer] = WeightedLRU(
            budget_bytes // 3, lambda r: r.weight * RSS_PER_LIVE_BYTE
        )
        self._locks = [threading.Lock() for _ in range(LOCK_STRIPES)]
        # The store's position up to which erasures were looked for (forget_erased):
        # from the start, nothing being held before it.
        self._erasures_seen: int | None = None
        with contextlib.suppress(Exception):  # a database down now is found by the monitor
            self._erasures_seen = store.head_position()

    def _lock(self, session_id: str) -> threading.Lock:
        return self._locks[hash(session_id) % LOCK_STRIPES]

    def caches(self) -> dict[str, WeightedLRU[str, Any]]:
        """The caches by name, for the metrics."""
        return {"histories": self._histories, "renderings": self._renderers}

    # -- one read -------------------------------------------------------------------

    @contextlib.contextmanager
    def one_read(self, session_id: str, written: int | None = None) -> Iterator[None]:
        """Within it, the reads of the session see it at one moment: the first catches
        this server's copy of the history up with the store, the later ones take the
        copy as it is (with whatever this server writes meanwhile). ``written``: a
        version this call's own append just wrote; a copy that holds it needs no
        catch-up at all, being what a read arriving right after the write would see.
        Writes always catch up: they must not decide on a stale copy."""
        token = _ONE_READ.set(_OneRead(session_id, written))
        try:
            yield
        finally:
            _ONE_READ.reset(token)

    @contextlib.contextmanager
    def deciding(self) -> Iterator[None]:
        """Within it (a write), reads catch up with the store whatever read is open."""
        token = _ONE_READ.set(None)
        try:
            yield
        finally:
            _ONE_READ.reset(token)

    def _fresh_in_this_read(self, session_id: str, history: SessionHistory) -> bool:
        read = _ONE_READ.get()
        if read is None or read.session_id != session_id or read.fresh_at is None:
            return False
        return history.version >= read.fresh_at

    def _caught_up_in_this_read(self, session_id: str, history: SessionHistory) -> None:
        read = _ONE_READ.get()
        if read is not None and read.session_id == session_id:
            read.fresh_at = history.version

    # -- histories ------------------------------------------------------------------

    def history(self, session_id: str) -> SessionHistory:
        """The session's history, caught up with the store."""
        self.access.check_tenant(session_id)
        with self._lock(session_id):
            cached = self._histories.get(session_id)
            history = cached or self._cold_history(session_id)
            # Loaded from the cut just now, to the store's latest version.
            just_loaded = cached is None and history.version > 0
            if history.loaded_whole is not None:
                # Loaded from a cut and asked about the past: keep the whole one.
                history = history.loaded_whole
                cached = None
            fresh = just_loaded or (
                cached is not None and self._fresh_in_this_read(session_id, history)
            )
            new_events = (
                [] if fresh else self.store.session_events(session_id, after=history.version)
            )
            if any(isinstance(e, ERASURES) for e in new_events):
                # Erasure reaches back into what this history holds: fold the session
                # again from the store, where the content is gone.
                self._forget(session_id)
                history = self._cold_history(session_id)
                if history.loaded_whole is not None:
                    history = history.loaded_whole
                new_events, cached = [], None
            if new_events:
                history.apply(new_events)
            if (new_events or cached is None) and history.version:
                self._histories.put(session_id, history)
            elif history.version == 0:
                raise SessionNotFound(self.access.ids.client(session_id))
            self._caught_up_in_this_read(session_id, history)
            return history

    def _cold_history(self, session_id: str) -> SessionHistory:
        """A history for a session not in the cache: loaded from the latest cut when
        the aggregate knows where it is, so a cold read costs what the prompt keeps.
        The aggregate and the events from the cut on come from one read."""

        def start(session: Session) -> int:
            cold = session.cold_start
            return cold[2] - 1 if cold is not None else session.version

        try:
            session, events, after = self.store.session_with_events(session_id, start)
        except AggregateNotFoundError:
            return SessionHistory(session_id)
        self.access.read.put(session_id, session)
        # The events read with the aggregate, for this load alone (see below).
        held = [events]

        def fetch(since: int, upto: int | None) -> list[SessionEvent]:
            if held and upto is None and since >= after:
                return [e for e in held[0] if e.originator_version > since]
            return self.store.session_events(session_id, after=since, upto=upto)

        # A session with erasures folds whole: its views list every erasure, and
        # erasures are rare enough not to need the cut's saving.
        erased = session.erased or session.erased_entries
        history = None if erased else load_from_cut(session, fetch)
        # The history keeps ``fetch`` to fold its whole later (a report, a replay), by
        # which time it may have applied newer events: the whole must come from the
        # store then. From the events read now it would end at this version, behind
        # the history (a report asked it for a version it lacked, OUT_OF_RANGE, and
        # the next append failed folding into it), and they would stay in memory.
        held.clear()
        if history is None:
            history = SessionHistory(session_id)
            if after == 0:
                history.apply(events)  # no snapshot: every event is at hand
        return history

    def extend(self, session_id: str, saved: Sequence[SessionEvent]) -> None:
        """Adds the events just saved to this server's copy of the history when it
        ends right before them (no other writer came in between, or the save would
        have failed), so the next read need not fetch and decode them again."""
        with self._lock(session_id):
            history = self._histories.get(session_id)
            if history is None or not saved:
                return
            if history.version != saved[0].originator_version - 1:
                return
            history.apply(saved)
            self._histories.put(session_id, history)  # weighed again: it grew

    def keep(self, session_id: str, history: SessionHistory) -> None:
        """Keeps a history folded elsewhere (an import builds its sessions' own)."""
        with self._lock(session_id):
            self._histories.put(session_id, history)

    def cached(self, session_id: str) -> bool:
        """Whether this server holds the session's history in memory."""
        return self._histories.get(session_id) is not None

    def recent(self, session_id: str) -> Session:
        """The aggregate as this server last saved it, else as stored: for estimates and
        routing on the read path, where a moment's staleness does no harm and a read
        of the store would cost as much as the view itself."""
        self.access.check_tenant(session_id)
        written = self.access.written.get(session_id)
        if written is not None:
            return written
        # Read before, and still what the history (caught up with the store) says.
        read, history = self.access.read.get(session_id), self._histories.get(session_id)
        if read is not None and history is not None and read.version == history.version:
            return read
        if history is None:
            # Not read here yet: the cold load reads the aggregate with the history.
            self.history(session_id)
            read = self.access.read.get(session_id)
            if read is not None:
                return read
        session = self.access.load(session_id)
        self.access.read.put(session_id, session)
        return session

    # -- renderings -----------------------------------------------------------------

    def render(self, view: PromptView, provider_format: str) -> RenderedPrompt:
        """The view in the provider's format, reusing what earlier renders made."""
        session_id = view.log.session_id
        renderer = self._renderers.get(session_id) or PromptRenderer()
        rendered = renderer.render(view, provider_format)
        self._renderers.put(session_id, renderer)  # weighed again: it may have grown
        return rendered

    def remembered(
        self, session_id: str, provider_format: str, request_hash: str
    ) -> RenderedPrompt | None:
        """A rendering this server made of the session, by its hash."""
        renderer = self._renderers.get(session_id)
        return renderer.remembered(provider_format, request_hash) if renderer else None

    # -- forgetting -----------------------------------------------------------------

    def forget(self, session_id: str) -> None:
        """Drops what this server holds of a session erased elsewhere (its content
        in memory); the next read folds it from the store, where it is gone."""
        with self._lock(session_id):
            self._forget(session_id)

    def _forget(self, session_id: str) -> None:
        self._histories.discard(session_id)
        self._renderers.discard(session_id)
        self.access.read.discard(session_id)

    def forget_erased(self) -> int:
        """Drops this server's copies of the sessions erased (here or by another server)
        since it last looked, read or not; answers how many erasures it found."""
        if self._erasures_seen is None:
            self._erasures_seen = self.store.head_position()
            return 0
        found = self.store.erasure_notifications(self._erasures_seen, ERASURES_PER_LOOK)
        for position, session_id in found:
            self.forget(session_id)
            self._erasures_seen = position
        return len(found)
