"""Entry and tool call ids are unique in storage, checked without reading the history.

Each case runs on SQLite, PostgreSQL and in memory, through the service as the
server builds it. "Cold" means a service that never saw the session before,
as after a restart or on another server.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from domain.errors import DuplicateEntry, InvalidRequest
from domain.ids import UsedIds
from services.app.sessions import SessionService
from services.bootstrap import build_service, build_sessions
from services.config import Config
from tests.unit.support import assistant, call, tool, user


@pytest.fixture(params=["sqlite", "postgres", "memory"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/sessions.db"
    if request.param == "memory":
        return "memory:"
    return str(request.getfixturevalue("postgres_schema_url"))


def service_on(url: str) -> SessionService:
    return build_service(Config(database_url=url))


def seeded(service: SessionService) -> None:
    service.create_session("s-1", lambda s: s)
    service.append("s-1", [user("hi", id="u1"), assistant(id="a1", calls=[call("c1")])])
    service.append("s-1", [tool("c1", "done", id="t1"), assistant("ok")])


@pytest.fixture
def cold(url: str) -> Iterator[tuple[SessionService, SessionService]]:
    """A service that wrote the session, and a second one that never saw it."""
    first = service_on(url)
    seeded(first)
    # Nothing outlives a memory store: there the second service shares it.
    shared = url == "memory:"
    second = build_sessions(first.config, first.store) if shared else service_on(url)
    yield first, second
    if not shared:
        second.close()
    first.close()


def test_a_cold_service_refuses_used_ids_without_reading_the_history(
    cold: tuple[SessionService, SessionService],
) -> None:
    _, service = cold
    with pytest.raises(DuplicateEntry, match="entry id 'u1'"):
        service.append("s-1", [user("again", id="u1")])
    with pytest.raises(DuplicateEntry, match="tool call id 'c1'"):
        service.append("s-1", [assistant(calls=[call("c1")])])
    with pytest.raises(InvalidRequest, match="parent_id 'nope'"):
        service.append("s-1", [replace(user("branch"), parent_id="nope")])
    branched = service.append("s-1", [replace(user("branch", id="u2"), parent_id="u1")])
    assert branched.entries[0].parent_id == "u1"
    assert not service.history_cached("s-1")


def test_ids_are_per_session(cold: tuple[SessionService, SessionService]) -> None:
    _, service = cold
    service.create_session("s-2", lambda s: s)
    service.append("s-2", [user("hi", id="u1"), assistant(calls=[call("c1")])])
    assert not service.history_cached("s-1")


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store that outlives its server (a memory store has no earlier life)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/sessions.db"
    return str(request.getfixturevalue("postgres_schema_url"))


def test_an_existing_database_gets_its_index_filled_at_start(durable_url: str) -> None:
    url = durable_url
    service = service_on(url)
    seeded(service)
    service.fork_session("s-1", new_session_id="f-1")
    _drop_id_index(service, url)
    service.close()

    restarted = service_on(url)
    try:
        # u1, a1, c1, t1 and the generated id of the last entry, in s-1 and its
        # fork, and the fork's link.
        assert restarted.store.backfilled_ids == 11
        assert restarted.store.forks_of("s-1") == [("f-1", restarted.get_session("s-1").version)]
        with pytest.raises(DuplicateEntry, match="entry id 'a1'"):
            restarted.append("s-1", [user("again", id="a1")])
        with pytest.raises(DuplicateEntry, match="tool call id 'c1'"):
            restarted.append("s-1", [assistant(calls=[call("c1")])])
        # The refusals came from the index: the history was never loaded.
        assert not restarted.history_cached("s-1")
        assert service_on(url).store.backfilled_ids == 0  # filled once only
    finally:
        restarted.close()


def _drop_id_index(service: SessionService, url: str) -> None:
    """Makes the database look like one written before the index existed."""
    recorder = service.store.recorder
    table = recorder.ids_table_name  # type: ignore[attr-defined]
    if url.startswith("sqlite"):
        with recorder.datastore.transaction(commit=True) as c:  # type: ignore[attr-defined]
            c.execute(f"DROP TABLE {table}")
        return
    schema = recorder.datastore.schema  # type: ignore[attr-defined]
    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP TABLE {}.{}").format(sql.Identifier(schema), sql.Identifier(table))
        )


def test_lookups_name_kinds_apart(cold: tuple[SessionService, SessionService]) -> None:
    first, _ = cold
    used = first.store.ids_of("s-1").used({"c1", "u1", "zz"}, {"u1", "c1"})
    assert used == UsedIds(frozenset({"u1"}), frozenset({"c1"}))
