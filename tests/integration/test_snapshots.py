"""Snapshots keep a cold load small however the session grew."""

from __future__ import annotations

from services.bootstrap import build_service
from services.config import Config
from tests.unit.support import user


def test_a_session_grown_by_large_appends_is_snapshotted_by_entries() -> None:
    service = build_service(Config(database_url="memory:"))
    service.create_session("s-1", lambda s: s)
    for turn in range(3):
        service.append("s-1", [user(f"{turn}-{n}") for n in range(600)])
    snapshots = service.store.snapshots
    assert snapshots is not None
    # Versions 2-4 hold entries 0-599, 600-1,199 and 1,200-1,799: the
    # second append crosses 1,000 entries, long before version 100.
    assert [s.originator_version for s in snapshots.get("s-1")] == [3]
    service.close()
