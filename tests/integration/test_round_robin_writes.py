"""Turns written by servers in turn, as behind a round-robin balancer: each server's
copy of the session is stale when its turn comes, its save loses to the version
another server took, and the write is made again on the store's copy."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from domain.content import PromptRef
from domain.errors import VersionConflict
from services.app.sessions import SessionService
from services.bootstrap import build_service
from services.config import Config
from tests.unit.support import assistant, user


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[SessionService]]:
    """Three servers' services on one SQLite file."""
    url = f"sqlite:///{tmp_path}/sessions.db"
    services = [build_service(Config(database_url=url)) for _ in range(3)]
    yield services
    for service in services:
        service.close()


def _texts(service: SessionService, session_id: str) -> list[str]:
    return [e.content[0].text for e in service.durable_log(session_id).entries]  # type: ignore[union-attr]


def _store_reads(service: SessionService) -> int:
    """Lookups of the copy kept for reads of the store (each read of the aggregate makes one)."""
    read = service.access.read
    return read.hits + read.misses


def test_a_stale_server_writes_its_turn_with_one_read_of_the_store(
    servers: list[SessionService],
) -> None:
    servers[0].create_session("rr", lambda d: d)
    for turn in range(9):
        servers[turn % 3].append("rr", [user(f"turn {turn}")])
    for turn in range(9, 18):
        server = servers[turn % 3]
        # Two turns behind: the first save loses, the next starts from the copy
        # that save read, without reading the store again.
        assert server.access.written.get("rr").version == turn + 1 - 2  # type: ignore[union-attr]
        reads = _store_reads(server)
        written = server.commands.entries.append("rr", [user(f"turn {turn}")])
        assert written.session.version == turn + 2  # Started, then one event a turn
        assert _store_reads(server) == reads + 1
    assert _texts(servers[1], "rr") == [f"turn {turn}" for turn in range(18)]


def test_a_stale_copy_still_hears_the_version_the_store_holds(
    servers: list[SessionService],
) -> None:
    first, second, _ = servers
    first.create_session("expects", lambda d: d)
    first.append("expects", [user("one")])
    second.append("expects", [user("two")])
    second.append("expects", [user("three")])
    # The first server's copy is at version 2, the store at 4: a write that expects
    # 2 is refused with the store's version, and nothing is written.
    with pytest.raises(VersionConflict) as refused:
        first.append("expects", [user("stale")], expected_version=2)
    assert (refused.value.expected, refused.value.actual) == (2, 4)
    written = first.commands.entries.append("expects", [user("four")], expected_version=4)
    assert written.session.version == 5
    assert _texts(second, "expects") == ["one", "two", "three", "four"]


def test_a_copy_older_than_what_the_client_has_seen_is_not_tried(
    servers: list[SessionService],
) -> None:
    first, second, third = servers
    first.create_session("seen", lambda d: d)
    for turn in range(6):
        servers[turn % 3].append("seen", [user(f"turn {turn}")])
    # Every server's copy is now behind the store. Told nothing, a server saves on
    # its copy, loses to the version another server took, and writes again.
    lost = first.write_path.lost_races
    latest = first.append("seen", [user("blind")]).version
    assert first.write_path.lost_races == lost + 1
    # An answer names the view it was made from: the server knows its copy is
    # stale before saving, and reads the store's instead of losing a save.
    lost, reads = second.write_path.lost_races, _store_reads(second)
    answer = replace(assistant("an answer"), prompt_ref=PromptRef(latest, "openai", "hash"))
    written = second.commands.entries.append("seen", [answer])
    assert second.write_path.lost_races == lost
    assert _store_reads(second) == reads + 1
    assert written.session.version == latest + 1
    # Likewise the view a client holds (AppendEntries' view_after_append.held_version).
    lost = third.write_path.lost_races
    written = third.commands.entries.append("seen", [user("held")], held_version=latest + 1)
    assert third.write_path.lost_races == lost
    assert written.session.version == latest + 2
    # A version the store never reached costs a read, never a wrong write.
    written = third.commands.entries.append("seen", [user("ahead")], held_version=latest + 99)
    assert written.session.version == latest + 3
    assert _texts(first, "seen")[-4:] == ["blind", "an answer", "held", "ahead"]
