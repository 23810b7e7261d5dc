"""Erasure and forks at the service: a fork racing its parent's erasure, and forks
that stay in their parent's tenant. (The raw-database proofs are in
tests/e2e/test_erasure_forks.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from domain.errors import InvalidRequest
from domain.session import Session
from domain.session_events import SessionErased
from services.app import tenancy
from services.app.sessions import SessionService
from services.bootstrap import build_service
from services.config import Config
from tests.unit.support import assistant, user


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[SessionService, SessionService]]:
    """Two servers' services on one SQLite file."""
    url = f"sqlite:///{tmp_path}/sessions.db"
    first = build_service(Config(database_url=url))
    second = build_service(Config(database_url=url))
    yield first, second
    first.close()
    second.close()


def _contents(service: SessionService, session_id: str) -> str:
    return repr([e.content for e in service.durable_log(session_id).entries])


@pytest.mark.parametrize("whole", [True, False])
def test_a_fork_saved_while_its_parent_is_erased_is_erased_too(
    two: tuple[SessionService, SessionService], whole: bool
) -> None:
    forker, eraser = two
    forker.create_session("p", lambda d: d)
    forker.append("p", [user("secret words", id="u1"), assistant("ok", id="a1")])
    # The fork has read the parent's content; another server erases the parent
    # before the fork is saved: it finds no fork to follow.
    copied, read_at = forker.commands.forks.copied("p", None, "", "f", None)
    if whole:
        _, _, forks = eraser.erase_session("p", erased_by="dpo", reason="asked")
    else:
        _, _, forks = eraser.erase_entries("p", ["u1"], erased_by="dpo", reason="asked")
    assert forks == []
    fork = forker.commands.forks.save_fork(copied, "p", read_at).session

    assert fork.erased is whole
    assert "secret" not in _contents(eraser, "f") and "secret" not in _contents(forker, "f")
    (erasure,) = eraser.history("f").erasures()
    assert (erasure.erased_by, erasure.erased_with) == ("dpo", "p")
    assert erasure.entry_ids == (() if whole else ("u1",))
    if whole:
        assert forker.store.indexing.data_keys("f", 0, None) == []


def test_a_fork_stays_in_its_parents_tenant_and_is_erased_with_it() -> None:
    service = build_service(Config(database_url="memory:"))
    admin = tenancy.Principal("root", "ops", tenancy.Role.ADMIN)
    alice = tenancy.Principal("alice", "a", tenancy.Role.TENANT)
    # The service takes the streams the callers' ids name (services.app.tenancy).
    with tenancy.calling_as(alice):
        parent, own = service.ids.stream("p"), service.ids.stream("own")
        service.create_session(parent, lambda d: d)
        service.append(parent, [user("secret words", id="u1")])
        service.fork_session(parent, new_session_id=own)
    with tenancy.calling_as(admin):
        # An admin's fork of a tenant's session is that tenant's, named or not.
        with pytest.raises(InvalidRequest, match="stays in its parent's tenant 'a'"):
            service.fork_session(parent, new_session_id=service.ids.stream("theirs"))
        theirs = service.fork_session(parent, new_session_id="a/theirs").id
        unnamed = service.fork_session(parent).id
    assert (parent, own, theirs) == ("a/p", "a/own", "a/theirs")
    assert unnamed.startswith("a/")
    # Stored before forks stayed in their parent's tenant: another tenant's copy.
    copied = Session.fork("ops/old", service.store.session_events(parent), tenant="ops")
    service.commands.forks.save_fork(copied, parent, copied.forked_at_version)
    with tenancy.calling_as(alice):
        _, erased, forks = service.erase_session(parent, erased_by="", reason="asked")
    assert isinstance(erased, SessionErased) and erased.erased_by == "alice"
    # Every copy is erased; another tenant's is not named to the caller.
    assert sorted(forks) == sorted([own, theirs, unnamed])
    for fork in (own, theirs, unnamed, "ops/old"):
        assert service.get_session(fork).erased
        assert "secret" not in _contents(service, fork)
    service.close()
