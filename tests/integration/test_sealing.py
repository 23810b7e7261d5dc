"""Sealed storage: the cipher, the keys, the stored forms, and events stored before sealing.

The events are stored in a SQLite file and read back raw: the content is in
no column in the clear, and once its keys are deleted it reads as placeholders.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from cryptography.exceptions import InvalidTag

from domain.compaction import Compaction, CompactionFailure
from domain.content import Entry, ImageRef, Role, TextBlock, ThinkingBlock, ToolCall, ToolResult
from domain.erasure import ERASED_SUMMARY, ERASED_TEXT, is_erased
from domain.session import Session
from domain.session_events import EntriesAppended, SessionErased
from domain.settings import SessionSettings
from domain.system_prompt import SystemPrompt
from services.adapters import sealed_formats, sealing
from services.adapters.event_codecs import (
    CompactionAsDict,
    EntryAsRecord,
    SettingsAsDict,
    SystemPromptAsDict,
)
from services.adapters.event_store import EventStore
from services.config import persistence_env

NAME = ("s1", 3, sealing.ENTRY, "e1")


def test_a_sealed_value_opens_only_with_its_key_and_its_name() -> None:
    key = sealing.new_key()
    sealed = sealing.seal(key, NAME, b"secret")
    assert b"secret" not in sealed.encode()
    assert sealing.open_sealed(key, NAME, sealed) == b"secret"
    with pytest.raises(InvalidTag):
        sealing.open_sealed(sealing.new_key(), NAME, sealed)
    with pytest.raises(InvalidTag):  # moved to another entry: refused
        sealing.open_sealed(key, ("s1", 3, sealing.ENTRY, "e2"), sealed)
    # Two seals of the same text differ (a fresh nonce each).
    assert sealing.seal(key, NAME, b"secret") != sealed


def test_a_scope_refuses_to_seal_without_a_key_and_says_a_missing_one_was_erased() -> None:
    scope = sealing.KeyScope("s1", 3, lookup=lambda kind, key_id: None)
    with pytest.raises(sealing.KeyMissing):
        scope.seal(sealing.ENTRY, "e1", b"x")  # never stored in the clear
    with pytest.raises(sealing.KeyMissing):
        scope.open(sealing.ENTRY, "e1", sealing.seal(sealing.new_key(), NAME, b"x"))


def _entry() -> Entry:
    return Entry(
        "e1",
        None,
        datetime(2026, 1, 1, tzinfo=UTC),
        Role.ASSISTANT,
        (
            TextBlock("hello secret"),
            ThinkingBlock("pondering secret", "sig"),
            ToolCall("c1", "run", '{"a": "secret"}'),
        ),
        token_count=7,
    )


def test_an_entry_keeps_its_structure_clear_and_its_content_sealed() -> None:
    key = sealing.new_key()
    writing = sealing.KeyScope("s1", 3, keys={(sealing.ENTRY, "e1"): key})
    stored = sealed_formats.seal_entry(writing, _entry().to_record())
    raw = orjson.dumps(stored)
    assert b"secret" not in raw and b"sig" not in raw
    assert b'"c1"' in raw and b'"run"' in raw  # the call's id and name stay for the pairing
    reading = sealing.KeyScope("s1", 3, lookup=lambda kind, key_id: key)
    assert Entry.from_record(sealed_formats.open_entry(reading, stored)) == _entry()

    erased = Entry.from_record(
        sealed_formats.open_entry(sealing.KeyScope("s1", 3, lookup=lambda k, i: None), stored)
    )
    assert erased.content == (
        TextBlock(ERASED_TEXT),
        ThinkingBlock(ERASED_TEXT),
        ToolCall("c1", "run", "{}"),
    )
    assert is_erased(erased.metadata) and erased.token_count == 7


def test_a_tool_result_keeps_its_call_id_once_erased() -> None:
    entry = Entry("r1", None, None, Role.TOOL, (ToolResult("c1", "secret output", True),))
    key = sealing.new_key()
    stored = sealed_formats.seal_entry(
        sealing.KeyScope("s1", 4, keys={(sealing.ENTRY, "r1"): key}), entry.to_record()
    )
    gone = sealing.KeyScope("s1", 4, lookup=lambda k, i: None)
    erased = Entry.from_record(sealed_formats.open_entry(gone, stored))
    assert erased.content == (ToolResult("c1", ERASED_TEXT, True),)


def test_values_stored_before_sealing_read_as_they_were() -> None:
    # A plain record or dict carries no key reference: it is plaintext, read without keys.
    entry = _entry()
    assert EntryAsRecord().decode(entry.to_record()) == entry
    compaction = Compaction("old summary", "e1", reason="manual")
    assert CompactionAsDict().decode(compaction.to_dict()) == compaction
    prompt = SystemPrompt(text="old prompt")
    assert SystemPromptAsDict().decode(prompt.to_dict()) == prompt
    settings = SessionSettings(title="old title", model="gpt-4o")
    assert SettingsAsDict().decode(settings.to_dict()) == settings


def test_values_a_later_release_stored_read_without_its_new_fields(tmp_path: Path) -> None:
    """A server in a rolling upgrade reads what newer ones write: fields it does not
    know are left aside, at every level, rather than failing every read of the session."""
    path = tmp_path / "events.db"
    store = EventStore(persistence_env(f"sqlite:///{path}"))
    session = Session.start("s1", SessionSettings(model="gpt-4o"), (100_000, "default"))
    session.record_compaction_failure(CompactionFailure("manual", "summarise", "boom"))
    store.save_sessions([session])

    def newer(value: object) -> object:
        # Every stored dict of a value object gains a field this release does not know
        # (labels are the client's map: a key there is a label).
        if isinstance(value, dict):
            grown = {k: item if k == "labels" else newer(item) for k, item in value.items()}
            return grown if "_type_" in value else {**grown, "added_later": 1}
        if isinstance(value, list):
            return [newer(item) for item in value]
        return value

    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT rowid, state FROM stored_events").fetchall()
        for rowid, state in rows:
            grown = {k: newer(v) for k, v in orjson.loads(state).items()}
            conn.execute(
                "UPDATE stored_events SET state = ? WHERE rowid = ?", (orjson.dumps(grown), rowid)
            )
    assert b"added_later" in _raw_states(path)[1]
    store.close()

    reread = EventStore(persistence_env(f"sqlite:///{path}"))
    try:
        started, failed = reread.session_events("s1")
        assert started.settings == SessionSettings(model="gpt-4o")
        assert failed.failure == CompactionFailure("manual", "summarise", "boom")
        assert reread.repository.get("s1").settings.model == "gpt-4o"
    finally:
        reread.close()


def _raw_states(path: Path, snapshots: bool = False) -> list[bytes]:
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        suffix = "_snapshots" if snapshots else "_events"
        (events,) = [t for t in tables if t.endswith(suffix)]
        return [bytes(r[0]) for r in conn.execute(f"SELECT state FROM {events}")]


def test_the_title_is_sealed_in_events_and_snapshots_and_erased_with_the_session(
    tmp_path: Path,
) -> None:
    store = EventStore(persistence_env(f"sqlite:///{tmp_path}/events.db"), snapshot_interval=2)
    session = Session.start("s1", SessionSettings(title="title secret"), (100_000, "default"))
    session.change_settings(SessionSettings(title="renamed secret"), (100_000, "default"))
    store.save_sessions([session])  # version 2: a snapshot is taken too
    raw = _raw_states(tmp_path / "events.db") + _raw_states(tmp_path / "events.db", True)
    assert len(raw) == 3 and not any(b"secret" in state for state in raw)
    events = store.session_events("s1")
    assert events[0].settings.title == "title secret"
    assert events[1].settings.title == "renamed secret"
    assert store.repository.get("s1").settings.title == "renamed secret"  # from the snapshot

    session.erase(erased_by="me", reason="test")
    store.save_sessions([session])
    assert store.indexing.data_keys("s1", 0, None) == []
    assert [e.settings.title for e in store.session_events("s1")[:2]] == ["", ""]
    assert store.repository.get("s1").settings.title == ""
    store.save_sessions([Session.start("s2", SessionSettings(), (100_000, "default"))])
    assert store.indexing.data_keys("s2", 0, None) == []  # no title: no key


def test_the_store_seals_and_an_erasure_leaves_placeholders(tmp_path: Path) -> None:
    store = EventStore(persistence_env(f"sqlite:///{tmp_path}/events.db"))
    session = Session.start("s1", SessionSettings(), (100_000, "default"))
    session.set_system_prompt(SystemPrompt(text="prompt secret"), "f1")
    session.append([Entry("e1", None, None, Role.USER, (TextBlock("entry secret"),))], _NoIds())
    store.save_sessions([session])
    assert not any(b"secret" in state for state in _raw_states(tmp_path / "events.db"))
    events = store.session_events("s1")
    assert events[1].system_prompt.text == "prompt secret"
    assert events[2].entries[0].content == (TextBlock("entry secret"),)

    session.erase(erased_by="me", reason="test")
    store.save_sessions([session])
    assert store.indexing.data_keys("s1", 0, None) == []
    events = store.session_events("s1")
    assert events[1].system_prompt.text == ""
    assert events[2].entries[0].content == (TextBlock(ERASED_TEXT),)
    assert isinstance(events[3], SessionErased)
    assert store.repository.get("s1").erased


def test_an_erased_compaction_reads_as_its_placeholder() -> None:
    # The image of the user message its summary carries is sealed with the summary.
    image = ImageRef("data:image/png;base64,c2VjcmV0secret", "image/png")
    compaction = Compaction(
        "summary secret", "e1", instructions="keep secret", carried_blocks=(image,)
    )
    scope = sealing.KeyScope("s1", 5, keys={(sealing.EVENT, ""): sealing.new_key()})
    with sealing.scoped(scope):
        stored = CompactionAsDict().encode(compaction)
        assert CompactionAsDict().decode(stored) == compaction
    assert b"secret" not in orjson.dumps(stored)
    with sealing.scoped(sealing.KeyScope("s1", 5, lookup=lambda k, i: None)):
        erased = CompactionAsDict().decode(stored)
    assert erased.summary == ERASED_SUMMARY and erased.instructions == ""
    assert erased.carried_blocks == ()
    assert is_erased(erased.details) and erased.first_kept_entry_id == "e1"


def test_events_and_their_keys_are_read_together_and_the_projection_leaves_content_sealed(
    database_url: str,
) -> None:
    """A load from a cut reads the snapshot, then events with their keys in one go
    (a pipeline on PostgreSQL): every range of it opens; the read models' decoding
    keeps the structure and counts and never opens the content."""
    store = EventStore(persistence_env(database_url), snapshot_interval=2)
    session = Session.start("s1", SessionSettings(title="title secret"), (100_000, "default"))
    texts = [f"entry secret {n}" for n in range(5)]
    for n, text in enumerate(texts):
        entry = Entry(f"e{n}", None, None, Role.USER, (TextBlock(text),), token_count=7)
        session.append([entry], _NoIds())
        store.save_sessions([session])  # versions 2..6, snapshots at 2, 4 and 6
    try:
        loaded, events, after = store.session_with_events("s1", lambda s: 2)
        assert (loaded.version, loaded.settings.title, after) == (6, "title secret", 2)
        assert [e.entries[0].content for e in events] == [(TextBlock(t),) for t in texts[1:]]
        stored, keys = store.indexing.events_and_keys("s1", 2, 4, (2, 4))
        assert [e.originator_version for e in stored] == [3, 4]
        assert sorted(k[1:4] for k in keys) == [
            (3, sealing.ENTRY, "e1"),
            (4, sealing.ENTRY, "e2"),
            (4, sealing.SNAPSHOT, ""),  # the title in the snapshot taken at version 4
        ]
        assert store.indexing.events_and_keys("s1", 4, None, None)[1] == []

        notifications = store.recorder.select_notifications(start=1, limit=100)
        structure = store.decode_notifications(notifications, entry_content=False)
        appended = [e for e in structure if isinstance(e, EntriesAppended)]
        assert [e.entries[0].token_count for e in appended] == [7] * 5
        assert {e.entries[0].content for e in appended} == {(TextBlock(ERASED_TEXT),)}
        opened = store.decode_notifications(notifications)
        assert [e.entries[0].content for e in opened if isinstance(e, EntriesAppended)] == [
            (TextBlock(t),) for t in texts
        ]
    finally:
        store.close()


class _NoIds:
    def used(self, entry_ids: object, call_ids: object) -> object:
        from domain.ids import UsedIds

        return UsedIds()
