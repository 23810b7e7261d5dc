"""Recall: long-term memory over a session's whole raw history.

Compaction hides old entries from the prompt; recall finds them again, exactly:
each hit names the entry, the version that appended it and the compaction
that hid it, so the client can fetch it (GetEntry) or replay around it. The
search reads the recall index (a read model), so it waits, like every
read-model query, until the index has reached the client's position.

Full text needs no model. With ``memory.embedding_model`` set on the session,
the search also ranks by meaning, and the two rankings are fused by
reciprocal rank (each hit scores the sum of 1 / (60 + rank) over the rankings
that found it): no score of one has to be made comparable to the other's.
An embedding provider that fails or is too slow leaves the full-text answer.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from domain.errors import InvalidRequest, PreconditionFailed
from domain.session import Session
from domain.settings import MemoryPolicy
from projections.read_models.recall import content_hash
from services.adapters.embeddings import EmbeddingFailed, embed, provider_key
from services.adapters.recall_queries import ChunkRow, RecallQueries, RecallScope, query_words
from services.app.sessions import SessionService
from services.readmodels import ReadModels

if TYPE_CHECKING:
    import numpy as np

DEFAULT_LIMIT = 10
MAX_LIMIT = 100
MAX_QUERY_CHARS = 4_000
# Candidates each ranking brings to the fusion.
CANDIDATES = 50
RRF_K = 60
SNIPPET_CHARS = 240
# A search embeds at most this many chunks not embedded yet; the rest are found
# by full text until a later search embeds them.
MAX_EMBEDDED_PER_SEARCH = 20_000
# The share of what is left of a search's deadline its embedding call may take.
DEADLINE_SHARE = 0.5

log = structlog.get_logger(__name__)


class RecallOff(PreconditionFailed):
    """This server keeps no read models, so no recall index."""

    reason = "recall_off"


@dataclass(frozen=True)
class RecallQuery:
    query: str
    limit: int = 0
    tenant_wide: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    since_us: int | None = None
    until_us: int | None = None
    min_position: int = 0


@dataclass(frozen=True)
class RecallHit:
    session_id: str
    entry_id: str
    version: int
    score: float
    snippet: str
    hidden_by_compaction: int
    role: str
    recorded_us: int
    matched_by: str


@dataclass(frozen=True)
class RecallResult:
    hits: Sequence[RecallHit]
    position: int
    embedding_model: str  # empty: full text only


def validate(request: RecallQuery) -> int:
    """The request's limit, once the request is one a search can answer."""
    if not request.query.strip():
        raise InvalidRequest("query is required: the words (or meaning) to recall")
    if len(request.query) > MAX_QUERY_CHARS:
        raise InvalidRequest(
            f"query is {len(request.query):,} characters; send at most {MAX_QUERY_CHARS:,}"
        )
    if not 0 <= request.limit <= MAX_LIMIT:
        raise InvalidRequest(
            f"limit {request.limit} is out of range; send 1 to {MAX_LIMIT}, "
            f"or 0 for {DEFAULT_LIMIT}"
        )
    if (
        request.since_us is not None
        and request.until_us is not None
        and request.since_us >= request.until_us
    ):
        raise InvalidRequest("since must be before until")
    return request.limit or DEFAULT_LIMIT


class RecallService:
    def __init__(self, sessions: SessionService, read_models: ReadModels | None) -> None:
        self.sessions = sessions
        self.read_models = read_models
        self.queries = RecallQueries(read_models.database) if read_models is not None else None

    def recall(
        self, session_id: str, request: RecallQuery, deadline: float | None = None
    ) -> RecallResult:
        """The best hits for the query in the session's raw history (every session of
        its tenant with ``tenant_wide``), best first."""
        limit = validate(request)
        session = self.sessions.get_session(session_id)  # NOT_FOUND, or another tenant's
        models, queries = self._index()
        names = ["recall", "catalog"] if request.tenant_wide or request.labels else ["recall"]
        position = models.wait_for(names, request.min_position, deadline)
        scope = RecallScope(
            session_ids=(session_id,),
            tenant=session.tenant if request.tenant_wide else None,
            labels=dict(request.labels),
            since_us=request.since_us,
            until_us=request.until_us,
        )
        words = query_words(request.query)
        rankings = [("fulltext", queries.fulltext(scope, words, CANDIDATES))]
        policy = session.settings.memory
        model = ""
        if policy.embedding_model:
            generation = queries.generation(names)
            timeout = float(policy.embedding_timeout_seconds)
            if deadline is not None:
                # The provider gets half of what is left of the call's own deadline at
                # most: the full-text answer still comes in time when it does not answer.
                timeout = min(timeout, (deadline - time.monotonic()) * DEADLINE_SHARE)
            semantic = None
            if timeout > 0:
                semantic = self._semantic(
                    queries, scope, request.query, policy, generation, timeout
                )
            if semantic is not None:
                rankings.append(("semantic", semantic))
                model = policy.embedding_model
        hits = self._fused(rankings, words, limit, session)
        return RecallResult(hits, position, model)

    def _index(self) -> tuple[ReadModels, RecallQueries]:
        if self.read_models is None or self.queries is None:
            raise RecallOff(
                "this server keeps no read models (SESSIONSTORE_PROJECTIONS=off or a memory: "
                "database), so no recall index: recall is not available"
            )
        if "recall" not in self.read_models.store.models:
            raise RecallOff(
                "recall is off on this server: start it with SESSIONSTORE_RECALL_INDEX=true "
                "(the index keeps entries' text unsealed in the read models' tables until "
                "they are erased)"
            )
        return self.read_models, self.queries

    def _semantic(
        self,
        queries: RecallQueries,
        scope: RecallScope,
        query: str,
        policy: MemoryPolicy,
        generation: tuple[object, ...],
        timeout: float,
    ) -> list[ChunkRow] | None:
        """The chunks nearest the query in meaning, best first; None when the provider
        could not embed what the search needs."""
        import numpy as np

        try:
            query_vector, ids, matrix = self._embedded(
                queries, scope, query, policy, generation, time.monotonic() + timeout
            )
        except EmbeddingFailed as error:
            log.warning(
                "recall answers by full text only: the embedding model failed",
                model=policy.embedding_model,
                error=str(error),
            )
            return None
        # Vectors of another size than the query's are never scored (nor could be).
        if query_vector is None or len(ids) == 0 or matrix.shape[1] != query_vector.shape[0]:
            return []
        # The rows are unit vectors: the dot product with the unit query is the cosine.
        # einsum, not BLAS: a threaded BLAS's threads spin against the server's own
        # (6-10x slower on 2 busy cores), and one core does 10,000 rows in ~1 ms.
        unit_query = query_vector / (np.linalg.norm(query_vector) or 1.0)
        scores = np.einsum("ij,j->i", matrix, unit_query)
        count = min(CANDIDATES, len(ids))
        best = np.argpartition(-scores, count - 1)[:count]
        best = best[np.argsort(-scores[best], kind="stable")]
        by_id = {row.id: row for row in queries.chunks([int(ids[i]) for i in best])}
        return [by_id[int(ids[i])] for i in best if int(ids[i]) in by_id]

    def _embedded(
        self,
        queries: RecallQueries,
        scope: RecallScope,
        query: str,
        policy: MemoryPolicy,
        generation: tuple[object, ...],
        give_up_at: float,
    ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """The query's vector, and (chunk ids, unit vectors) of the chunks in scope, all of
        one size, once what was not embedded yet (or was damaged) is.

        The size most of the cached vectors have is the model's, as far as the cache
        tells: a cached vector of another size (the query's included) is embedded
        again. What the model makes now tells for sure: when that is of another
        size, the cache was filled before the model changed, and the search goes
        round once more to embed again what it read at the former size."""
        model, api_base = policy.embedding_model, policy.embedding_api_base
        provider = provider_key(model, api_base)
        query_hash = content_hash(query)
        ids, matrix, missing = queries.vectors(scope, provider, model, generation)
        size = int(matrix.shape[1]) if len(ids) else None
        query_vector = queries.cached_embeddings(
            provider, model, [query_hash], scope.session_ids[0], size
        ).get(query_hash)
        if size is None and query_vector is not None:
            size = int(query_vector.shape[0])  # no chunk vector cached: the query's tells
        for _ in range(2):
            wanted = missing[:MAX_EMBEDDED_PER_SEARCH]
            if query_vector is None and query_hash not in {h for h, _ in wanted}:
                wanted.append((query_hash, query))
            if not wanted:
                break
            left = give_up_at - time.monotonic()
            if left <= 0:
                raise EmbeddingFailed(f"no time was left to embed with {model}")
            made = embed(model, api_base, [text for _, text in wanted], left)
            fresh = {h: made[i] for i, (h, _) in enumerate(wanted)}
            queries.store_embeddings(provider, model, fresh)
            changed = size is not None and int(made.shape[1]) != size
            size = int(made.shape[1])
            if query_vector is None or changed:
                # None: a query cached at the former size, embedded in the next round.
                query_vector = fresh.get(query_hash)
            if missing or changed:
                ids, matrix, missing = queries.vectors(scope, provider, model, generation, size)
            if not changed:
                break
        return query_vector, ids, matrix

    def _fused(
        self,
        rankings: Sequence[tuple[str, Sequence[ChunkRow]]],
        words: Sequence[str],
        limit: int,
        session: Session,
    ) -> list[RecallHit]:
        """One hit per entry, by reciprocal rank fusion of the rankings."""
        scores: dict[tuple[str, str], float] = {}
        best: dict[tuple[str, str], ChunkRow] = {}
        found_by: dict[tuple[str, str], list[str]] = {}
        for name, rows in rankings:
            seen: set[tuple[str, str]] = set()
            for row in rows:
                key = (row.session_id, row.entry_id)
                if key in seen:
                    continue  # an entry ranks by its best chunk
                seen.add(key)
                scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + len(seen))
                best.setdefault(key, row)
                found_by.setdefault(key, []).append(name)
        ranked = sorted(scores, key=lambda k: (-scores[k], best[k].id))[:limit]
        # The other sessions the hits come from (tenant-wide), read together, not one
        # by one; a session the caller may not see (or no longer stored) gives no hit.
        others = dict.fromkeys(best[k].session_id for k in ranked if k[0] != session.id)
        owners = {s.id: s for s in self.sessions.get_sessions(list(others))}
        owners[session.id] = session
        hits = []
        for key in ranked:
            row = best[key]
            owner = owners.get(row.session_id)
            if owner is None:
                continue
            hits.append(
                RecallHit(
                    session_id=row.session_id,
                    entry_id=row.entry_id,
                    version=row.version,
                    score=scores[key],
                    snippet=snippet(row.text, words),
                    hidden_by_compaction=hidden_by(owner, row.entry_position),
                    role=row.role,
                    recorded_us=row.recorded_us,
                    matched_by="+".join(found_by[key]),
                )
            )
        return hits


def hidden_by(session: Session, entry_position: int) -> int:
    """The version of the compaction in force that hid the entry from the prompt
    view (the first whose cut lies past it), or 0 when the view still shows it or
    what hid it was no compaction (the session was cleared)."""
    if entry_position >= session.first_kept_position:
        return 0
    for cut in session.cuts:
        if entry_position < cut[1]:
            return int(cut[0])
    return 0


def snippet(text: str, words: Sequence[str]) -> str:
    """Up to SNIPPET_CHARS of the chunk around the first of the words it holds."""
    if len(text) <= SNIPPET_CHARS:
        return text
    lowered = text.lower()
    found = [i for i in (lowered.find(w) for w in words) if i >= 0]
    start = max(0, min(found, default=0) - SNIPPET_CHARS // 3)
    end = min(len(text), start + SNIPPET_CHARS)
    start = max(0, end - SNIPPET_CHARS)
    return ("..." if start else "") + text[start:end] + ("..." if end < len(text) else "")
