"""Which sessions a caller may touch, and the aggregates this server holds of them.

Another tenant's session is refused exactly as a missing one, so a caller
learns nothing of the sessions it may not see. The tenant of a session never
changes, so it is remembered once known.
"""

from __future__ import annotations

from typing import Any

from domain.errors import SessionExists, SessionNotFound, quoted
from domain.session import Session
from services.adapters.event_store import EventStore
from services.app import tenancy
from services.app.cache import WeightedLRU

WRITE_CACHE_SESSIONS = 10_000
# Sessions whose tenant this server remembers (a tenant never changes).
TENANT_CACHE_SESSIONS = 100_000


class SessionAccess:
    def __init__(self, store: EventStore, ids: tenancy.SessionIds) -> None:
        self.store = store
        # How callers name sessions, and the streams that hold them (by tenant).
        self.ids = ids
        # The aggregates this server saved last, for its next write to them.
        self.written: WeightedLRU[str, Session] = WeightedLRU(WRITE_CACHE_SESSIONS, lambda _: 1)
        # Aggregates read for the read path, trusted while the history agrees.
        self.read: WeightedLRU[str, Session] = WeightedLRU(WRITE_CACHE_SESSIONS, lambda _: 1)
        self._tenants: WeightedLRU[str, str] = WeightedLRU(TENANT_CACHE_SESSIONS, lambda _: 1)

    def caches(self) -> dict[str, WeightedLRU[str, Any]]:
        """The caches by name, for the metrics."""
        return {"tenants": self._tenants}

    def load(self, session_id: str) -> Session:
        """The session as stored, whoever asks."""
        session = self.store.session(session_id)
        if session is None:
            raise SessionNotFound(self.ids.client(session_id))
        return session

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
