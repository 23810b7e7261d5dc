"""The use cases, built by the composition root with in-memory parts: no server, no database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from domain.errors import DuplicateEntry, SessionNotFound
from services.app.sessions import SessionService
from services.bootstrap import build_service
from services.config import Config
from tests.unit.support import assistant, system, user


@pytest.fixture
def service() -> Iterator[SessionService]:
    # Construct the application.
    service = build_service(Config(database_url="memory:"))
    yield service
    service.close()


def test_a_session_is_created_appended_to_and_read_back(service: SessionService) -> None:
    # Evolve state.
    created = service.create_session("s-1", lambda defaults: defaults)
    service.append("s-1", [system("be brief"), user("hello", id="u1")])
    service.append("s-1", [assistant("hi", id="a1")])
    # Query state.
    assert created.settings.model == service.config.default_model
    assert service.get_session("s-1").entry_count == 3
    assert [e.id for e in service.durable_log("s-1").entries][1:] == ["u1", "a1"]
    sessions, _ = service.list_sessions(10, 0)
    assert [s.id for s in sessions] == ["s-1"]


def test_refusals_come_from_the_domain(service: SessionService) -> None:
    service.create_session("s-1", lambda defaults: defaults)
    service.append("s-1", [user("hello", id="u1")])
    with pytest.raises(DuplicateEntry):
        service.append("s-1", [user("again", id="u1")])
    with pytest.raises(SessionNotFound):
        service.get_session("nope")


def test_a_retry_is_recognised_whatever_the_order_of_its_metadata(
    service: SessionService,
) -> None:
    """Protobuf maps arrive in process-dependent order; a retry from another server, or after
    a restart, must still be recognised as the same append."""
    from dataclasses import replace
    from types import MappingProxyType

    service.create_session("s-1", lambda defaults: defaults)
    first_try = replace(user("hi"), metadata=MappingProxyType({"provider": "x", "model": "y"}))
    retry = replace(user("hi"), metadata=MappingProxyType({"model": "y", "provider": "x"}))
    first = service.append("s-1", [first_try], idempotency_key="turn-1")
    again = service.append("s-1", [retry], idempotency_key="turn-1")
    assert again.replayed and again.version == first.version
    assert service.get_session("s-1").entry_count == 1
