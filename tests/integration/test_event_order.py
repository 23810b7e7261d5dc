"""The event log's order can be trusted: notification ids never interleave.

The library's own test case races two writers of 1,000 events each; a reader
that pages by notification id is only safe if one writer's ids all come
before the other's. Run here against each of our recorders.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from eventsourcing.persistence import ApplicationRecorder
from eventsourcing.tests.persistence import NonInterleavingNotificationIDsBaseCase

from services.adapters.event_store import EventStore
from services.config import persistence_env


class _OnOurRecorder(NonInterleavingNotificationIDsBaseCase):
    __test__ = False  # a base: the cases below say where it runs
    url: str

    def new_originator_id(self) -> str:
        return str(uuid.uuid4())  # our sessions have text ids

    def create_recorder(self) -> ApplicationRecorder:
        self.store = EventStore(persistence_env(self.url))
        return self.store.recorder

    def tearDown(self) -> None:
        self.store.close()


class TestOnPostgres(_OnOurRecorder):
    __test__ = True

    @pytest.fixture(autouse=True)
    def _fresh_schema(self, postgres_schema_url: str) -> Iterator[None]:
        self.url = postgres_schema_url
        yield


class TestOnSQLite(_OnOurRecorder):
    __test__ = True

    @pytest.fixture(autouse=True)
    def _fresh_file(self, tmp_path: Path) -> Iterator[None]:
        self.url = f"sqlite:///{tmp_path}/events.db"
        yield


class TestInMemory(_OnOurRecorder):
    __test__ = True

    url = "memory:"
