"""Group "recall": how long a search of a 10,000-entry session's raw history takes.

The session is agent turns (the benchmarks' usual texts, drawn from a small
vocabulary) with a fact planted every 25 turns ("deployment N used build tag
orchidN on host kestrelN"), 70% of it compacted away. Each search asks for
one planted fact by its words, through the gRPC API:

* full text (no embedding model): the target, p50 under 20 ms;
* semantic and full text fused, with the session's embedding model served by
  the loopback provider (tests/support/fake_provider.py) and every query's
  embedding already cached: the target, p50 under 20 ms;
* the first semantic search, which embeds every chunk of the session once
  (reported, no target), and how long the index took to catch up with the
  session (reported).

A search for common words (matching nearly every chunk) is reported too,
without a target: it is the full-text worst case. On PostgreSQL the tables
are analysed once the index has caught up, as autovacuum would within a
minute: before that the planner has no statistics for the new rows.
"""

from __future__ import annotations

import random
import time

from proto.sessionstore.v1 import session_store_pb2 as pb
from tests.bench import turns
from tests.bench.config import Context
from tests.bench.report import Result, Target, median, percentile
from tests.bench.server import database, running
from tests.support.fake_provider import FakeProvider

FACT_EVERY = 25
EMBEDDING_MODEL = "openai/text-embedding-3-small"


def _fact(n: int) -> pb.Entry:
    text = f"Remember: deployment {n} used build tag orchid{n} on host kestrel{n}."
    return pb.Entry(role=pb.ROLE_USER, content=[pb.ContentBlock(text=pb.TextBlock(text=text))])


def _build(stub: turns.Stub, entries: int, memory: pb.MemoryPolicy) -> tuple[str, list[int]]:
    session_id = turns.create(stub, memory=memory)
    built = turns.BuiltSession(session_id)
    facts: list[int] = []
    batch: list[pb.Entry] = []
    for n in range(entries // 4):
        turn = turns.agent_turn(n)
        if n % FACT_EVERY == 0:
            turn[0] = _fact(n)
            facts.append(n)
        batch += turn
        if len(batch) >= turns.BUILD_BATCH:
            _append(stub, built, batch)
            batch = []
    if batch:
        _append(stub, built, batch)
    turns.compact(stub, built, keep_fraction=0.3)
    return session_id, facts


def _append(stub: turns.Stub, built: turns.BuiltSession, batch: list[pb.Entry]) -> None:
    ids = list(turns.append(stub, built.session_id, batch).entry_ids)
    built.turns.extend((ids[i], ids[i + 2]) for i in range(0, len(ids), 4))
    built.entries += len(ids)


def _timed(stub: turns.Stub, session_id: str, query: str) -> tuple[float, pb.RecallResponse]:
    began = time.perf_counter()
    found = stub.Recall(pb.RecallRequest(session_id=session_id, query=query, limit=10))
    return time.perf_counter() - began, found


def _set_model(stub: turns.Stub, session_id: str, memory: pb.MemoryPolicy) -> None:
    stub.UpdateSettings(
        pb.UpdateSettingsRequest(session_id=session_id, settings=pb.SessionSettings(memory=memory))
    )


def recall(ctx: Context) -> None:
    scale = ctx.scale
    for backend in ctx.backends:
        print(f"[recall] {backend}: {scale.recall_entries:,} entries", flush=True)
        with (
            FakeProvider() as provider,
            database(backend) as db,
            running(db, env={"OPENAI_API_KEY": "sk-bench"}, recall_index="true") as server,
        ):
            stub = server.stub()
            semantic = pb.MemoryPolicy(
                embedding_model=EMBEDDING_MODEL,
                embedding_api_base=provider.openai_base,
                embedding_timeout_seconds=120,
            )
            full_text = pb.MemoryPolicy(embedding_model="")
            session_id, facts = _build(stub, scale.recall_entries, full_text)
            began = time.perf_counter()
            _timed(stub, session_id, "orchid0")  # waits for the index to reach the head
            catch_up = time.perf_counter() - began
            if backend == "postgres":
                # What autovacuum does within a minute of 10,000 new rows, done now:
                # without statistics the planner takes the session's btree over GIN.
                with db.psycopg_connect(autocommit=True) as connection:
                    connection.execute("ANALYZE recall_chunks, recall_embeddings")
            rng = random.Random(7)
            queries = [
                f"which build tag did deployment {n} use orchid{n}"
                for n in rng.choices(facts, k=scale.recall_queries)
            ]
            fulltext_runs = _runs(ctx, stub, session_id, queries, facts)
            common_runs = _runs(ctx, stub, session_id, ["session store compaction"] * 10, None)

            _set_model(stub, session_id, semantic)
            first, found = _timed(stub, session_id, "deployment build tag")
            assert found.embedding_model == EMBEDDING_MODEL, found
            embedded = sum(len(r.body["input"]) for r in provider.requests)
            for query in queries:  # each query's embedding, cached once
                _timed(stub, session_id, query)
            semantic_runs = _runs(ctx, stub, session_id, queries, facts)
        _report(ctx, backend, fulltext_runs, common_runs, semantic_runs, first, catch_up, embedded)


def _runs(
    ctx: Context,
    stub: turns.Stub,
    session_id: str,
    queries: list[str],
    facts: list[int] | None,
) -> list[list[float]]:
    runs = []
    for _ in range(ctx.scale.reps):
        seconds = []
        for query in queries:
            took, found = _timed(stub, session_id, query)
            if facts is not None:
                wanted = query.rsplit("orchid", 1)[1]
                # The planted fact is found (first, as a rule; the loopback embedding
                # is a bag of hashed words, so a collision may put another fact first).
                snippets = [hit.snippet for hit in found.hits[:3]]
                assert any(f"orchid{wanted} " in s for s in snippets), (query, snippets)
            seconds.append(took)
        runs.append(seconds)
    return runs


def _report(
    ctx: Context,
    backend: str,
    fulltext: list[list[float]],
    common: list[list[float]],
    semantic: list[list[float]],
    first_semantic: float,
    catch_up: float,
    embedded: int,
) -> None:
    report = ctx.report
    entries = f"{ctx.scale.recall_entries:,} entries"
    target = Target("<", 20.0, "< 20 ms")
    figures = {
        f"full-text p50, {entries}": (fulltext, 50, target),
        f"full-text p99, {entries}": (fulltext, 99, None),
        f"full-text p50, common words, {entries}": (common, 50, None),
        f"semantic+full-text p50 (cached query), {entries}": (semantic, 50, target),
        f"semantic+full-text p99 (cached query), {entries}": (semantic, 99, None),
    }
    raw: dict[str, object] = {}
    for metric, (runs, q, bound) in figures.items():
        values = [percentile(run, q) * 1e3 for run in runs]
        report.add(Result("recall", backend, metric, median(values), "ms", values, target=bound))
        raw[metric] = values
    report.add(
        Result(
            "recall",
            backend,
            f"first semantic search (embeds {embedded:,} chunks)",
            first_semantic * 1e3,
            "ms",
            [first_semantic * 1e3],
        )
    )
    report.add(
        Result(
            "recall", backend, f"index catch-up, {entries}", catch_up * 1e3, "ms", [catch_up * 1e3]
        )
    )
    raw["first_semantic_ms"] = first_semantic * 1e3
    raw["catch_up_ms"] = catch_up * 1e3
    report.keep(f"recall.{backend}", raw)
