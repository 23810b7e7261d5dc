"""A damaged database takes the server out of rotation: health says NOT_SERVING.

Calls on a damaged SQLite file, or on data or an index PostgreSQL reports
damaged, are refused UNAVAILABLE (`database_corrupt`, tests/e2e/test_database_states.py);
health said SERVING all the same, so orchestrators, which route by health, kept
sending calls to a server that could not answer them. Damage does not heal and no
cheap look tells it gone: from the first refusal on, health says NOT_SERVING
until the server restarts (on the database restored, or the index rebuilt), even
while calls that need nothing damaged are served. Liveness holds throughout: a
restart on the same damaged database would not help. Damage met by the view after
an append, which fails without failing the call, counts as damage met by a call.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import grpc
import psycopg
import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.grpc.database_monitor import MONITOR_INTERVAL_SECONDS
from services.grpc.server import LIVENESS, SERVICE_NAME
from tests.conftest import server_channel, start_server
from tests.e2e.test_database_states import (
    RECOVERY_SECONDS,
    _migrate,
    _refusal,
    restore_sqlite_file,
)
from tests.e2e.test_faults import NOT_SERVING, SERVING, _health
from tests.support.grpc_calls import Stub, append, new_session, user
from tests.support.pg_cluster import Cluster, cluster_for_test
from tests.support.waiting import eventually

# Looks of the monitor a state is held through, to tell it kept from one not yet changed.
HELD_LOOKS = 4
# PostgreSQL's page size: what a damaged block is.
BLOCK_BYTES = 8192
# Turns long enough that each one's event takes a page of its own (SQLite) or goes to
# the TOAST table (PostgreSQL), a few to a block: the oldest lie apart from the newest.
LONG_TURN = "a question long enough to fill a page " * 50
TURNS = 12
# Snapshots every few events: the aggregate loads from one, without the oldest events.
SNAPSHOT_INTERVAL = 5


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with cluster_for_test("sessionstore-damage-") as own:
        yield own


def _held_through_looks(channel: grpc.Channel, status: int) -> None:
    """Health keeps saying ``status`` over several of the monitor's looks."""
    for _ in range(HELD_LOOKS):
        time.sleep(MONITOR_INTERVAL_SECONDS)
        assert _health(channel) == status


def test_a_damaged_sqlite_file_turns_health_not_serving_until_restarted(
    tmp_path: Path,
) -> None:
    """The store's file overwritten under a running server: health says NOT_SERVING,
    before any call is refused (the monitor's own look meets it), saying why in the
    refusal's words; liveness SERVING. A server started on the file restored from a
    backup says SERVING."""
    path, backup = tmp_path / "sessions.db", tmp_path / "backup.db"
    server = start_server(f"sqlite:///{path}")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            session = new_session(store, model="gpt-4o")
            assert _health(channel) == SERVING
            with closing(sqlite3.connect(path)) as connection:
                with closing(sqlite3.connect(backup)) as copy:
                    connection.backup(copy)
                # All in the file, none left in the write-ahead log to read instead.
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            with path.open("r+b") as file:
                file.write(b"\0garbage" * 12)  # over the header and the first rows

            # No call needed: the monitor's own look at the store meets the damage.
            assert eventually(lambda: _health(channel) == NOT_SERVING, RECOVERY_SECONDS)
            code, message, reason, _ = _refusal(
                lambda: store.GetSession(pb.GetSessionRequest(session_id=session.id), timeout=10)
            )
            assert (code, reason) == (grpc.StatusCode.UNAVAILABLE, "database_corrupt"), message
            assert _health(channel, SERVICE_NAME) == NOT_SERVING
            assert _health(channel, LIVENESS) == SERVING
            assert server.monitor.reason.startswith(
                "the database file is damaged (file is not a database): "
            ), server.monitor.reason
            _held_through_looks(channel, NOT_SERVING)
    finally:
        server.stop(0)

    restore_sqlite_file(path, backup)
    with server_channel(f"sqlite:///{path}") as channel:
        assert Stub(channel).GetSession(pb.GetSessionRequest(session_id=session.id)).version
        _held_through_looks(channel, SERVING)


def _damage(cluster: Cluster, relation: str, block: bytes) -> None:
    """Block 0 of ``relation``'s file overwritten with ``block``, the server stopped
    meanwhile so that none of it is left in its buffers to be read instead."""
    with psycopg.connect(cluster.url) as connection:
        row = connection.execute("SELECT pg_relation_filepath(%s)", (relation,)).fetchone()
    assert row is not None and row[0], relation
    cluster.stop()
    with (cluster.data / str(row[0])).open("r+b") as file:
        file.write(block)
    cluster.start()


@pytest.mark.parametrize(
    ("relation", "block", "damage"),
    [
        # A page whose header makes no sense: SQLSTATE XX001, data_corrupted.
        pytest.param(
            "session_catalog", b"\xff" * BLOCK_BYTES, "invalid page in block 0", id="data"
        ),
        # An index's metapage zeroed: SQLSTATE XX002, index_corrupted.
        pytest.param(
            "session_catalog_pkey", b"\0" * BLOCK_BYTES, "contains unexpected zero page", id="index"
        ),
    ],
)
def test_data_postgresql_reports_damaged_turns_health_not_serving(
    cluster: Cluster, relation: str, block: bytes, damage: str
) -> None:
    """A page of the session catalog (or of its index) damaged on disk: the listing
    is refused `database_corrupt` and health says NOT_SERVING, and keeps saying so
    while calls on the events, intact, are served, and after the table is made
    again, until the server restarts: a server started then says SERVING and lists
    again."""
    server = start_server(cluster.url)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            session = new_session(store, model="gpt-4o")
            store.AppendEntries(
                pb.AppendEntriesRequest(session_id=session.id, entries=[user("hello")]),
                timeout=10,
            )
            assert eventually(
                lambda: bool(store.ListSessions(pb.ListSessionsRequest(), timeout=10).sessions),
                RECOVERY_SECONDS,
            )
            _damage(cluster, relation, block)
            assert eventually(lambda: _health(channel) == SERVING, RECOVERY_SECONDS)  # back up

            def listing_refused() -> bool:
                code, message, reason, _ = _refusal(
                    lambda: store.ListSessions(pb.ListSessionsRequest(), timeout=10)
                )
                assert code == grpc.StatusCode.UNAVAILABLE, message
                if reason == "unavailable":  # connections the restart broke, being replaced
                    return False
                assert reason == "database_corrupt", message
                assert "the database reports damaged data (" in message, message
                assert damage in message, message
                return True

            assert eventually(listing_refused, RECOVERY_SECONDS)
            assert eventually(lambda: _health(channel) == NOT_SERVING, RECOVERY_SECONDS)
            assert _health(channel, LIVENESS) == SERVING
            assert "the database reports damaged data (" in server.monitor.reason
            # The events are intact, and served; the server stays out of rotation.
            got = store.GetSession(pb.GetSessionRequest(session_id=session.id), timeout=10)
            assert got.version == 2
            _held_through_looks(channel, NOT_SERVING)

            # A read model's table is made again from the events: dropped, then
            # migrated (no backup needed). Fixed, the running server still says
            # NOT_SERVING: it cannot tell the damage gone.
            with psycopg.connect(cluster.url, autocommit=True) as connection:
                connection.execute("DROP TABLE session_catalog")
            _migrate(cluster.url)
            _held_through_looks(channel, NOT_SERVING)
    finally:
        server.stop(0)

    server = start_server(cluster.url)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            assert _health(channel) == SERVING
            listed = Stub(channel).ListSessions(pb.ListSessionsRequest(), timeout=10)
            assert [s.id for s in listed.sessions] == [session.id]
            _held_through_looks(channel, SERVING)
    finally:
        server.stop(0)


def _session_of_long_turns(database_url: str) -> str:
    """A session of TURNS long turns, by a server stopped since: none holds it in memory."""
    server = start_server(database_url, snapshot_interval=SNAPSHOT_INTERVAL, projections="off")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            session = new_session(store, model="gpt-4o")
            for _ in range(TURNS):
                append(store, session.id, user(LONG_TURN))
            return session.id
    finally:
        server.stop(0)


def _damage_sqlite_oldest_event(path: Path) -> None:
    """The page holding the store's oldest event overwritten, the server stopped."""
    with closing(sqlite3.connect(path)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # all in the file
        # dbstat walks each table's B-tree in key order: the first leaf holds the oldest.
        (page,) = connection.execute(
            "SELECT pageno FROM dbstat WHERE name = 'stored_events' AND pagetype = 'leaf' "
            "ORDER BY path LIMIT 1"
        ).fetchone()
        (page_bytes,) = connection.execute("PRAGMA page_size").fetchone()
    with path.open("r+b") as file:
        file.seek((page - 1) * page_bytes)
        file.write(b"\xff" * page_bytes)


def _damage_postgres_oldest_events(cluster: Cluster) -> None:
    """Block 0 of the events' TOAST table (the oldest long turns' content) damaged."""
    with psycopg.connect(cluster.url) as connection:
        row = connection.execute(
            "SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = %s",
            ("sessionstore_events",),
        ).fetchone()
    assert row is not None and row[0] != "-", row
    _damage(cluster, row[0], b"\xff" * BLOCK_BYTES)


@pytest.mark.parametrize("database", ["sqlite", "postgres"])
def test_damage_met_by_the_view_after_an_append_turns_health_not_serving(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The damage lies where only the view after an append reads it: the oldest events
    of a session, from which a server that has not read the session yet folds its
    history, while the append loads the aggregate from its latest snapshot on. The
    append is written and answered, with its view's refusal as text, and health says
    NOT_SERVING from then on, as after a call refused so, in the refusal's words."""
    if database == "sqlite":
        path = tmp_path / "sessions.db"
        url = f"sqlite:///{path}"
        session_id = _session_of_long_turns(url)
        _damage_sqlite_oldest_event(path)
        damage = "the database file is damaged (database disk image is malformed): "
    else:
        cluster: Cluster = request.getfixturevalue("cluster")
        url = cluster.url
        session_id = _session_of_long_turns(url)
        _damage_postgres_oldest_events(cluster)
        damage = "the database reports damaged data (invalid page in block 0 of relation "
    server = start_server(url, snapshot_interval=SNAPSHOT_INTERVAL, projections="off")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            assert _health(channel) == SERVING
            turn = append(
                Stub(channel),
                session_id,
                user("a question once the oldest turns are damaged"),
                view_after_append=pb.ViewAfterAppend(format=pb.PROMPT_FORMAT_OPENAI),
            )
            assert turn.version == TURNS + 2  # written: the session started, its turns, this
            assert not turn.HasField("view_after_append")
            assert turn.view_after_append_error.startswith(f"UNAVAILABLE: {damage}"), turn

            assert eventually(lambda: _health(channel) == NOT_SERVING, RECOVERY_SECONDS)
            assert f"UNAVAILABLE: {server.monitor.reason}" == turn.view_after_append_error
            assert _health(channel, LIVENESS) == SERVING
    finally:
        server.stop(0)
