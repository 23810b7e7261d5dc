"""The claim a server holds on PostgreSQL while a model summarises a session: taken,
refused to every other connection while held, and free again when the summary ends,
however it ends, or when the holder's connection goes (a server that died).

Each store below stands for one server: its own claims, on connections of their own.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg import sql

from domain.errors import Unavailable
from services.adapters.event_store import EventStore, build_event_store
from services.adapters.summary_claims import (
    OneServerClaims,
    PostgresSummaryClaims,
    claim_key,
    summary_claims,
)
from services.config import Config
from tests.support.waiting import eventually

Servers = Callable[..., PostgresSummaryClaims]


@pytest.fixture
def servers(postgres_schema_url: str) -> Iterator[Servers]:
    """Makes the claims of one more server on the test's schema (or on ``url``)."""
    stores: list[EventStore] = []
    made: list[PostgresSummaryClaims] = []

    def server(url: str = postgres_schema_url, size: int = 2) -> PostgresSummaryClaims:
        store = build_event_store(Config(database_url=url))
        stores.append(store)
        claims = summary_claims(store.postgres, size)
        assert isinstance(claims, PostgresSummaryClaims)
        made.append(claims)
        return claims

    yield server
    for claims in made:
        claims.close()
    for store in stores:
        store.close()


def holds(claims: PostgresSummaryClaims, session_id: str) -> bool:
    """Whether ``claims`` could take the session's claim now (then let go at once)."""
    with claims.hold(session_id) as held:
        return held


@contextmanager
def held(claims: PostgresSummaryClaims, session_id: str) -> Iterator[None]:
    with claims.hold(session_id) as taken:
        assert taken
        yield


def test_a_claim_is_refused_to_another_server_while_held_and_free_after(
    servers: Servers,
) -> None:
    first, other = servers(), servers()
    with held(first, "s-1"):
        assert not holds(other, "s-1")
        assert holds(other, "s-2")  # a claim is one session's
    assert holds(other, "s-1")
    assert holds(first, "s-1")


def test_a_claim_is_released_when_its_summary_raises(servers: Servers) -> None:
    first, other = servers(), servers()
    with pytest.raises(RuntimeError, match="the model failed"), held(first, "s-1"):
        raise RuntimeError("the model failed")
    assert holds(other, "s-1")


def test_stores_in_two_schemas_of_one_database_claim_apart(
    servers: Servers, postgres_url: str
) -> None:
    schema = f"test_{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in postgres_url else "?"
    try:
        here, there = servers(), servers(f"{postgres_url}{separator}schema={schema}")
        assert here.schema != there.schema == schema
        assert claim_key(here.schema, "s-1") != claim_key(there.schema, "s-1")
        with held(here, "s-1"):
            assert holds(there, "s-1")
    finally:
        with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_a_claim_goes_with_its_connection(servers: Servers, postgres_url: str) -> None:
    """Closed with the server (its claims' pool), or ended by PostgreSQL (the process
    died, the host vanished): the claim is free, and its holder's end raises nothing."""
    first, other = servers(), servers()
    claim = first.hold("s-1")
    assert claim.__enter__()
    first.close()
    assert holds(other, "s-1")
    claim.__exit__(None, None, None)

    again = servers()
    with held(again, "s-2"):
        _terminate_holder(postgres_url, claim_key(again.schema, "s-2"))
        assert eventually(lambda: holds(other, "s-2"), within=10)
    # The pool dropped the dead connection: the next claim takes a fresh one.
    assert holds(again, "s-2")


def test_a_connection_the_database_ended_while_idle_is_replaced(
    servers: Servers, postgres_url: str
) -> None:
    """A database restarted between two summaries: the pool's idle connection is dead,
    and the next claim is taken on a new one, not refused as an outage."""
    claims = servers(size=1)
    assert holds(claims, "s-1")  # its connection now idle in the pool
    name = f"sessionstore-compaction {socket.gethostname()} {os.getpid()}"
    with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as conn:
        (ended,) = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s",
            (name,),
        ).fetchone() or (0,)
    assert ended == 1
    assert holds(claims, "s-1")


def test_claims_wait_for_one_of_the_pools_connections(servers: Servers) -> None:
    claims = servers(size=1)
    entered: list[float] = []

    def second() -> None:
        with held(claims, "s-2"):
            entered.append(time.monotonic())

    with held(claims, "s-1"):
        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.3)
        assert not entered, "a second connection was opened past the pool's size"
        released = time.monotonic()
    thread.join(timeout=15)
    assert entered and entered[0] >= released


def test_a_database_that_cannot_be_reached_is_unavailable_and_frees_the_pool() -> None:
    claims = PostgresSummaryClaims(
        {"host": "127.0.0.1", "port": 1, "dbname": "test", "user": "postgres"}, "public", 1
    )
    for _ in range(2):  # the failed try gave its place in the pool back
        with pytest.raises(Unavailable, match="unreachable"), claims.hold("s-1"):
            pass
    claims.close()


def test_a_store_of_one_server_grants_every_claim() -> None:
    """SQLite and memory: stores have no other server to leave a summary to."""
    claims = summary_claims(None, 4)
    assert isinstance(claims, OneServerClaims)
    with claims.hold("s-1") as first, claims.hold("s-1") as second:
        assert first and second


def _terminate_holder(postgres_url: str, key: int) -> None:
    """Ends the PostgreSQL session holding the advisory lock ``key`` (a bigint key is
    kept as two halves: classid the high 32 bits, objid the low)."""
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as conn:
        (ended,) = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_locks "
            "WHERE locktype = 'advisory' AND objsubid = 1 AND granted "
            "AND classid::bigint = %s AND objid::bigint = %s",
            (unsigned >> 32, unsigned & 0xFFFF_FFFF),
        ).fetchone() or (0,)
    assert ended == 1
