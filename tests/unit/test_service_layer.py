"""The service layer's use cases, one role at a time, built by the composition root on
the in-memory store: a change to a command, a query or the write path is tested here
without a server."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from dataclasses import replace

import pytest

from domain.compaction import Compaction
from domain.compaction_events import CompactionRecorded
from domain.errors import IdempotencyKeyReused, SessionNotFound, Unavailable, VersionConflict
from domain.session import Session
from services import deadline
from services.app import tenancy
from services.bootstrap import Application, build_application
from services.config import Config
from services.deadline import Cut
from tests.unit.support import assistant, call, clear, tool, user


@pytest.fixture
def app() -> Iterator[Application]:
    app = build_application(Config(database_url="memory:"))
    yield app
    app.close()


def _turns(app: Application, session_id: str = "s-1") -> None:
    commands = app.sessions.commands
    commands.sessions.create_session(session_id, lambda defaults: defaults)
    commands.entries.append(session_id, [user("read the file", id="u1")])
    commands.entries.append(session_id, [assistant(id="a1", calls=[call("c1")])])
    commands.entries.append(session_id, [tool("c1", "x" * 400, id="t1"), assistant("done")])
    commands.entries.append(session_id, [user("and now?", id="u2"), assistant("now this")])


def test_every_write_answers_its_own_position(app: Application) -> None:
    commands = app.sessions.commands
    created = commands.sessions.create_session("s-1", lambda defaults: defaults)
    first = commands.entries.append("s-1", [user("hi")], idempotency_key="k")
    second = commands.entries.append("s-1", [user("again")])
    assert created.position is not None and first.position is not None
    assert second.position is not None
    assert created.position < first.position < second.position
    assert second.position == app.sessions.latest_position()
    # A retry saves nothing: it answers the first result, and no position of its own.
    retried = commands.entries.append("s-1", [user("hi")], idempotency_key="k")
    assert retried.result.replayed and retried.result.version == first.result.version
    assert retried.position is None
    with pytest.raises(IdempotencyKeyReused):
        commands.entries.append("s-1", [user("other")], idempotency_key="k")


def test_commands_answer_the_events_they_recorded(app: Application) -> None:
    _turns(app)
    compactions = app.sessions.commands.compactions
    pruned = compactions.record_prune("s-1", [clear("t1")], "too long")
    assert [d.entry_id for d in pruned.result.decisions] == ["t1"]
    assert pruned.position == app.sessions.latest_position()
    recorded = compactions.record_compaction("s-1", Compaction("they read a file", "u2"))
    assert isinstance(recorded.result, CompactionRecorded)
    assert recorded.result.originator_version == recorded.session.version
    undone = compactions.undo_compaction("s-1", recorded.session.version, reason="wrong")
    assert undone.result.compaction_version == recorded.session.version
    redone = compactions.redo_compaction("s-1", undone.session.version)
    assert list(redone.result.compaction_versions) == [recorded.session.version]


def test_an_expected_version_is_checked_by_the_write_path(app: Application) -> None:
    _turns(app)
    version = app.sessions.get_session("s-1").version
    with pytest.raises(VersionConflict):
        app.sessions.commands.entries.clear_session("s-1", "start over", version - 1)
    cleared = app.sessions.commands.entries.clear_session("s-1", "start over", version)
    assert cleared.result == 6 and app.sessions.durable_log("s-1").entries == []


def test_an_erasure_follows_into_forks_and_answers_the_last_write(app: Application) -> None:
    _turns(app)
    forked = app.sessions.commands.forks.fork_session("s-1", new_session_id="f-1")
    assert forked.session.parent_session_id == "s-1" and forked.position is not None
    erased = app.sessions.commands.erasure.erase_entries(
        "s-1", ["u1"], erased_by="dpo", reason="asked"
    )
    assert erased.forks == ["f-1"] and list(erased.event.entry_ids) == ["u1"]
    assert erased.position == app.sessions.latest_position()
    for session_id in ("s-1", "f-1"):
        log = app.sessions.durable_log(session_id)
        assert "read the file" not in repr([e.content for e in log.entries])


def test_the_history_cache_is_extended_by_writes_and_dropped_by_erasure(
    app: Application,
) -> None:
    _turns(app)
    histories = app.sessions.histories
    history = histories.history("s-1")
    app.sessions.commands.entries.append("s-1", [user("more")])
    # The write extended the same copy: no fold from the store.
    assert histories.history("s-1") is history and history.version == 6
    app.sessions.commands.erasure.erase_session("s-1", erased_by="dpo", reason="asked")
    assert not histories.cached("s-1")


def test_every_save_is_heard_by_the_write_paths_listeners(app: Application) -> None:
    heard: list[int] = []
    app.sessions.write_path.on_saved(lambda session, _events: heard.append(session.version))
    app.sessions.commands.sessions.create_session("s-1", lambda d: replace(d, title="t"))
    app.sessions.commands.entries.append("s-1", [user("hi")])
    assert heard == [1, 2]


def test_a_write_queued_on_the_sessions_lock_ends_when_its_call_is_cut(
    app: Application,
) -> None:
    """The client of a write waiting for the session's lock cancels (or the server
    stops): the wait ends, refused UNAVAILABLE, and the write is never made, not even
    once the lock comes free."""
    app.sessions.commands.sessions.create_session("s-1", lambda defaults: defaults)
    cut = Cut()
    refused: list[Unavailable] = []

    def queued_append() -> None:
        with deadline.within(None, cut):  # no deadline: only the cut can end the wait
            try:
                app.sessions.commands.entries.append("s-1", [user("too late")])
            except Unavailable as error:
                refused.append(error)

    with app.sessions.write_path.locked("s-1"):  # the write ahead holds the lock
        writer = threading.Thread(target=queued_append)
        writer.start()
        cut("the call was cancelled")
        writer.join(5)  # a bound only so that a wait that never ends fails, not hangs
        assert not writer.is_alive()
    assert [str(error) for error in refused] == [
        "the call was cancelled while waiting for other writes to the session; "
        "nothing was written: retry"
    ]
    assert app.sessions.durable_log("s-1").entries == []


def test_another_tenants_session_is_missing_to_every_role(app: Application) -> None:
    alice = tenancy.Principal("alice", "a", tenancy.Role.TENANT)
    bob = tenancy.Principal("bob", "b", tenancy.Role.TENANT)
    with tenancy.calling_as(alice):
        stream = app.sessions.ids.stream("mine")
        app.sessions.commands.sessions.create_session(stream, lambda d: d)
        app.sessions.commands.entries.append(stream, [user("hi")])
    with tenancy.calling_as(bob):
        with pytest.raises(SessionNotFound):
            app.sessions.queries.durable_log(stream)
        with pytest.raises(SessionNotFound):
            app.sessions.commands.entries.append(stream, [user("hello")])
        with pytest.raises(SessionNotFound):
            app.sessions.queries.get_session(stream)


def test_cached_aggregates_are_weighed_within_the_cache_cap() -> None:
    """The aggregates a server keeps for its next write and read count against
    SESSIONSTORE_CACHE_MAX_MB like the histories do: past their share, the coldest go,
    and a session written again is loaded from the store as it stands."""
    app = build_application(Config(database_url="memory:", cache_max_mb=1))
    try:
        commands = app.sessions.commands
        for n in range(200):
            commands.sessions.create_session(f"s-{n}", lambda defaults: defaults)
            commands.entries.append(f"s-{n}", [user(f"turn of {n}")], idempotency_key=f"k{n}")
        written = app.sessions.access.written
        share = (1 << 20) // 6 // 2
        assert written.max_weight == share
        assert 0 < written.weight <= share
        assert 10 < len(written) < 200
        assert written.get("s-0") is None  # the coldest went first
        again = commands.entries.append("s-0", [user("back again")])
        assert again.result.version == 3
        assert written.get("s-0") is not None
    finally:
        app.close()


def test_every_aggregate_the_server_keeps_counts_against_the_cache_cap() -> None:
    """Aggregates loaded for any caller (a GetSession, a write whose copy was evicted)
    are kept only within the cap: no cache beside it (the event-sourcing library's
    own, by count, held 10,000) keeps every session touched alive."""
    app = build_application(Config(database_url="memory:", cache_max_mb=1))
    try:
        commands = app.sessions.commands
        for n in range(300):
            commands.sessions.create_session(f"capped-{n}", lambda defaults: defaults)
            commands.entries.append(f"capped-{n}", [user(f"turn of {n}")])
        for n in range(300):
            assert app.sessions.queries.get_session(f"capped-{n}").version == 2
        gc.collect()
        # This test's sessions only: other tests' servers may not be collected yet.
        alive = sum(
            1 for o in gc.get_objects() if isinstance(o, Session) and "capped-" in str(o.id)
        )
        access = app.sessions.access
        assert alive <= len(access.written) + len(access.read) + 2
        assert alive < 100
        # What a load keeps is caught up with the store, and every caller gets a copy
        # of its own to change.
        first = app.sessions.queries.get_session("capped-299")
        commands.entries.append("capped-299", [user("more")])
        again = app.sessions.queries.get_session("capped-299")
        assert (first.version, again.version) == (2, 3)
        assert again is not app.sessions.queries.get_session("capped-299")
    finally:
        app.close()


def test_the_per_session_maps_count_against_the_cache_cap() -> None:
    """The tenant and the latest saved version of every session touched are kept in
    bytes within a share of the cap, not by count beside it (100,000 of each, some
    27 MB, were): together the caches' budgets are the cap, and past its share each
    map forgets its coldest sessions, whose next request asks the store again."""
    cap = 1 << 20
    app = build_application(Config(database_url="memory:", cache_max_mb=1))
    try:
        sessions = app.sessions
        caches = {
            **sessions.histories.caches(),
            **sessions.access.caches(),
            **sessions.saved_versions.caches(),
        }
        assert set(caches) == {
            "histories",
            "renderings",
            "tenants",
            "written",
            "read",
            "saved_versions",
        }
        assert cap - 8 <= sum(c.max_weight for c in caches.values()) <= cap
        commands = sessions.commands
        for n in range(300):
            commands.sessions.create_session(f"mapped-{n}", lambda defaults: defaults)
            commands.entries.append(f"mapped-{n}", [user(f"turn of {n}")])
        for n in range(300):
            sessions.queries.get_session(f"mapped-{n}")
        for name in ("tenants", "saved_versions"):
            cache = caches[name]
            assert cache.max_weight == cap // 32
            assert 0 < cache.weight <= cache.max_weight, name
            assert 10 < len(cache) < 300, name
            assert cache.evictions > 0, name
        # A session forgotten is still served, its tenant read again.
        assert caches["tenants"].get("mapped-0") is None
        assert sessions.queries.get_session("mapped-0").version == 2
        assert caches["tenants"].get("mapped-0") is not None
    finally:
        app.close()
