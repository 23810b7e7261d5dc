"""Which sessions a caller may touch, and the aggregates this server holds of them.

Another tenant's session is refused exactly as a missing one, so a caller
learns nothing of the sessions it may not see. The tenant of a session never
changes, so it is remembered once known.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from domain.errors import SessionExists, SessionNotFound, quoted
from domain.session import Session
from services.adapters.event_store import EventStore
from services.adapters.session_batches import caught_up
from services.app import tenancy
from services.app.cache import RSS_PER_LIVE_BYTE, WeightedLRU, per_session_entry

# What a loaded aggregate holds before the parts that grow with its use, and
# what each of those adds (live bytes, measured with tracemalloc on sessions of
# 200 entries: settings, counters, the snapshot's decoded state), scaled like
# the history cache's weights by what the process really holds per live byte.
AGGREGATE_BYTES = 3_800
IDEMPOTENCY_KEY_BYTES = 200
OPEN_CALL_BYTES = 120
CUT_BYTES = 100


def aggregate_weight(session: Session) -> float:
    """Roughly the memory one cached aggregate keeps alive."""
    live = (
        AGGREGATE_BYTES
        + IDEMPOTENCY_KEY_BYTES * len(session.recent_appends)
        + OPEN_CALL_BYTES * len(session.open_tool_calls)
        + CUT_BYTES * len(session.cuts)
    )
    return live * RSS_PER_LIVE_BYTE


class SessionAccess:
    def __init__(
        self,
        store: EventStore,
        ids: tenancy.SessionIds,
        budget_bytes: int,
        tenants_budget_bytes: int,
    ) -> None:
        self.store = store
        # How callers name sessions, and the streams that hold them (by tenant).
        self.ids = ids
        # Half the budget each: the aggregates this server saved last, for its
        # next write to them, and those read for the read path, trusted while
        # the history agrees. Weighed in bytes, so that the cache cap counts
        # them (at 10,000 sessions they held some 75 MB beside it).
        self.written: WeightedLRU[str, Session] = WeightedLRU(budget_bytes // 2, aggregate_weight)
        self.read: WeightedLRU[str, Session] = WeightedLRU(budget_bytes // 2, aggregate_weight)
        # The tenant of each session read or written here (a tenant never changes),
        # so that checking a caller's tenant costs no query.
        self._tenants: WeightedLRU[str, str] = WeightedLRU(tenants_budget_bytes, per_session_entry)

    def caches(self) -> dict[str, WeightedLRU[str, Any]]:
        """The caches by name, for the metrics."""
        return {"tenants": self._tenants, "written": self.written, "read": self.read}

    def load(self, session_id: str) -> Session:
        """The session as stored, whoever asks: a copy of its own, for a command to change.

        The copy read last is kept in ``read`` (within the cap) and caught up with
        the events stored since, one query, instead of a read from the snapshot.
        The cached copy is never changed in place: ``recent`` hands it to readers.
        """
        cached = self.read.get(session_id)
        if cached is None:
            session = self.store.session(session_id)
            if session is None:
                raise SessionNotFound(self.ids.client(session_id))
        else:
            newer = self.store.session_events(session_id, after=cached.version)
            if not newer:
                return copy.deepcopy(cached)
            session = copy.deepcopy(cached)
            for event in newer:
                event.mutate(session)
        self.read.put(session_id, session)
        return copy.deepcopy(session)

    def load_many(self, session_ids: Sequence[str]) -> list[Session]:
        """The sessions as stored, in their order, for reading only: the copies kept
        in ``read``, caught up in two queries however many there are (a page of a
        listing), not one each. Sessions not stored are left out."""
        held = {session_id: self.read.get(session_id) for session_id in session_ids}
        latest = caught_up(self.store, held)
        for session_id, session in latest.items():
            if session is not held[session_id]:
                self.read.put(session_id, session)
            self._tenants.put(session_id, session.tenant)
        return [latest[s] for s in session_ids if s in latest]

    def aggregate(self, session_id: str) -> Session:
        """The session as stored, if the caller may see it."""
        session = self.load(session_id)
        self._tenants.put(session_id, session.tenant)
        if not tenancy.caller().sees(session.tenant):
            raise SessionNotFound(self.ids.client(session_id))
        return session

    def check_tenant(self, session_id: str) -> None:
        """Refuses another tenant's session exactly as a missing one."""
        caller = tenancy.caller()
        if caller.sees_all_tenants:
            return  # no lookup at all without authentication, nor for an admin
        tenant = self._tenants.get(session_id)
        if tenant is None:
            known = self.written.get(session_id) or self.read.get(session_id)
            tenant = known.tenant if known is not None else self.load(session_id).tenant
            self._tenants.put(session_id, tenant)
        if tenant != caller.tenant:
            raise SessionNotFound(self.ids.client(session_id))

    def check_new_session_id(self, session_id: str) -> None:
        if self.store.session(session_id) is not None:
            raise SessionExists(
                f"a session with id {quoted(self.ids.client(session_id))} already exists"
            )
