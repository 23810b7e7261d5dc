"""The read models' projection logic: each event in, the rows it changes out."""

from __future__ import annotations

import json
from dataclasses import replace
from types import MappingProxyType

from domain.session_events import PruneRecorded
from domain.settings import SessionSettings
from projections.read_models import catalog_changes, compaction_rows, prune_rows
from services.adapters.event_store import EventStore
from services.config import persistence_env
from tests.unit.support import Tracked, assistant, call, clear, tool, trim, user


def test_the_catalog_follows_a_session() -> None:
    # Construct the session.
    settings = SessionSettings(model="m", title="T", labels=MappingProxyType({"k": "v"}))
    tracked = Tracked("s", settings)
    # Evolve it.
    tracked.append(user("hi", tokens=5), assistant("yo", tokens=7))
    tracked.change_settings(SessionSettings(model="m2", title="T2"))
    # Query the changes.
    started, appended, changed = (catalog_changes(e)[0] for e in tracked.events)
    assert started.insert and started.values["title"] == "T" and started.labels == {"k": "v"}
    assert appended.increments == {"entries": 2, "tokens": 12} and appended.version == 2
    assert changed.values == {"title": "T2", "model": "m2"} and changed.labels == {}


def test_the_audits_copy_the_receipts() -> None:
    tracked = Tracked("s")
    first = tracked.append(
        user("a"),
        assistant("b", calls=[call("c1"), call("c2")]),
        tool("c1", "x" * 99),
        tool("c2", "y" * 99),
    )
    kept = tracked.append(user("c"))
    tracked.prune(trim(first[2].id, 3, 4), clear(first[3].id), reason="ttl")
    tracked.compact(kept[0].id, tokens_before=100, tokens_after=10, reason="threshold")
    rows = [row for e in tracked.events for row in compaction_rows(e)]
    (row,) = rows
    assert (row.outcome, row.trigger, row.tokens_before, row.tokens_after) == (
        "ok",
        "threshold",
        100,
        10,
    )
    assert row.first_kept_entry_id == kept[0].id and row.first_kept_position == 4
    pruned = [row for e in tracked.events for row in prune_rows(e)]
    assert [(p.action, p.chars_before, p.chars_after, p.reason) for p in pruned] == [
        ("soft_trim", 99, 7, "ttl"),
        ("hard_clear", 99, 0, "ttl"),
    ]


def test_prunes_stored_before_their_sizes_still_load() -> None:
    tracked = Tracked("s")
    first = tracked.append(user("a"), assistant("b", calls=[call("c1")]), tool("c1", "x" * 9))
    tracked.prune(trim(first[2].id, 3, 4), reason="ttl")
    recorded = tracked.events[-1]
    # The event as an earlier release stored it, without sizes, decodes with the default.
    mapper = EventStore(persistence_env("memory:")).mapper
    stored = mapper.to_stored_event(recorded)
    state = json.loads(stored.state)
    del state["chars"]
    older = mapper.to_domain_event(replace(stored, state=json.dumps(state).encode()))
    assert isinstance(older, PruneRecorded) and older.chars == ()
    (row,) = prune_rows(older)
    assert (row.chars_before, row.chars_after) == (None, 7)
    (row,) = prune_rows(recorded)
    assert (row.chars_before, row.chars_after) == (9, 7)
