"""An event no read model can apply stops nothing: it is quarantined and the models go on.

On SQLite and PostgreSQL, a stored event is made unprojectable on purpose
(bytes that do not decode, as a corrupted row or another program's write
would leave). The models that read it quarantine it and move past it; the
others, and every other session, are unaffected; a query that waited for it
says so instead of timing out; the health detail and `sessionstore
readmodels status` show it; `readmodels retry` applies it once it is fixed.
A database holding such an event from an earlier release recovers by itself
when the new release starts.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import replace
from typing import Any

import grpc
import psycopg
import structlog.testing
from click.testing import CliRunner
from eventsourcing.domain import get_topic
from eventsourcing.persistence import StoredEvent
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from psycopg import sql

from domain.compaction_events import CompactionRecorded
from domain.session_events import Started
from proto.sessionstore.v1 import session_store_pb2 as pb
from services.adapters import legacy_tenants
from services.adapters.read_model_db import open_database
from services.bootstrap import build_service
from services.cli import cli
from services.config import Config
from services.grpc.server import RunningServer
from services.readmodels.admin import migrate_database
from tests.conftest import start_server
from tests.e2e.test_read_models import _history, _models
from tests.integration.test_read_model_migrations import _downgrade_to
from tests.support.grpc_calls import Stub
from tests.support.prometheus import scrape, value

POISON = "poison-1"
COMPACTION_TOPIC = get_topic(CompactionRecorded)


def raw_sql(database_url: str, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Runs SQL on the events' database, bypassing the store: "{events}" names the
    events table, "{legacy_tenants}" the list of pre-scoping tenants' sessions."""
    tables = {"events": "events", "legacy_tenants": "events" + legacy_tenants.TABLE_SUFFIX}
    if database_url.startswith("sqlite"):
        with sqlite3.connect(database_url.removeprefix("sqlite:///")) as conn:
            names = {k: f"stored_{v}" for k, v in tables.items()}
            query = statement.format(**names).replace("%s", "?")
            return conn.execute(query, params).fetchall()
    base, schema = database_url.split("?schema=")
    with psycopg.connect(base, autocommit=True) as conn:
        names = {
            k: sql.Identifier(schema, f"sessionstore_{v}").as_string(conn)
            for k, v in tables.items()
        }
        cursor = conn.execute(statement.format(**names).encode(), params)
        return cursor.fetchall() if cursor.description else []


def store_poison(server_store: Any) -> None:
    """A compaction event of its own stream whose stored bytes are not JSON."""
    server_store.recorder.insert_events(
        [StoredEvent(POISON, 1, COMPACTION_TOPIC, b"\xffnot an event")]
    )


def reason_of(error: grpc.RpcError) -> str:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    info = error_details_pb2.ErrorInfo()
    status.details[0].Unpack(info)
    return info.reason


def cli_output(database_url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [*args, "--database-url", database_url])
    return result.exit_code, result.output


def test_an_unprojectable_event_is_quarantined_and_stops_nothing(database_url: str) -> None:
    server = start_server(database_url, metrics_address="127.0.0.1:0")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            models = _models(server)
            runner = models.runner
            assert runner is not None
            store.CreateSession(pb.CreateSessionRequest(session_id="a"))
            _history(store, "a")
            # The projection stops; the poison lands, then another session's writes.
            runner.stop()
            store_poison(server.service.store)
            store.CreateSession(pb.CreateSessionRequest(session_id="b"))
            _history(store, "b")
            # A listing waits for the store's head, past the poison...
            answers: list[Any] = []
            waiter = threading.Thread(
                target=lambda: answers.append(_listing(store)), name="waiting-listing"
            )
            waiter.start()
            # Only a listing already waiting when the projection moves past the poison
            # is told of it: a later one is answered, as the models are then past it.
            _wait_for_waiting_queries(server, 1)
            started = time.monotonic()
            runner.start()
            waiter.join(30)
            # ...and is told why the catalog cannot show all it waited for, at once.
            (refusal,) = answers
            assert isinstance(refusal, grpc.RpcError), refusal
            assert refusal.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert reason_of(refusal) == "READ_MODEL_QUARANTINED"
            assert "sessionstore readmodels retry" in str(refusal.details())
            assert time.monotonic() - started < 5
            assert _waiting_queries(server) == 0

            # Every other session and model went on. Past an event it cannot read, each
            # model moves on in a transaction of its own, one after another: the listing
            # above heard of the poison once the catalog was past it, and a query asked
            # before the compactions model is past it too would wait for it and hear of
            # it as well. So the queries below are asked once every model has caught up.
            status = _status_once_caught_up(store)
            listed = store.ListSessions(pb.ListSessionsRequest())
            assert [s.id for s in listed.sessions] == ["a", "b"]
            compactions = store.ListCompactions(pb.ListCompactionsRequest()).compactions
            assert [c.session_id for c in compactions] == ["a", "b"]
            prunes = store.ListPrunes(pb.ListPrunesRequest()).prunes
            assert [p.session_id for p in prunes] == ["a", "b"]

            # The health detail names it.
            counts = {m.name: (m.quarantined, m.lag, m.error) for m in status.models}
            assert counts == {
                "catalog": (1, 0, ""),
                "compactions": (1, 0, ""),
                "prunes": (0, 0, ""),
                "recall": (0, 0, ""),
            }
            assert {(q.model, q.session_id, q.topic) for q in status.quarantined} == {
                ("catalog", POISON, COMPACTION_TOPIC),
                ("compactions", POISON, COMPACTION_TOPIC),
            }
            position = status.quarantined[0].position

            # So does `readmodels status`; a retry before any fix still fails.
            code, output = cli_output(database_url, "readmodels", "status")
            assert code == 0, output
            assert f"catalog #{position}" in output and f"session {POISON}" in output
            code, output = cli_output(database_url, "readmodels", "retry")
            assert code == 1 and "0 quarantined events applied, 2 still failing" in output
            code, output = cli_output(database_url, "--json", "readmodels", "status")
            quarantined = json.loads(output)["quarantined"]
            assert [q["attempts"] for q in quarantined] == [2, 2]

            # The fix: the event's bytes restored (here, a session's first event).
            store.CreateSession(pb.CreateSessionRequest(session_id="c"))
            ((state,),) = raw_sql(
                database_url,
                "SELECT state FROM {events} WHERE originator_id = %s AND originator_version = 1",
                ("c",),
            )
            raw_sql(
                database_url,
                "UPDATE {events} SET topic = %s, state = %s WHERE originator_id = %s",
                (get_topic(Started), bytes(state), POISON),
            )
            code, output = cli_output(database_url, "readmodels", "retry")
            assert code == 0 and "2 quarantined events applied, 0 still failing" in output
            listed = store.ListSessions(pb.ListSessionsRequest())
            assert [s.id for s in listed.sessions] == ["a", POISON, "b", "c"]
            status = store.GetReadModelStatus(pb.GetReadModelStatusRequest())
            assert not status.quarantined and all(m.quarantined == 0 for m in status.models)
    finally:
        server.stop(0)


def _wait_for_waiting_queries(server: RunningServer, count: int) -> None:
    """Until the server's metrics show ``count`` queries waiting for the read models."""
    give_up_at = time.monotonic() + 20
    while (waiting := _waiting_queries(server)) != count:
        assert time.monotonic() < give_up_at, f"{waiting} queries waiting, not {count}"
        time.sleep(0.02)


def _waiting_queries(server: RunningServer) -> float:
    return value(scrape(server.metrics_port), "sessionstore_read_model_waiting_queries")


def _listing(store: Stub) -> pb.ListSessionsResponse | grpc.RpcError:
    try:
        return store.ListSessions(pb.ListSessionsRequest(), timeout=20)
    except grpc.RpcError as error:
        return error


def _status_once_caught_up(store: Stub) -> pb.ReadModelStatus:
    """The read models' status once none lags; fails if one still lags after 30 s."""
    give_up_at = time.monotonic() + 30
    while True:
        status = store.GetReadModelStatus(pb.GetReadModelStatusRequest())
        lags = {m.name: m.lag for m in status.models if m.lag}
        if not lags:
            return status
        assert time.monotonic() < give_up_at, f"read models still behind after 30 s: {lags}"
        time.sleep(0.05)


def test_a_database_stuck_on_a_poison_event_recovers_by_itself_on_upgrade(
    database_url: str,
) -> None:
    """Written by an earlier release: an event its projection could not get past (and,
    on PostgreSQL, a NUL in a model name, which it could not store either)."""
    server = start_server(database_url)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            Stub(channel).CreateSession(pb.CreateSessionRequest(session_id="before"))
    finally:
        server.stop(0)
    database = open_database(database_url)
    try:
        _downgrade_to(database, "0003")  # no quarantine table yet
    finally:
        database.dispose()
    service = build_service(Config(database_url=database_url, projections="off"))  # type: ignore[call-arg]
    try:
        store_poison(service.store)
        # The earlier release took a NUL anywhere; the service below the door still would.
        service.create_session("nul", lambda s: replace(s, model="a\x00b"))
    finally:
        service.close()

    server = start_server(database_url)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            # The models move past the poison by themselves: no listing has to hurry them.
            status = _status_once_caught_up(store)
            listed = store.ListSessions(pb.ListSessionsRequest(), timeout=20)
            # The session reads as stored; its catalog row holds what a column can.
            models = {s.id: s.settings.model for s in listed.sessions}
            assert models == {"before": "gpt-4o", "nul": "a\x00b"}
            found = store.ListSessions(pb.ListSessionsRequest(model="a\ufffdb"), timeout=20)
            assert [s.id for s in found.sessions] == ["nul"]
            assert {(q.model, q.session_id) for q in status.quarantined} == {
                ("catalog", POISON),
                ("compactions", POISON),
            }
    finally:
        server.stop(0)
    migrate_database(database_url)  # at the latest revision already: a no-op


def test_a_model_whose_table_is_locked_backs_off_alone(postgres_schema_url: str) -> None:
    """A model that cannot write (its table locked by someone else: a busy database)
    backs off, logged once when it starts failing and once when it recovers; the
    other models go on, and a query that needs it hears why at once."""
    database_url = postgres_schema_url
    server = start_server(database_url)
    base, schema = database_url.split("?schema=")
    try:
        with (
            grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel,
            psycopg.connect(base) as locker,
            structlog.testing.capture_logs() as logs,
        ):
            store = Stub(channel)
            store.CreateSession(pb.CreateSessionRequest(session_id="a"))
            locker.execute(
                sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
                    sql.Identifier(schema, "prune_audit")
                )
            )
            _history(store, "a")  # a prune among its events
            store.CreateSession(pb.CreateSessionRequest(session_id="b"))
            assert [s.id for s in store.ListSessions(pb.ListSessionsRequest()).sessions] == [
                "a",
                "b",
            ]
            assert store.ListCompactions(pb.ListCompactionsRequest()).compactions
            give_up_at = time.monotonic() + 20
            while time.monotonic() < give_up_at:
                status = store.GetReadModelStatus(pb.GetReadModelStatusRequest())
                prunes = next(m for m in status.models if m.name == "prunes")
                if prunes.error:
                    break
                time.sleep(0.1)
            assert "LockNotAvailable" in prunes.error and prunes.HasField("failing_since")
            started = time.monotonic()
            try:
                store.ListPrunes(pb.ListPrunesRequest(), timeout=20)
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
                assert "prunes read model cannot catch up" in str(error.details())
            else:
                raise AssertionError("ListPrunes answered while its model was failing")
            assert time.monotonic() - started < 1
            locker.rollback()  # the lock goes: the model catches up at its next retry
            assert [p.session_id for p in _prunes_once_served(store)] == ["a"]
            # The recovery line follows the commit that serves the read: wait for it
            # here, while the logs are still captured.
            give_up_at = time.monotonic() + 5
            while time.monotonic() < give_up_at and not _recoveries(logs):
                time.sleep(0.05)
        failing = [e for e in logs if e["event"].startswith("read model cannot catch up")]
        recovered = _recoveries(logs)
        assert [e["model"] for e in failing] == ["prunes"]
        assert [e["model"] for e in recovered] == ["prunes"]
    finally:
        server.stop(0)


def _recoveries(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "read model caught up again"]


def _prunes_once_served(store: Stub) -> list[pb.PruneRecord]:
    """ListPrunes retried on UNAVAILABLE, as a client does, for at most 10 s."""
    give_up_at = time.monotonic() + 10
    while True:
        try:
            return list(store.ListPrunes(pb.ListPrunesRequest(), timeout=10).prunes)
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > give_up_at:
                raise
            time.sleep(0.1)
