"""The read models' projection logic: each event in, the rows it changes out."""

from __future__ import annotations

from types import MappingProxyType

from domain.settings import SessionSettings
from projections.read_models import catalog_changes, compaction_rows, prune_rows
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
    assert [(p.action, p.chars_after, p.reason) for p in pruned] == [
        ("soft_trim", 7, "ttl"),
        ("hard_clear", 0, "ttl"),
    ]
