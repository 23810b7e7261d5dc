"""Shared fixtures: a real server on loopback over each storage backend.

PostgreSQL comes from SESSIONSTORE_TEST_POSTGRES_URL (`make test` points it at
the local server), else from a throwaway container when a Docker engine is
there. With neither, the PostgreSQL tests fail in CI and skip, saying why,
elsewhere.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import psycopg
import pytest
from psycopg import sql

from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.config import Config
from services.grpc.server import RunningServer, start
from tests.support.fake_provider import FakeProvider
from tests.support.grpc_calls import new_session

POSTGRES_URL_VARIABLE = "SESSIONSTORE_TEST_POSTGRES_URL"


def pytest_configure(config: pytest.Config) -> None:
    # In CI nothing may skip for want of what CI provides: the shared transcripts.
    from tests.unit.test_fixtures_import import FIXTURES

    if os.environ.get("CI") and not FIXTURES.is_dir():
        raise pytest.UsageError(f"the shared transcript fixtures are missing: {FIXTURES}")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if url:
        yield url
        return
    if shutil.which("docker") and _docker_engine_running():
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16-alpine", driver=None) as container:
            yield container.get_connection_url()
        return
    reason = f"PostgreSQL tests need {POSTGRES_URL_VARIABLE} or a Docker engine"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _docker_engine_running() -> bool:
    try:
        import docker

        docker.from_env().ping()
        return True
    except Exception:
        return False


@pytest.fixture
def postgres_schema_url(postgres_url: str) -> Iterator[str]:
    """A database URL whose tables live in a fresh schema, dropped afterwards."""
    schema = f"test_{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in postgres_url else "?"
    yield f"{postgres_url}{separator}schema={schema}"
    with psycopg.connect(postgres_url.split("?")[0], autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/sessions.db"
    return str(request.getfixturevalue("postgres_schema_url"))


def start_server(database_url: str, **settings: object) -> RunningServer:
    # The suite's servers keep the recall index (off by default: it holds the
    # entries' text unsealed), so that recall is tested wherever sessions are;
    # the erasure tests start theirs without it, as deployed by default.
    settings.setdefault("recall_index", True)
    return start(Config(address="127.0.0.1:0", database_url=database_url, **settings))  # type: ignore[arg-type]


@contextmanager
def server_channel(database_url: str, **settings: object) -> Iterator[grpc.Channel]:
    """A channel to a server of the block's own on ``database_url``, stopped as the
    block ends: for tests that change the database between one server and the next."""
    running = start_server(database_url, **settings)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{running.port}") as channel:
            yield channel
    finally:
        running.stop(0)


@pytest.fixture
def server(database_url: str) -> Iterator[RunningServer]:
    running = start_server(database_url)
    yield running
    running.stop(0)


@pytest.fixture
def channel(server: RunningServer) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        yield channel


@pytest.fixture
def store(channel: grpc.Channel) -> pb_grpc.SessionStoreStub:
    return pb_grpc.SessionStoreStub(channel)


@pytest.fixture
def session(store: pb_grpc.SessionStoreStub) -> pb.Session:
    """A session of a model whose window the store knows (gpt-4o: 128,000 tokens)."""
    return new_session(store, model="gpt-4o")


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    """A model provider on loopback, speaking OpenAI's and Anthropic's protocols: it
    takes no key, and a summariser given its address needs none."""
    with FakeProvider() as fake:
        yield fake
