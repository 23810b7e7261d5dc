"""Recall through the gRPC API, on SQLite and PostgreSQL: a fact from a turn that
compaction hid is found again (by full text, offline; by meaning, against the
loopback provider's embeddings endpoint), names the compaction that hid it,
and is never found again once erased, nor its embedding kept; tenant-wide
search with label and time filters; bad requests refused clearly."""

from __future__ import annotations

import math
import struct
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
import structlog.testing
from click.testing import CliRunner, Result
from eventsourcing.domain import get_topic
from eventsourcing.persistence import StoredEvent
from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy import delete, func, insert, literal, select, update

from domain.session_events import EntriesAppended
from projections.read_models.recall import content_hash
from proto.sessionstore.v1 import session_store_pb2 as pb
from proto.sessionstore.v1 import session_store_pb2_grpc as pb_grpc
from services.adapters import read_model_tables as t
from services.adapters.embeddings import provider_key
from services.cli import cli
from services.grpc.server import RunningServer
from services.readmodels.admin import rebuild_read_model
from tests.conftest import start_server
from tests.support.fake_provider import (
    EMBEDDING_DIMENSIONS,
    EMBEDDINGS_PATH,
    FakeProvider,
    delay,
    vectors,
)
from tests.support.grpc_calls import append, refused, text, user

Stub = pb_grpc.SessionStoreStub
FACT = "The staging database password rotates via vault path secret/zebra-7731 every Monday."
EMBEDDING_MODEL = "openai/text-embedding-3-small"


def _history_with_hidden_fact(store: Stub, session_id: str) -> tuple[str, int, int]:
    """A fact in the first turn, then turns enough to compact it away. Answers the
    fact's entry id, the version that appended it, and the compaction's version."""
    fact = append(store, session_id, user(FACT))
    append(store, session_id, text(pb.ROLE_ASSISTANT, "Noted, I will remember it."))
    kept = append(store, session_id, user("Now list the open pull requests."))
    append(store, session_id, text(pb.ROLE_ASSISTANT, "There are three open pull requests."))
    compaction = store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session_id,
            summary="## Goal\nOperate staging.\n## Progress\nListed pull requests.",
            first_kept_entry_id=kept.entry_ids[0],
            tokens_before=900,
            tokens_after=60,
            reason="threshold",
        )
    )
    return fact.entry_ids[0], fact.version, compaction.version


def _recall(store: Stub, session_id: str, query: str, **fields: object) -> pb.RecallResponse:
    return store.Recall(pb.RecallRequest(session_id=session_id, query=query, **fields))  # type: ignore[arg-type]


def _chunks_holding(server: RunningServer, needle: str) -> int:
    models = server.app.read_models
    assert models is not None
    c = t.recall_chunks.c
    with models.database.reader.connect() as connection:
        query = select(func.count()).where(c.text.contains(needle))
        return int(connection.execute(query).scalar() or 0)


def _embeddings(server: RunningServer) -> int:
    models = server.app.read_models
    assert models is not None
    with models.database.reader.connect() as connection:
        return int(
            connection.execute(select(func.count()).select_from(t.recall_embeddings)).scalar() or 0
        )


def test_a_compacted_fact_is_recalled_by_full_text_until_erased(
    store: Stub, server: RunningServer
) -> None:
    session = store.CreateSession(pb.CreateSessionRequest(session_id="ops"))
    fact_id, fact_version, compaction_version = _history_with_hidden_fact(store, session.id)
    view = store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id))
    assert "zebra-7731" not in str(view), "the fact must be hidden from the prompt"

    found = _recall(store, session.id, "vault zebra-7731")
    assert found.embedding_model == ""
    top = found.hits[0]
    assert (top.entry_id, top.session_id, top.version) == (fact_id, "ops", fact_version)
    assert top.hidden_by_compaction == compaction_version
    assert "zebra-7731" in top.snippet and top.role == "user"
    assert top.matched_by == "fulltext" and top.score > 0
    # A turn still in the view names no compaction.
    visible = _recall(store, session.id, "pull requests").hits[0]
    assert visible.hidden_by_compaction == 0
    # The client fetches the entry the hit names.
    entry = store.GetEntry(pb.GetEntryRequest(session_id=session.id, entry_id=top.entry_id))
    assert FACT in str(entry)

    store.EraseEntries(
        pb.EraseEntriesRequest(session_id=session.id, entry_ids=[fact_id], reason="GDPR request")
    )
    after = _recall(store, session.id, "vault zebra-7731")
    assert fact_id not in [h.entry_id for h in after.hits]
    assert _chunks_holding(server, "zebra") == 0


@pytest.fixture
def provider(provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> FakeProvider:
    # Embeddings read their key from the environment alone, and litellm's client will
    # not call without one, even at a local address; the fake takes any key.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    return provider


def test_semantic_recall_finds_by_meaning_embeds_once_and_forgets_erased_text(
    store: Stub, server: RunningServer, provider: FakeProvider
) -> None:
    memory = pb.MemoryPolicy(
        embedding_model=EMBEDDING_MODEL, embedding_api_base=provider.openai_base
    )
    session = store.CreateSession(
        pb.CreateSessionRequest(session_id="trip", settings=pb.SessionSettings(memory=memory))
    )
    parked = append(store, session.id, user("I parked my car on level three, bay 42.")).entry_ids[0]
    append(store, session.id, text(pb.ROLE_ASSISTANT, "Got it, level three, bay 42."))
    kept = append(store, session.id, user("Book a table for two at eight.")).entry_ids[0]
    append(store, session.id, text(pb.ROLE_ASSISTANT, "Booked for eight."))
    store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session.id, summary="## Goal\nEvening plans.", first_kept_entry_id=kept
        )
    )

    # No word of the query is in the fact: only its meaning matches.
    found = _recall(store, session.id, "automobile")
    assert found.embedding_model == EMBEDDING_MODEL
    assert found.hits[0].entry_id == parked
    assert found.hits[0].matched_by == "semantic"
    assert found.hits[0].hidden_by_compaction > 0
    calls = [r for r in provider.requests if r.path == EMBEDDINGS_PATH]
    embedded = [text for r in calls for text in r.body["input"]]
    assert len(embedded) == len(set(embedded)) == 5  # four entries and the query

    # Asked again (and by another session with the same text): nothing is embedded twice.
    assert _recall(store, session.id, "automobile").hits[0].entry_id == parked
    other = store.CreateSession(
        pb.CreateSessionRequest(session_id="copy", settings=pb.SessionSettings(memory=memory))
    )
    append(store, other.id, user("I parked my car on level three, bay 42."))
    assert _recall(store, other.id, "automobile").hits[0].session_id == "copy"
    assert len([r for r in provider.requests if r.path == EMBEDDINGS_PATH]) == len(calls)

    # Both words and meaning: the fused rank says so.
    both = _recall(store, session.id, "car bay")
    assert both.hits[0].entry_id == parked and both.hits[0].matched_by == "fulltext+semantic"

    before = _embeddings(server)
    store.EraseEntries(
        pb.EraseEntriesRequest(session_id=session.id, entry_ids=[parked], reason="asked")
    )
    assert parked not in [h.entry_id for h in _recall(store, session.id, "automobile").hits]
    assert _embeddings(server) < before  # the erased text's embedding is gone


def test_semantic_recall_falls_back_to_full_text_when_the_provider_fails(
    store: Stub, provider: FakeProvider
) -> None:
    memory = pb.MemoryPolicy(
        embedding_model=EMBEDDING_MODEL, embedding_api_base=provider.url + "/nowhere"
    )
    session = store.CreateSession(
        pb.CreateSessionRequest(settings=pb.SessionSettings(memory=memory))
    )
    fact = append(store, session.id, user(FACT)).entry_ids[0]
    found = _recall(store, session.id, "zebra-7731")
    assert found.embedding_model == "" and found.hits[0].entry_id == fact


def _stamp(moment: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def test_tenant_wide_recall_with_label_and_time_filters(store: Stub) -> None:
    for name, team in (("alpha", "blue"), ("beta", "blue"), ("gamma", "red")):
        store.CreateSession(
            pb.CreateSessionRequest(
                session_id=name, settings=pb.SessionSettings(labels={"team": team})
            )
        )
        append(store, name, user(f"The {name} release is tagged v-orchid-{name}."))
    now = datetime.now(UTC)

    alone = _recall(store, "alpha", "orchid")
    assert {h.session_id for h in alone.hits} == {"alpha"}
    everywhere = _recall(store, "alpha", "orchid", tenant_wide=True)
    assert {h.session_id for h in everywhere.hits} == {"alpha", "beta", "gamma"}
    blue = _recall(store, "alpha", "orchid", tenant_wide=True, labels={"team": "blue"})
    assert {h.session_id for h in blue.hits} == {"alpha", "beta"}
    red = _recall(store, "alpha", "orchid", labels={"team": "red"})
    assert list(red.hits) == []  # alpha itself is not red

    hour = timedelta(hours=1)
    window = _recall(
        store,
        "alpha",
        "orchid",
        tenant_wide=True,
        since=_stamp(now - hour),
        until=_stamp(now + hour),
    )
    assert len(window.hits) == 3
    assert (
        list(_recall(store, "alpha", "orchid", tenant_wide=True, since=_stamp(now + hour)).hits)
        == []
    )
    assert (
        list(_recall(store, "alpha", "orchid", tenant_wide=True, until=_stamp(now - hour)).hits)
        == []
    )


def test_bad_recall_requests_are_refused_clearly(store: Stub) -> None:
    session = store.CreateSession(pb.CreateSessionRequest(session_id="s1"))
    invalid = grpc.StatusCode.INVALID_ARGUMENT
    assert "query is required" in refused(lambda: _recall(store, session.id, "  "), invalid)
    assert "session_id is required" in refused(lambda: _recall(store, "", "x"), invalid)
    assert "limit 500" in refused(lambda: _recall(store, session.id, "x", limit=500), invalid)
    assert "limit -1" in refused(lambda: _recall(store, session.id, "x", limit=-1), invalid)
    later, earlier = _stamp(datetime.now(UTC)), _stamp(datetime.now(UTC) - timedelta(days=1))
    assert "since must be before until" in refused(
        lambda: _recall(store, session.id, "x", since=later, until=earlier), invalid
    )
    assert "query is" in refused(lambda: _recall(store, session.id, "x" * 5_000), invalid)
    missing = refused(lambda: _recall(store, "nobody", "x"), grpc.StatusCode.NOT_FOUND)
    assert "nobody" in missing
    # Words no entry holds, and query syntax of either database, answer no hits, not errors.
    for query in ("zzzz", 'a" OR b', "NEAR(x y)", "a & b | !c", "*", "'"):
        assert list(_recall(store, session.id, query).hits) == [], query


def _index_rows(server: RunningServer) -> list[tuple[object, ...]]:
    """The index's chunks, less their surrogate ids, in a stable order."""
    models = server.app.read_models
    assert models is not None
    c = t.recall_chunks.c
    columns = [col for col in t.recall_chunks.columns if col.name != "id"]
    with models.database.reader.connect() as connection:
        rows = connection.execute(
            select(*columns).order_by(c.session_id, c.entry_position, c.chunk)
        )
        return [tuple(row) for row in rows]


def test_the_index_rebuilds_from_zero_without_what_was_erased(
    store: Stub, server: RunningServer
) -> None:
    session = store.CreateSession(pb.CreateSessionRequest(session_id="ops"))
    fact_id, _, _ = _history_with_hidden_fact(store, session.id)
    append(store, session.id, user("tail " * 2_000))  # several chunks
    store.EraseEntries(
        pb.EraseEntriesRequest(session_id=session.id, entry_ids=[fact_id], reason="asked")
    )
    _recall(store, session.id, "anything")  # waits for the index
    live = _index_rows(server)
    assert len({r[1] for r in live}) == 4  # entries: the fact is gone
    assert max(r[2] for r in live) > 0  # the long entry is cut in chunks

    rebuild_read_model(server.service.config.database_url, "recall")
    assert _index_rows(server) == live
    assert fact_id not in [h.entry_id for h in _recall(store, session.id, "zebra-7731").hits]


def test_an_index_turned_on_later_builds_itself_from_the_first_event(database_url: str) -> None:
    before = start_server(database_url, recall_index=False)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{before.port}") as channel:
            store = pb_grpc.SessionStoreStub(channel)
            store.CreateSession(pb.CreateSessionRequest(session_id="early"))
            fact = append(store, "early", user(FACT)).entry_ids[0]
            refused(lambda: _recall(store, "early", "zebra"), grpc.StatusCode.FAILED_PRECONDITION)
    finally:
        before.stop(0)
    after = start_server(database_url)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{after.port}") as channel:
            found = _recall(pb_grpc.SessionStoreStub(channel), "early", "zebra")
            assert [h.entry_id for h in found.hits] == [fact]
    finally:
        after.stop(0)


def test_an_index_turned_off_keeps_no_text_and_misses_no_erasure(database_url: str) -> None:
    """Off, nothing of the content stays unsealed: an index kept before is emptied as
    the server starts without it, so an erasure made while it is off leaves no text
    behind; turned on again, the index builds itself from the first event."""

    def serving(recall_index: bool) -> tuple[RunningServer, grpc.Channel, Stub]:
        server = start_server(database_url, recall_index=recall_index)
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        return server, channel, pb_grpc.SessionStoreStub(channel)

    server, channel, store = serving(True)
    try:
        store.CreateSession(pb.CreateSessionRequest(session_id="kept"))
        kept = append(store, "kept", user("The kept note names harbour-4410.")).entry_ids[0]
        store.CreateSession(pb.CreateSessionRequest(session_id="gone"))
        append(store, "gone", user(FACT))
        assert len(_recall(store, "gone", "zebra").hits) == 1
    finally:
        channel.close()
        server.stop(0)
    server, channel, store = serving(False)
    try:
        assert _chunks_holding(server, "zebra-7731") == 0
        assert _chunks_holding(server, "harbour-4410") == 0
        store.EraseSession(pb.EraseSessionRequest(session_id="gone", reason="user asked"))
    finally:
        channel.close()
        server.stop(0)
    server, channel, store = serving(True)
    try:
        assert [h.entry_id for h in _recall(store, "kept", "harbour").hits] == [kept]
        assert list(_recall(store, "gone", "zebra-7731").hits) == []
        assert _chunks_holding(server, "zebra-7731") == 0
    finally:
        channel.close()
        server.stop(0)


def test_the_cli_rebuilds_the_index_when_it_is_on_and_refuses_when_it_is_off(
    store: Stub, server: RunningServer
) -> None:
    session = store.CreateSession(pb.CreateSessionRequest(session_id="ops"))
    _history_with_hidden_fact(store, session.id)
    _recall(store, session.id, "anything")  # waits for the index
    live = _index_rows(server)
    url = server.service.config.database_url

    def run(*args: str, recall_index: str) -> Result:
        environment = {"SESSIONSTORE_RECALL_INDEX": recall_index}
        return CliRunner().invoke(cli, [*args, "--database-url", url], env=environment)

    rebuilt = run("rebuild", "recall", recall_index="true")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert rebuilt.output.startswith("recall rebuilt: ")
    assert _index_rows(server) == live
    retried = run("readmodels", "retry", "recall", recall_index="true")
    assert retried.exit_code == 0, retried.output

    # Off where the command runs: building an index no server keeps would leave a
    # later erasure's text in it.
    for args in (["rebuild", "recall"], ["readmodels", "retry", "recall"]):
        refused_here = run(*args, recall_index="false")
        assert refused_here.exit_code == 1
        assert "the recall index is off: set SESSIONSTORE_RECALL_INDEX=true" in refused_here.output
    assert _index_rows(server) == live


def test_an_entry_event_the_index_cannot_read_is_quarantined_and_stops_nothing(
    store: Stub, server: RunningServer
) -> None:
    models = server.app.read_models
    assert models is not None and models.runner is not None
    models.runner.stop()
    server.service.store.recorder.insert_events(
        [StoredEvent("poison-1", 2, get_topic(EntriesAppended), b"\xffnot an event")]
    )
    session = store.CreateSession(pb.CreateSessionRequest(session_id="after"))
    fact = append(store, session.id, user(FACT)).entry_ids[0]
    models.runner.start()
    try:
        found = _recall(store, session.id, "zebra")
    except grpc.RpcError as refusal:  # the first wait past it is told of it
        assert refusal.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "recall read model could not apply" in str(refusal.details())
        found = _recall(store, session.id, "zebra")
    assert found.hits[0].entry_id == fact
    status = store.GetReadModelStatus(pb.GetReadModelStatusRequest())
    # The catalog reads every event, so it quarantined it too.
    assert ("recall", "poison-1") in {(q.model, q.session_id) for q in status.quarantined}
    assert {m.name: m.lag for m in status.models}["recall"] == 0


def test_the_prompt_view_recalls_hidden_entries_for_the_newest_turn_within_budget(
    store: Stub,
) -> None:
    memory = pb.MemoryPolicy(retrieval_top_k=2)
    settings = pb.SessionSettings(model="gpt-4o", context_window_tokens=20_000, memory=memory)
    session = store.CreateSession(pb.CreateSessionRequest(session_id="agent", settings=settings))
    fact_id = append(store, session.id, user(FACT)).entry_ids[0]
    append(store, session.id, text(pb.ROLE_ASSISTANT, "Noted."))
    for step in range(6):
        append(store, session.id, user(f"Step {step}: " + "review the module list. " * 120))
        append(store, session.id, text(pb.ROLE_ASSISTANT, f"Step {step} reviewed."))
    compacted = store.Compact(pb.CompactRequest(session_id=session.id, force=True))
    assert compacted.compacted, compacted.reason
    # The summary tells the agent where the raw history is and how to search it.
    assert "Recall(session_id, query)" in compacted.compaction.summary

    append(store, session.id, user("Which vault path holds the staging password?"))
    # A view does not wait for the index (it would slow every turn): a search does.
    _recall(store, session.id, "vault")
    view = store.GetPromptView(
        pb.GetPromptViewRequest(session_id=session.id, format=pb.PROMPT_FORMAT_ANTHROPIC)
    )
    assert "<recalled_context" in view.messages_json, view.actions
    assert "zebra-7731" in view.messages_json
    (action,) = [a for a in view.actions if a.kind == "recalled"]
    assert fact_id in action.detail
    assert view.estimated_tokens <= view.budget_tokens
    # The log itself is untouched.
    log = store.GetDurableLog(pb.GetViewRequest(session_id=session.id))
    assert "recalled_context" not in str(log)

    # Without retrieval the same view holds no block.
    store.UpdateSettings(
        pb.UpdateSettingsRequest(
            session_id=session.id,
            settings=pb.SessionSettings(memory=pb.MemoryPolicy(retrieval_top_k=0)),
        )
    )
    plain = store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id))
    assert "recalled_context" not in plain.messages_json
    assert not [a for a in plain.actions if a.kind.startswith("recall")]


def test_a_damaged_index_row_fails_no_search_and_no_view(tmp_path: Path) -> None:
    """SQLite keeps whatever a write gave it: a chunk another program left with text
    where its position belongs is skipped by searches and views, which still answer."""
    server = start_server(f"sqlite:///{tmp_path}/sessions.db")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            store = Stub(channel)
            memory = pb.MemoryPolicy(retrieval_top_k=2)
            settings = pb.SessionSettings(model="gpt-4o", memory=memory)
            session = store.CreateSession(pb.CreateSessionRequest(settings=settings))
            fact_id, _, _ = _history_with_hidden_fact(store, session.id)
            other = append(
                store, session.id, user("The vault path of the archive is cold.")
            ).entry_ids[0]
            append(store, session.id, user("Which vault path holds the staging password?"))
            before = _recall(store, session.id, "vault")
            assert fact_id in {h.entry_id for h in before.hits}
            models = server.app.read_models
            assert models is not None
            with models.database.writer.begin() as connection:
                connection.execute(
                    update(t.recall_chunks)
                    .where(t.recall_chunks.c.entry_id == fact_id)
                    .values(entry_position=literal("damaged"))
                )

            after = _recall(store, session.id, "vault")
            found = {h.entry_id for h in after.hits}
            assert fact_id not in found and other in found
            view = store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id))
            assert "zebra-7731" not in view.messages_json
            assert [a.kind for a in view.actions if a.kind.startswith("recall")], view.actions
    finally:
        server.stop(0)


def test_retrieval_top_k_out_of_range_is_refused(store: Stub) -> None:
    settings = pb.SessionSettings(memory=pb.MemoryPolicy(retrieval_top_k=500))
    message = refused(
        lambda: store.CreateSession(pb.CreateSessionRequest(settings=settings)),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert "memory.retrieval_top_k" in message


def test_retracted_cleared_and_forked_histories_are_found_too(store: Stub) -> None:
    session = store.CreateSession(pb.CreateSessionRequest(session_id="raw"))
    fact = append(store, session.id, user(FACT)).entry_ids[0]
    append(store, session.id, text(pb.ROLE_ASSISTANT, "Noted."))
    oops = append(store, session.id, user("The wrong key is marmot-55.")).entry_ids[0]
    store.RetractEntry(pb.RetractEntryRequest(session_id=session.id, entry_id=oops))
    store.ClearSession(pb.ClearSessionRequest(session_id=session.id, reason="fresh start"))
    found = {h.entry_id: h for h in _recall(store, session.id, "zebra-7731 marmot").hits}
    assert set(found) == {fact, oops}
    assert all(h.hidden_by_compaction == 0 for h in found.values())  # a clear, no compaction

    store.ForkSession(pb.ForkSessionRequest(session_id=session.id, new_session_id="raw-fork"))
    forked = _recall(store, "raw-fork", "zebra-7731").hits
    assert [(h.session_id, h.entry_id) for h in forked] == [("raw-fork", fact)]


def test_a_query_of_one_very_long_word_is_answered(store: Stub) -> None:
    session = store.CreateSession(pb.CreateSessionRequest(session_id="long"))
    append(store, session.id, user("a" * 3_000))
    assert len(_recall(store, session.id, "b" * 3_000).hits) == 0


def test_a_slow_embedding_provider_leaves_the_full_text_answer_within_the_deadline(
    store: Stub, provider: FakeProvider
) -> None:
    memory = pb.MemoryPolicy(
        embedding_model=EMBEDDING_MODEL,
        embedding_api_base=provider.openai_base,
        embedding_timeout_seconds=30,
    )
    session = store.CreateSession(
        pb.CreateSessionRequest(settings=pb.SessionSettings(memory=memory))
    )
    fact = append(store, session.id, user(FACT)).entry_ids[0]
    provider.script(delay(10))
    started = time.monotonic()
    found = store.Recall(pb.RecallRequest(session_id=session.id, query="zebra"), timeout=3)
    assert time.monotonic() - started < 3
    assert found.embedding_model == "" and found.hits[0].entry_id == fact


def test_a_session_erased_whole_is_never_found_again(store: Stub, server: RunningServer) -> None:
    for name in ("gone", "kept"):
        store.CreateSession(pb.CreateSessionRequest(session_id=name))
        append(store, name, user(FACT))
    store.EraseSession(pb.EraseSessionRequest(session_id="gone", reason="GDPR request"))
    assert list(_recall(store, "gone", "zebra-7731").hits) == []
    wide = _recall(store, "kept", "zebra-7731", tenant_wide=True)
    assert [h.session_id for h in wide.hits] == ["kept"]
    assert _chunks_holding(server, "zebra") == 1


# Cached embeddings as a damaged row holds them: (vector bytes, stated dimensions).
DAMAGED_EMBEDDINGS = {
    "cut short": (b"\x00\x01\x02", EMBEDDING_DIMENSIONS),
    "of another size": (struct.pack("<8f", *[0.5] * 8), 8),
    "not numbers": (
        struct.pack(f"<{EMBEDDING_DIMENSIONS}f", *[math.nan] * EMBEDDING_DIMENSIONS),
        EMBEDDING_DIMENSIONS,
    ),
}
PARKED = "I parked my car on level three, bay 42."


def _cached(server: RunningServer, base: str, text_: str) -> tuple[bytes, int] | None:
    models = server.app.read_models
    assert models is not None
    e = t.recall_embeddings.c
    query = select(e.vector, e.dimensions).where(
        e.provider == provider_key(EMBEDDING_MODEL, base),
        e.model == EMBEDDING_MODEL,
        e.content_hash == content_hash(text_),
    )
    with models.database.reader.connect() as connection:
        row = connection.execute(query).first()
    return None if row is None else (bytes(row[0]), int(row[1]))


def _damage(server: RunningServer, base: str, text_: str, damaged: tuple[bytes, int]) -> None:
    """Stores ``damaged`` as the cached embedding of ``text_``, as a damaged row (or
    another program's write) would leave it."""
    models = server.app.read_models
    assert models is not None
    e = t.recall_embeddings.c
    key = (provider_key(EMBEDDING_MODEL, base), EMBEDDING_MODEL, content_hash(text_))
    with models.database.writer.begin() as connection:
        connection.execute(
            delete(t.recall_embeddings).where(
                e.provider == key[0], e.model == key[1], e.content_hash == key[2]
            )
        )
        connection.execute(
            insert(t.recall_embeddings),
            [
                {
                    "provider": key[0],
                    "model": key[1],
                    "content_hash": key[2],
                    "dimensions": damaged[1],
                    "vector": damaged[0],
                    "created_us": 0,
                }
            ],
        )


def _embedded_since(provider: FakeProvider, start: int) -> list[str]:
    calls = [r for r in provider.requests[start:] if r.path == EMBEDDINGS_PATH]
    return [text_ for r in calls for text_ in r.body["input"]]


@pytest.mark.parametrize("damage", list(DAMAGED_EMBEDDINGS))
def test_a_view_over_damaged_cached_embeddings_is_served_and_embeds_them_again(
    store: Stub, server: RunningServer, provider: FakeProvider, damage: str
) -> None:
    """The cache is derived data: a damaged row is skipped, logged once, embedded again
    and replaced, and the view (its retrieval, a search by meaning) is served."""
    memory = pb.MemoryPolicy(
        embedding_model=EMBEDDING_MODEL,
        embedding_api_base=provider.openai_base,
        retrieval_top_k=2,
    )
    settings = pb.SessionSettings(model="gpt-4o", context_window_tokens=20_000, memory=memory)
    session = store.CreateSession(pb.CreateSessionRequest(session_id="trip", settings=settings))
    parked = append(store, session.id, user(PARKED)).entry_ids[0]
    append(store, session.id, text(pb.ROLE_ASSISTANT, "Got it, level three, bay 42."))
    puppy = append(store, session.id, user("My puppy Rex needs a walk at six.")).entry_ids[0]
    append(store, session.id, text(pb.ROLE_ASSISTANT, "Noted, six o'clock."))
    kept = append(store, session.id, user("Book a table for two at eight.")).entry_ids[0]
    append(store, session.id, text(pb.ROLE_ASSISTANT, "Booked for eight."))
    store.RecordCompaction(
        pb.RecordCompactionRequest(
            session_id=session.id, summary="## Goal\nEvening plans.", first_kept_entry_id=kept
        )
    )
    assert _recall(store, session.id, "automobile").hits[0].entry_id == parked  # all embedded

    # The fact's cached vector is damaged, and so is the next question's (cached
    # before this session asks it: the same text was searched for before).
    question = "Where did I leave the automobile?"
    for damaged_text in (PARKED, question):
        _damage(server, provider.openai_base, damaged_text, DAMAGED_EMBEDDINGS[damage])
    asked = append(store, session.id, user(question)).entry_ids[0]
    # A search of a session without a model waits for the index to hold the question:
    # the view's search then reads the index's rows, not vectors kept in memory.
    plain = store.CreateSession(pb.CreateSessionRequest(session_id="plain"))
    _recall(store, plain.id, "anything")
    start = len(provider.requests)

    with structlog.testing.capture_logs() as logs:
        view = store.GetPromptView(
            pb.GetPromptViewRequest(session_id=session.id, format=pb.PROMPT_FORMAT_OPENAI)
        )
    (recalled,) = [a for a in view.actions if a.kind == "recalled"]
    assert parked in recalled.detail, view.actions
    assert "bay 42" in view.messages_json
    # The damaged two were embedded again; the intact rows were read as cached.
    assert sorted(_embedded_since(provider, start)) == sorted([PARKED, question])
    warnings = [e for e in logs if e["event"].startswith("damaged cached embeddings")]
    assert all(w["log_level"] == "warning" for w in warnings)
    named = {r["content_hash"]: r for w in warnings for r in w["rows"]}
    assert set(named) == {content_hash(PARKED), content_hash(question)}
    assert named[content_hash(PARKED)]["session_id"] == session.id
    assert named[content_hash(PARKED)]["entry_id"] == parked
    assert named[content_hash(question)]["session_id"] == session.id
    assert named[content_hash(question)].get("entry_id", asked) == asked
    assert sum(w["damaged"] for w in warnings) == 2  # each logged once
    for replaced in (PARKED, question):
        vector, dimensions = _cached(server, provider.openai_base, replaced) or (b"", 0)
        assert dimensions == EMBEDDING_DIMENSIONS and len(vector) == 4 * dimensions
        assert all(math.isfinite(v) for v in struct.unpack(f"<{dimensions}f", vector))

    # Found by meaning from the rows as they are now, the intact ones and those made
    # again, with nothing embedded again but the new query.
    start = len(provider.requests)
    by_meaning = {h.entry_id: h for h in _recall(store, session.id, "automobile").hits}
    assert "semantic" in by_meaning[parked].matched_by
    assert _recall(store, session.id, "canine").hits[0].entry_id == puppy
    assert _embedded_since(provider, start) == ["canine"]
    again = store.GetPromptView(
        pb.GetPromptViewRequest(session_id=session.id, format=pb.PROMPT_FORMAT_OPENAI)
    )
    assert again.messages_json == view.messages_json


def test_a_damaged_cached_embedding_fails_no_view_while_the_provider_is_down(
    store: Stub, server: RunningServer, provider: FakeProvider
) -> None:
    """Nothing can be embedded again: the view's retrieval answers by full text, and the
    damaged row is logged once, not at every view."""
    unreachable = provider.url + "/nowhere"
    memory = pb.MemoryPolicy(
        embedding_model=EMBEDDING_MODEL, embedding_api_base=unreachable, retrieval_top_k=2
    )
    settings = pb.SessionSettings(model="gpt-4o", context_window_tokens=20_000, memory=memory)
    session = store.CreateSession(pb.CreateSessionRequest(settings=settings))
    fact, _, _ = _history_with_hidden_fact(store, session.id)
    question = "Which vault path holds the staging password?"
    _damage(server, unreachable, question, DAMAGED_EMBEDDINGS["cut short"])
    asked = append(store, session.id, user(question)).entry_ids[0]

    with structlog.testing.capture_logs() as logs:
        # A search (which waits for the index to hold the question), then two views.
        assert fact in [h.entry_id for h in _recall(store, session.id, "vault").hits]
        for _ in range(2):
            view = store.GetPromptView(pb.GetPromptViewRequest(session_id=session.id))
            (recalled,) = [a for a in view.actions if a.kind == "recalled"]
            assert fact in recalled.detail and "zebra-7731" in view.messages_json
    (warning,) = [e for e in logs if e["event"].startswith("damaged cached embeddings")]
    (row,) = warning["rows"]
    assert (row["session_id"], row["entry_id"]) == (session.id, asked)
    assert row["content_hash"] == content_hash(question) and "3 bytes" in row["reason"]


def test_a_model_whose_vectors_changed_size_is_searched_at_its_new_size(
    store: Stub, server: RunningServer, provider: FakeProvider
) -> None:
    """Cached vectors of the model's former size are embedded again, in the search that
    first meets the new size, whichever of the query or a chunk it meets it in."""
    memory = pb.MemoryPolicy(
        embedding_model=EMBEDDING_MODEL, embedding_api_base=provider.openai_base
    )
    settings = pb.SessionSettings(memory=memory)
    trip = store.CreateSession(pb.CreateSessionRequest(session_id="trip", settings=settings))
    parked = append(store, trip.id, user(PARKED)).entry_ids[0]
    append(store, trip.id, text(pb.ROLE_ASSISTANT, "Got it, level three, bay 42."))
    assert _recall(store, trip.id, "automobile").hits[0].entry_id == parked
    _recall(store, trip.id, "canine")  # cached for later

    provider.embedding_dimensions = 64  # the model served there changed
    # The query and the chunks are cached at the former size; a new entry's vector,
    # made now, is not.
    hound = "The hound barked all night."
    append(store, trip.id, user(hound))
    found = _recall(store, trip.id, "automobile")
    assert found.embedding_model == EMBEDDING_MODEL
    assert found.hits[0].entry_id == parked and found.hits[0].matched_by == "semantic"
    # No chunk vector cached yet, and the query's of the former size.
    pets = store.CreateSession(pb.CreateSessionRequest(session_id="pets", settings=settings))
    puppy = append(store, pets.id, user("The puppy sleeps all day.")).entry_ids[0]
    found = _recall(store, pets.id, "canine")
    assert found.hits[0].entry_id == puppy and found.hits[0].matched_by == "semantic"
    for cached_text in (PARKED, hound, "The puppy sleeps all day.", "automobile", "canine"):
        assert (_cached(server, provider.openai_base, cached_text) or (b"", 0))[1] == 64


@pytest.mark.parametrize(
    "answer",
    [
        ((0.5,) * EMBEDDING_DIMENSIONS, (0.5,) * 8),  # vectors of two sizes
        ((math.nan,) * EMBEDDING_DIMENSIONS, (0.5,) * EMBEDDING_DIMENSIONS),
    ],
    ids=["two sizes", "not numbers"],
)
def test_an_embedding_answer_that_is_no_set_of_vectors_leaves_the_full_text_answer(
    store: Stub,
    server: RunningServer,
    provider: FakeProvider,
    answer: tuple[tuple[float, ...], ...],
) -> None:
    memory = pb.MemoryPolicy(
        embedding_model=EMBEDDING_MODEL, embedding_api_base=provider.openai_base
    )
    session = store.CreateSession(
        pb.CreateSessionRequest(settings=pb.SessionSettings(memory=memory))
    )
    fact = append(store, session.id, user(FACT)).entry_ids[0]
    provider.script(vectors(*answer))  # the fact's chunk and the query, in one call
    found = _recall(store, session.id, "zebra-7731")
    assert found.embedding_model == "" and found.hits[0].entry_id == fact
    assert _embeddings(server) == 0  # nothing of the answer was cached
