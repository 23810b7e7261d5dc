"""Many sessions read together: the aggregates of a page (a listing, recall hits).

Each session is read from the copy the server holds of it, or else from its
latest snapshot, and caught up with the events after that; the events and
their keys come in one round trip for the whole page where the database is
remote, not one or more for each session.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, cast

from eventsourcing.persistence import StoredEvent

from domain.session import Session, SessionEvent
from services.adapters.event_keys import SessionKeys, keys_being_read
from services.adapters.event_store import EventStore

Row = TypeVar("Row")


def caught_up(store: EventStore, held: Mapping[str, Session | None]) -> dict[str, Session]:
    """The sessions at their latest versions, each from the copy held of it (None:
    none held) or else its latest snapshot, then the events after that. A copy held
    is never changed (one with events after it is copied first); a session not
    stored is left out."""
    if not held:
        return {}  # an empty page: no query
    unheld = [session_id for session_id, session in held.items() if session is None]
    snapshots: dict[str, StoredEvent] = {}
    if unheld and store.snapshots is not None:
        found = store.indexing.latest_snapshots(unheld, store.snapshots.recorder)
        snapshots = {str(s.originator_id): s for s in found}
    after = {sid: _after(session, snapshots.get(sid)) for sid, session in held.items()}
    stored, key_rows = store.indexing.events_and_keys_of(after)
    events_of = _by_session(stored, lambda e: str(e.originator_id))
    keys_of = _by_session(key_rows, lambda row: row[0])
    keys = {**(keys_being_read.get() or {})}
    for session_id, (_, keys_after) in after.items():
        keys[session_id] = SessionKeys(store.indexing, session_id, None)
        keys[session_id].add(keys_of.get(session_id, []), (keys_after, None))
    token = keys_being_read.set(keys)
    try:
        latest = {
            session_id: _latest(store, session, snapshots.get(session_id), events_of[session_id])
            for session_id, session in held.items()
        }
    finally:
        keys_being_read.reset(token)
    return {session_id: s for session_id, s in latest.items() if s is not None}


def _after(session: Session | None, snapshot: StoredEvent | None) -> tuple[int, int]:
    """(events after, keys after) of a session: what is held, or the snapshot, whose
    key is of its own version."""
    if session is not None:
        return session.version, session.version
    if snapshot is not None:
        return snapshot.originator_version, snapshot.originator_version - 1
    return 0, 0


def _latest(
    store: EventStore,
    session: Session | None,
    snapshot: StoredEvent | None,
    events: list[StoredEvent],
) -> Session | None:
    aggregate: Any = session
    if session is None and snapshot is not None:
        aggregate = cast(Session.Snapshot, store.mapper.to_domain_event(snapshot)).mutate(None)
    elif session is not None and events:
        aggregate = copy.deepcopy(session)
    for stored in events:
        aggregate = cast(SessionEvent, store.mapper.to_domain_event(stored)).mutate(aggregate)
    return cast(Session | None, aggregate)


def _by_session(rows: Iterable[Row], session_of: Callable[[Row], str]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        grouped[session_of(row)].append(row)
    return grouped
