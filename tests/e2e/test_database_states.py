"""A database that answers, but not as this release needs: tables missing, a grant
lacking, a damaged file. Each is refused UNAVAILABLE with a reason of its own and a
message naming what an operator must do, never as an outage to wait out (SQLite
said "the database is unreachable", or "cannot be used now; retry shortly") nor as
INTERNAL (PostgreSQL; a damaged SQLite file), and never by quarantining the events
the read models could not write. The calls that need nothing missing go on, and
once the operator acted (`sessionstore migrate`, a GRANT, a backup restored) the
same server serves again, with nothing lost.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from urllib.parse import parse_qs

import grpc
import psycopg
import pytest
import structlog.testing
from click.testing import CliRunner
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from psycopg import sql

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.cli import cli
from services.config import sqlite_file
from tests.conftest import server_channel, start_server
from tests.support.grpc_calls import Stub, new_session, user

MIGRATE = "run `sessionstore migrate`"
RECOVERY_SECONDS = 15.0


def _refusal(call: Callable[[], object]) -> tuple[grpc.StatusCode, str, str, dict[str, str]]:
    """The code, message, ErrorInfo reason and metadata ``call`` is refused with."""
    with pytest.raises(grpc.RpcError) as raised:
        call()
    error = raised.value
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    info = error_details_pb2.ErrorInfo()
    if status is not None and status.details:
        status.details[0].Unpack(info)
    return error.code(), str(error.details()), info.reason, dict(info.metadata)


def _eventually(call: Callable[[], object], within: float = RECOVERY_SECONDS) -> object:
    """``call``'s answer, once it answers (a model backing off retries within 5 s)."""
    give_up_at = time.monotonic() + within
    while True:
        try:
            return call()
        except grpc.RpcError as error:
            if time.monotonic() > give_up_at:
                raise AssertionError(f"still refused: {error.details()}") from error
            time.sleep(0.2)


def _serving(channel: grpc.Channel) -> bool:
    health = health_pb2_grpc.HealthStub(channel)
    answer = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    return bool(answer.status == health_pb2.HealthCheckResponse.SERVING)


def _schema(url: str) -> str:
    return parse_qs(url.partition("?")[2]).get("schema", ["public"])[0]


def _execute(url: str, *statements: str) -> None:
    """Runs ``statements`` on the store's database, as an operator (or an accident) would."""
    file = sqlite_file(url)
    if file is not None:
        with closing(sqlite3.connect(file, timeout=30)) as connection:
            for statement in statements:
                connection.execute(statement)
            connection.commit()
        return
    with psycopg.connect(url.split("?")[0], autocommit=True) as connection:
        connection.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(_schema(url))))
        for statement in statements:
            connection.execute(statement)  # type: ignore[arg-type]


def _read_model_tables(url: str) -> list[str]:
    """Every table of the read models (the event store's are prefixed by its name),
    a SQLite full-text table before the tables it keeps its index in."""
    file = sqlite_file(url)
    if file is not None:
        with closing(sqlite3.connect(file)) as connection:
            rows = connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                "'stored\\_%' ESCAPE '\\' ORDER BY sql NOT LIKE 'CREATE VIRTUAL%', name"
            ).fetchall()
        return [str(row[0]) for row in rows]
    with psycopg.connect(url.split("?")[0]) as connection:
        rows = connection.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename NOT LIKE "
            "'sessionstore\\_%%' ORDER BY tablename",
            (_schema(url),),
        ).fetchall()
    return [str(row[0]) for row in rows]


def _migrate(url: str) -> None:
    result = CliRunner().invoke(cli, ["migrate", "--database-url", url])
    assert result.exit_code == 0, result.output


def _one_session_listed(store: Stub) -> pb.Session:
    """A session holding one entry ("hello"), once the read models list it: what the
    database holds before its state changes."""
    session = new_session(store, model="gpt-4o")
    store.AppendEntries(
        pb.AppendEntriesRequest(session_id=session.id, entries=[user("hello")]), timeout=10
    )
    assert _eventually(lambda: store.ListSessions(pb.ListSessionsRequest(), timeout=10))
    return session


def _listed_again_quarantining_nothing(store: Stub, *session_ids: str) -> None:
    """Once the operator acted, the read models list ``session_ids`` (those written
    while they were refused included), and quarantined no event they could not write."""
    listed = _eventually(lambda: store.ListSessions(pb.ListSessionsRequest(), timeout=10))
    assert isinstance(listed, pb.ListSessionsResponse)
    assert {s.id for s in listed.sessions} == set(session_ids)
    status = store.GetReadModelStatus(pb.GetReadModelStatusRequest(), timeout=10)
    assert not status.quarantined, status.quarantined


def test_read_models_not_migrated_are_refused_naming_migrate_until_it_runs(
    database_url: str,
) -> None:
    """The read models' tables gone from under a running server (a store whose read
    models were never migrated, or wiped): the listings and audits say to run
    `sessionstore migrate`; the session's own calls, which read the events, go on;
    after the migration the same server lists every session, those written
    meanwhile included, with no event quarantined."""
    server = start_server(database_url)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            before = new_session(store, model="gpt-4o")
            store.AppendEntries(
                pb.AppendEntriesRequest(session_id=before.id, entries=[user("hello")]), timeout=10
            )
            assert store.ListSessions(pb.ListSessionsRequest(), timeout=10).sessions

            tables = _read_model_tables(database_url)
            assert "session_catalog" in tables and "read_model_migrations" in tables
            _execute(database_url, *(f"DROP TABLE IF EXISTS {name}" for name in tables))

            for call in (
                lambda: store.ListSessions(pb.ListSessionsRequest(), timeout=10),
                lambda: store.ListCompactions(
                    pb.ListCompactionsRequest(session_id=before.id), timeout=10
                ),
            ):
                code, message, reason, _ = _refusal(call)
                assert code == grpc.StatusCode.UNAVAILABLE, message
                assert reason == "store_not_migrated", message
                assert "not migrated to this release" in message
                assert MIGRATE in message
                assert "unreachable" not in message and "retry shortly" not in message

            # What reads the events is served all along, and so is health.
            during = new_session(store, model="gpt-4o")
            store.AppendEntries(
                pb.AppendEntriesRequest(session_id=during.id, entries=[user("meanwhile")]),
                timeout=10,
            )
            view = store.GetPromptView(pb.GetPromptViewRequest(session_id=before.id), timeout=10)
            assert "hello" in view.messages_json
            assert store.GetSession(pb.GetSessionRequest(session_id=during.id)).version == 2
            assert _serving(channel)

            _migrate(database_url)
            _listed_again_quarantining_nothing(store, before.id, during.id)
    finally:
        server.stop(0)


def test_an_event_store_table_missing_is_refused_naming_migrate_until_it_runs(
    database_url: str,
) -> None:
    """A table of the event store a release added (the idempotency keys') missing
    under a running server: an append that needs it says to run `sessionstore
    migrate`; other calls go on; migrated, the same server takes the append."""
    server = start_server(database_url)
    keys = "stored_events_keys" if sqlite_file(database_url) else "sessionstore_events_keys"
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            session = new_session(store, model="gpt-4o")
            _execute(database_url, f"DROP TABLE {keys}")

            def keyed_append() -> pb.AppendEntriesResponse:
                return store.AppendEntries(
                    pb.AppendEntriesRequest(
                        session_id=session.id, entries=[user("keyed")], idempotency_key="turn-1"
                    ),
                    timeout=10,
                )

            with structlog.testing.capture_logs() as logs:
                code, message, reason, _ = _refusal(keyed_append)
                assert _refusal(keyed_append)[1] == message
            # Said to the operator, as an error, but once, not per call refused.
            (said,) = [e for e in logs if e["event"] == "request refused"]
            assert (said["log_level"], said["reason"]) == ("error", message)
            assert code == grpc.StatusCode.UNAVAILABLE, message
            assert reason == "store_not_migrated", message
            assert keys in message and MIGRATE in message
            assert "cannot be used now" not in message and "unreachable" not in message
            assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).version == 1
            assert _serving(channel)

            _migrate(database_url)
            assert keyed_append().version == 2
            assert keyed_append().version == 2  # the key is kept again: a replay
    finally:
        server.stop(0)


def test_a_damaged_sqlite_file_is_refused_saying_to_restore_it(tmp_path: Path) -> None:
    """The store's file overwritten with garbage under a running server (a failing
    disk, a copy gone wrong): the session's calls and the listings say the file is
    damaged and to restore it from a backup, not that the server failed. Restored
    as the message says (the servers stopped: a server's connections keep the pages
    they read), it serves them again, nothing lost but the append refused."""
    path, backup = tmp_path / "sessions.db", tmp_path / "backup.db"
    server = start_server(f"sqlite:///{path}")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            session = _one_session_listed(store)
            with closing(sqlite3.connect(path)) as connection:
                with closing(sqlite3.connect(backup)) as copy:
                    connection.backup(copy)
                # All in the file, none left in the write-ahead log to read instead.
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            with path.open("r+b") as file:
                file.write(b"\0garbage" * 12)  # over the header and the first rows

            for call in (
                lambda: store.GetSession(pb.GetSessionRequest(session_id=session.id), timeout=10),
                lambda: store.AppendEntries(
                    pb.AppendEntriesRequest(session_id=session.id, entries=[user("lost")]),
                    timeout=10,
                ),
                lambda: store.ListSessions(pb.ListSessionsRequest(), timeout=10),
            ):
                code, message, reason, _ = _refusal(call)
                assert (code, reason) == (grpc.StatusCode.UNAVAILABLE, "database_corrupt"), message
                assert message.startswith(
                    "the database file is damaged (file is not a database): "
                ), message
                assert "restore it from a backup" in message and "integrity_check" in message
    finally:
        server.stop(0)

    restore_sqlite_file(path, backup)
    with server_channel(f"sqlite:///{path}") as channel:
        store = Stub(channel)
        assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).version == 2
        listed = _eventually(lambda: store.ListSessions(pb.ListSessionsRequest(), timeout=10))
        assert isinstance(listed, pb.ListSessionsResponse)
        assert [s.id for s in listed.sessions] == [session.id]
        status = store.GetReadModelStatus(pb.GetReadModelStatusRequest(), timeout=10)
        assert not status.quarantined, status.quarantined


def test_migrate_check_on_a_damaged_file_says_so_at_once(tmp_path: Path) -> None:
    """`migrate --check --wait` waits for a migration job, which restores no file: a
    damaged one is said at once, in one line, not waited out as "not migrated"."""
    path = tmp_path / "sessions.db"
    _migrate(f"sqlite:///{path}")
    with path.open("r+b") as file:
        file.write(b"\0garbage" * 12)
    started = time.monotonic()
    checked = CliRunner().invoke(
        cli, ["migrate", "--check", "--wait", "30", "--database-url", f"sqlite:///{path}"]
    )
    assert time.monotonic() - started < 10
    assert checked.exit_code == 1, checked.output
    (line,) = checked.output.splitlines()
    assert line.startswith("Error: the database file is damaged (file is not a database)")


@pytest.fixture
def limited_role(postgres_schema_url: str) -> Iterator[tuple[str, str]]:
    """A role of its own with the grants the refusal names, on a migrated schema,
    and the URL that connects as it; the role is dropped afterwards."""
    _migrate(postgres_schema_url)
    role = f"sessionstore_test_{uuid.uuid4().hex[:10]}"
    _create_role(postgres_schema_url, role)
    scheme, _, rest = postgres_schema_url.partition("://")
    url = f"{scheme}://{role}@{rest.split('@', 1)[-1]}"
    try:
        yield role, url
    finally:
        _drop_role(postgres_schema_url, role)


def _create_role(url: str, role: str) -> None:
    """``role``, which logs in with the grants the refusal names on ``url``'s schema."""
    schema = sql.Identifier(_schema(url))
    with psycopg.connect(url.split("?")[0], autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        for grant in (
            "GRANT USAGE ON SCHEMA {schema} TO {role}",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}",
            "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
            "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {schema} TO {role}",
        ):
            connection.execute(sql.SQL(grant).format(schema=schema, role=sql.Identifier(role)))


def _drop_role(url: str, role: str) -> None:
    """``role`` dropped, if it is there, and its sessions ended, as a database's
    administrator does to a role that must no longer be used."""
    with psycopg.connect(url.split("?")[0], autocommit=True) as connection:
        found = connection.execute("SELECT oid FROM pg_roles WHERE rolname = %s", (role,))
        row = found.fetchone()
        if row is None:
            return
        connection.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        connection.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
        # Dropped first: a session ended before would log in again at once.
        connection.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usesysid = %s",
            (row[0],),
        )


def test_a_role_without_a_grant_is_refused_naming_the_role(
    limited_role: tuple[str, str], postgres_schema_url: str
) -> None:
    """A server connecting as a role that lost a grant (on a read model's table, then
    on the events') says which role lacks which privilege, and to grant it; the
    read models back off rather than quarantine what they could not write, and once
    granted again the same server serves every call and lists every session."""
    role, url = limited_role
    server = start_server(url, migrate_at_start=False)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            first = new_session(store, model="gpt-4o")
            assert store.ListSessions(pb.ListSessionsRequest(), timeout=10).sessions

            _execute(postgres_schema_url, f"REVOKE SELECT ON session_catalog FROM {role}")
            second = new_session(store, model="gpt-4o")
            code, message, reason, metadata = _refusal(
                lambda: store.ListSessions(pb.ListSessionsRequest(), timeout=10)
            )
            assert code == grpc.StatusCode.UNAVAILABLE, message
            assert reason == "database_permission_denied", message
            assert metadata == {"role": role}
            assert f"the database role '{role}' lacks a privilege" in message
            assert "permission denied for table session_catalog" in message
            assert f"grant it to '{role}'" in message
            assert store.GetSession(pb.GetSessionRequest(session_id=first.id)).version == 1

            _execute(postgres_schema_url, f"REVOKE SELECT ON sessionstore_events FROM {role}")
            code, message, reason, _ = _refusal(
                lambda: store.GetSession(pb.GetSessionRequest(session_id=first.id), timeout=10)
            )
            assert (code, reason) == (grpc.StatusCode.UNAVAILABLE, "database_permission_denied")
            assert "permission denied for table sessionstore_events" in message, message
            assert _serving(channel)

            _execute(
                postgres_schema_url,
                f"GRANT SELECT ON session_catalog, sessionstore_events TO {role}",
            )
            assert store.GetSession(pb.GetSessionRequest(session_id=first.id)).version == 1
            _listed_again_quarantining_nothing(store, first.id, second.id)
    finally:
        server.stop(0)


def test_a_read_only_database_is_refused_writes_saying_to_use_the_primary(
    limited_role: tuple[str, str], postgres_schema_url: str
) -> None:
    """A server pointed at a database that takes no writes (a standby; here a role
    whose transactions are read-only by default): it serves what it reads, and
    refuses each write saying to point it at the primary, not as a fault of its own
    (INTERNAL); the read models quarantine nothing."""
    role, url = limited_role
    with server_channel(url, migrate_at_start=False) as channel:
        session = _one_session_listed(Stub(channel))

    _execute(postgres_schema_url, f"ALTER ROLE {role} SET default_transaction_read_only = on")
    server = start_server(url, migrate_at_start=False)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).version == 2
            listed = store.ListSessions(pb.ListSessionsRequest(), timeout=10)
            assert [s.id for s in listed.sessions] == [session.id]

            for call in (
                lambda: store.AppendEntries(
                    pb.AppendEntriesRequest(session_id=session.id, entries=[user("more")]),
                    timeout=10,
                ),
                lambda: new_session(store, model="gpt-4o"),
            ):
                code, message, reason, _ = _refusal(call)
                assert (code, reason) == (grpc.StatusCode.UNAVAILABLE, "database_read_only"), (
                    message
                )
                assert message.startswith("the database takes no writes (cannot execute ")
                assert "connected to a read-only database (a standby" in message
                assert f"role '{role}'" in message
                assert "point the database URL at the primary" in message
            assert _serving(channel)
            assert store.GetSession(pb.GetSessionRequest(session_id=session.id)).version == 2
            status = store.GetReadModelStatus(pb.GetReadModelStatusRequest(), timeout=10)
            assert not status.quarantined, status.quarantined
    finally:
        server.stop(0)


def test_a_role_that_may_not_log_in_is_refused_naming_the_role(
    limited_role: tuple[str, str], postgres_schema_url: str
) -> None:
    """The role in the database URL dropped under a running server: each call says
    that the database refused the role's login and to fix the URL or create the
    role, not that the database is unreachable (it answers); health says
    NOT_SERVING, as nothing can be served. With the role made again the same
    server serves again, and the read models quarantined nothing."""
    role, url = limited_role
    server = start_server(url, migrate_at_start=False)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            session = new_session(store, model="gpt-4o")
            assert _eventually(lambda: store.ListSessions(pb.ListSessionsRequest(), timeout=10))

            _drop_role(postgres_schema_url, role)

            def refused_login(call: Callable[[], object]) -> tuple[str, str, dict[str, str]]:
                give_up_at = time.monotonic() + RECOVERY_SECONDS
                while True:  # the sessions ended read as an outage until logging in fails
                    code, message, reason, metadata = _refusal(call)
                    assert code == grpc.StatusCode.UNAVAILABLE, message
                    if reason != "unavailable" or time.monotonic() > give_up_at:
                        return message, reason, metadata
                    time.sleep(0.2)

            for call in (
                lambda: store.GetSession(pb.GetSessionRequest(session_id=session.id), timeout=10),
                lambda: store.AppendEntries(
                    pb.AppendEntriesRequest(session_id=session.id, entries=[user("hi")]),
                    timeout=10,
                ),
                lambda: store.ListSessions(pb.ListSessionsRequest(), timeout=10),
            ):
                message, reason, metadata = refused_login(call)
                assert reason == "database_login_refused", message
                assert metadata == {"role": role}
                assert f"the database refused to let role '{role}' log in" in message
                assert f'role "{role}" does not exist' in message
                assert "the credentials in the database URL were refused" in message
                assert "create the role" in message
                assert "unreachable" not in message
            assert not _serving(channel)

            _create_role(postgres_schema_url, role)
            got = _eventually(
                lambda: store.GetSession(pb.GetSessionRequest(session_id=session.id), timeout=10)
            )
            assert isinstance(got, pb.Session) and got.version == 1
            assert _eventually(lambda: store.ListSessions(pb.ListSessionsRequest(), timeout=10))
            status = store.GetReadModelStatus(pb.GetReadModelStatusRequest(), timeout=10)
            assert not status.quarantined, status.quarantined
    finally:
        server.stop(0)


def test_migrate_check_as_a_role_without_a_grant_says_so_at_once(
    limited_role: tuple[str, str], postgres_schema_url: str
) -> None:
    """`migrate --check` waits for a migration job, not for a grant: a role that may
    not read the migrations' table is told so at once, in one line naming it."""
    role, url = limited_role
    checked = CliRunner().invoke(cli, ["migrate", "--check", "--database-url", url])
    assert checked.exit_code == 0, checked.output
    _execute(postgres_schema_url, f"REVOKE SELECT ON read_model_migrations FROM {role}")
    started = time.monotonic()
    checked = CliRunner().invoke(cli, ["migrate", "--check", "--wait", "30", "--database-url", url])
    assert time.monotonic() - started < 10
    assert checked.exit_code == 1, checked.output
    (line,) = checked.output.splitlines()
    assert f"the database role '{role}' lacks a privilege" in line
    assert "permission denied for table read_model_migrations" in line


def restore_sqlite_file(path: Path, backup: Path) -> None:
    """Puts ``backup`` back as the store's file, with none of the damaged one's
    write-ahead log left to replay over it."""
    for stale in (path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")):
        stale.unlink(missing_ok=True)
    shutil.copyfile(backup, path)
