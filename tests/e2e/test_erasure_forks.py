"""Erasure follows the copies: a fork holds its parent's content under keys of its
own, so erasing the parent erases it in every fork (and fork of a fork) too; and a
session's title is sealed like its content. Proven on the raw database (every
table, and the SQLite files' bytes) after the erasure, over SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proto.sessionstore.v1 import session_store_pb2 as pb
from services.adapters import sealing
from services.grpc.server import RunningServer
from tests.conftest import start_server
from tests.e2e.test_erasure import _appears, _key_rows, _marker, _texts
from tests.support.grpc_calls import Stub, append, new_session, text, user
from tests.support.raw_keys import raw_key_rows


@pytest.fixture
def server(database_url: str) -> Iterator[RunningServer]:
    """As deployed by default: no recall index, so no content is kept unsealed at rest."""
    running = start_server(database_url, recall_index=False)
    yield running
    running.stop(0)


def _key_names(database_url: str, session_id: str) -> set[tuple[str, str]]:
    """(kind, key id) of the session's data keys, read straight from the key table."""
    return {(kind, key_id) for kind, key_id, _ in raw_key_rows(database_url, session_id)}


def _fork(store: Stub, session_id: str, **fields: object) -> str:
    forked = store.ForkSession(pb.ForkSessionRequest(session_id=session_id, **fields))  # type: ignore[arg-type]
    return str(forked.id)


def _log(store: Stub, session_id: str) -> str:
    return _texts(store.GetDurableLog(pb.GetViewRequest(session_id=session_id)))


def test_erasing_a_session_erases_its_forks_and_their_forks(
    store: Stub, database_url: str, tmp_path: Path
) -> None:
    marker = _marker()
    parent = new_session(store, model="gpt-4o", title=f"{marker}-title").id
    append(store, parent, user(f"my secret is {marker}-text", id="u1"))
    append(store, parent, text(pb.ROLE_ASSISTANT, "noted", id="a1"))
    child = _fork(store, parent)
    append(store, child, user(f"more of {marker}-child", id="u2"))
    grandchild = _fork(
        store, child, settings=pb.SessionSettings(model="gpt-4o", title=f"{marker}-renamed")
    )
    bystander = new_session(store, model="gpt-4o", title="bystander").id
    append(store, bystander, user("not erased", id="u1"))

    # The forks answer the parent's content under their own keys; titles are sealed.
    assert f"{marker}-text" in _log(store, child) and f"{marker}-text" in _log(store, grandchild)
    assert f"{marker}-child" in _log(store, grandchild)
    assert all(_key_rows(database_url, s) for s in (parent, child, grandchild))
    got = store.GetSession(pb.GetSessionRequest(session_id=grandchild))
    assert got.settings.title == f"{marker}-renamed"

    erased = store.EraseSession(
        pb.EraseSessionRequest(session_id=parent, reason="user request", erased_by="dpo")
    )
    assert sorted(erased.forks_erased) == sorted([child, grandchild])
    # The catalog (a read model, which lists titles) has caught up with the erasures.
    store.ListSessions(pb.ListSessionsRequest(min_position=erased.position))

    # The raw database: no key of the parent or of either fork is left to open the
    # ciphertext with, and the marker (titles included) is nowhere in the clear.
    for session_id in (parent, child, grandchild):
        assert _key_rows(database_url, session_id) == [], session_id
    assert not _appears(marker, database_url, tmp_path)
    assert _key_rows(database_url, bystander)

    for session_id in (child, grandchild):
        got = store.GetSession(pb.GetSessionRequest(session_id=session_id))
        assert got.erased.whole_session
        assert got.erased.erased_by == "dpo" and got.settings.title == ""
        assert marker not in _log(store, session_id)
        events = list(store.ReadEvents(pb.ReadEventsRequest(session_id=session_id)))
        assert marker not in "".join(map(_texts, events))
        assert events[-1].erasure.erased_with == parent
    got = store.GetSession(pb.GetSessionRequest(session_id=bystander))
    assert got.settings.title == "bystander" and not got.HasField("erased")


def test_erasing_entries_erases_them_in_the_forks_that_copied_them(
    store: Stub, database_url: str, tmp_path: Path
) -> None:
    marker = _marker()
    parent = new_session(store, model="gpt-4o").id
    append(store, parent, user(f"my secret is {marker}-text", id="u1"))
    append(store, parent, text(pb.ROLE_ASSISTANT, "noted", id="a1"))
    child = _fork(store, parent)
    grandchild = _fork(store, child)
    # After the forks, the parent and the child each append an entry "u9" of their own.
    append(store, parent, user(f"later {marker}-later", id="u9"))
    append(store, child, user("the child own u9", id="u9"))
    assert f"{marker}-text" in _log(store, grandchild)

    erased = store.EraseEntries(
        pb.EraseEntriesRequest(
            session_id=parent, entry_ids=["u1", "u9"], reason="pasted a secret", erased_by="dpo"
        )
    )
    assert sorted(erased.forks_erased) == sorted([child, grandchild])

    # The raw database: the copies' keys are gone, the keys of what they did not copy stay.
    for session_id in (parent, child, grandchild):
        names = _key_names(database_url, session_id)
        assert (sealing.ENTRY, "u1") not in names, session_id
        assert (sealing.ENTRY, "a1") in names, session_id
    assert (sealing.ENTRY, "u9") in _key_names(database_url, child)
    assert not _appears(marker, database_url, tmp_path)

    child_log = store.GetDurableLog(pb.GetViewRequest(session_id=child))
    assert marker not in _texts(child_log)
    assert "the child own u9" in _texts(child_log)
    assert [(e.entry_ids, e.erased_with) for e in child_log.erasures] == [(["u1"], parent)]
    grandchild_log = store.GetDurableLog(pb.GetViewRequest(session_id=grandchild))
    assert marker not in _texts(grandchild_log) and "[erased]" in _texts(grandchild_log)
    assert [(e.entry_ids, e.erased_with) for e in grandchild_log.erasures] == [(["u1"], parent)]
    # The forks take writes still: only entries were erased.
    append(store, grandchild, user("go on", id="u3"))
