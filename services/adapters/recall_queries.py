"""Queries of the recall index: full text in SQL, vectors for an exact search.

Full text is FTS5's bm25 on SQLite and ts_rank over the GIN-indexed
tsvector on PostgreSQL. A query's words are matched with OR, ranked by how
many and how rare: an agent's question rarely repeats a fact's every word.

Vectors are searched exactly, with numpy, over the stored embeddings of the
sessions searched: sqlite-vec cannot be loaded by this Python's sqlite3 (built
without extension loading) and pgvector is not installed on the PostgreSQL
this runs against. A session's vectors are kept in memory between searches,
checked against the index with one aggregate query each time, so a search
whose embeddings are all cached costs a query and a matrix product. Cached
embeddings are decoded by services.adapters.embedding_rows, which sets the
damaged ones aside: they are answered as missing, and stored again replace
them.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    column,
    exists,
    func,
    literal,
    literal_column,
    select,
    table,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite

from services.adapters import read_model_tables as t
from services.adapters.embedding_rows import (
    LOGGED_ROWS,
    DamagedEmbedding,
    DamageReports,
    decode_embeddings,
)
from services.adapters.read_model_db import ReadModelDatabase, reading

if TYPE_CHECKING:
    import numpy as np

MAX_QUERY_WORDS = 32
# Longer "words" (a hash, a blob) are cut: PostgreSQL refuses lexemes over 2,047 bytes.
MAX_WORD_CHARS = 100
_WORD = re.compile(r"\w+")
log = structlog.get_logger(__name__)
_fts = table("recall_fts", column("rowid"))
# Sets of vectors kept in memory (each a session's, or a tenant's search's), at most
# this many bytes of them all: 10,000 chunks of 1,536 dimensions take 61 MB.
VECTOR_SETS = 64
VECTOR_BYTES = 256 << 20


@dataclass(frozen=True)
class RecallScope:
    """Which chunks a search reads: these sessions', or (``tenant`` set) those of every
    session of the tenant the catalog knows and that was not erased; of sessions with
    all these labels; stored since <= time < until."""

    session_ids: tuple[str, ...] = ()
    tenant: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    since_us: int | None = None
    until_us: int | None = None

    def key(self) -> tuple[Any, ...]:
        return (
            self.session_ids,
            self.tenant,
            tuple(sorted(self.labels.items())),
            self.since_us,
            self.until_us,
        )


@dataclass(frozen=True)
class ChunkRow:
    id: int
    session_id: str
    entry_id: str
    version: int
    entry_position: int
    recorded_us: int
    role: str
    text: str

    def sound(self) -> bool:
        """Whether each value is of its column's type. SQLite keeps whatever a write
        gave it, so a row another program wrote (or damaged) may hold text where a
        number belongs: a search skips that row rather than fail on it."""
        numbers = (self.version, self.entry_position, self.recorded_us)
        texts = (self.session_id, self.entry_id, self.role, self.text)
        return all(type(n) is int for n in numbers) and all(type(s) is str for s in texts)


def query_words(query: str) -> list[str]:
    words = []
    for word in _WORD.findall(query.lower()):
        word = word[:MAX_WORD_CHARS]
        if word not in words:
            words.append(word)
    return words[:MAX_QUERY_WORDS]


_CHUNK_COLUMNS = (
    t.recall_chunks.c.id,
    t.recall_chunks.c.session_id,
    t.recall_chunks.c.entry_id,
    t.recall_chunks.c.version,
    t.recall_chunks.c.entry_position,
    t.recall_chunks.c.recorded_us,
    t.recall_chunks.c.role,
    t.recall_chunks.c.text,
)


class RecallQueries:
    def __init__(self, database: ReadModelDatabase) -> None:
        self.database = database
        self._vectors: OrderedDict[tuple[Any, ...], _VectorSet] = OrderedDict()
        self._lock = threading.Lock()
        self.damage = DamageReports()

    def fulltext(self, scope: RecallScope, words: Sequence[str], limit: int) -> list[ChunkRow]:
        """The best ``limit`` chunks matching any of the words, best first."""
        if not words:
            return []
        c = t.recall_chunks.c
        if self.database.postgres:
            # The generated column is PostgreSQL's alone, so not in the shared metadata.
            search: Any = literal_column("recall_chunks.search")
            terms = " | ".join(f"'{w}'" for w in words)
            tsquery = func.to_tsquery(literal_column("'simple'"), literal(terms))
            # ts_rank over length (normalisation 1): cover density (ts_rank_cd) would
            # rank a chunk repeating one common word over one holding most of the query.
            rank = func.ts_rank(search, tsquery, 1)
            query = (
                select(*_CHUNK_COLUMNS).where(search.op("@@")(tsquery)).order_by(rank.desc(), c.id)
            )
        else:
            match = " OR ".join(f'"{w}"' for w in words)
            rank = func.bm25(literal_column("recall_fts"))
            query = (
                select(*_CHUNK_COLUMNS)
                .select_from(t.recall_chunks.join(_fts, _fts.c.rowid == c.id))
                .where(text("recall_fts MATCH :match").bindparams(match=match))
                .order_by(rank, c.id)
            )
        return self._chunks(_scoped(query, scope).limit(limit))

    def chunks(self, ids: Sequence[int]) -> list[ChunkRow]:
        if not ids:
            return []
        query = select(*_CHUNK_COLUMNS).where(t.recall_chunks.c.id.in_(list(ids)))
        return self._chunks(query)

    def _chunks(self, query: Select[Any]) -> list[ChunkRow]:
        with reading(self.database.reader) as connection:
            rows = [ChunkRow(*row) for row in connection.execute(query)]
        sound = [row for row in rows if row.sound()]
        if len(sound) < len(rows):
            damaged = [row.id for row in rows if not row.sound()]
            log.warning(
                "damaged recall chunks skipped: `sessionstore rebuild recall` rebuilds the index",
                chunks=damaged[:LOGGED_ROWS],
            )
        return sound

    # -- vectors -----------------------------------------------------------------------

    def generation(self, models: Sequence[str]) -> tuple[Any, ...]:
        """What changes whenever the chunks a search reads may have: the read models'
        positions (the recall index, and the catalog a tenant-wide scope reads) and
        the newest chunk id (a rebuild brings the positions back where they were)."""
        tracking = t.tracking.c
        with reading(self.database.reader) as connection:
            newest = connection.execute(select(func.max(t.recall_chunks.c.id))).scalar()
            rows = connection.execute(
                select(tracking.name, tracking.position).where(tracking.name.in_(list(models)))
            )
            return (newest, *sorted(rows))

    def vectors(
        self,
        scope: RecallScope,
        provider: str,
        model: str,
        generation: tuple[Any, ...],
        size: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str]]]:
        """(chunk ids, their vectors as unit rows) of the chunks in scope whose embedding
        is cached and sound, of ``size`` dimensions (None: the size most of them have),
        and (content hash, text) of those whose embedding is not: never made, damaged
        or of another size (made before the model changed), to be embedded (again).
        The set is kept in memory while ``generation`` (or, when that moved, the
        scope's chunks) stays the same."""
        import numpy as np

        key = (scope.key(), provider, model)
        with self._lock:
            kept = self._vectors.get(key)
            if kept is not None and not kept.holds(size):
                kept = None
            if kept is not None and kept.generation == generation:
                self._vectors.move_to_end(key)
                return kept.ids, kept.matrix, []
        c = t.recall_chunks.c
        with reading(self.database.reader) as connection:
            signature = tuple(
                connection.execute(
                    _scoped(select(func.count(c.id), func.max(c.id), func.sum(c.id)), scope)
                ).one()
            )
        if kept is not None and kept.signature == signature:
            with self._lock:
                self._vectors[key] = replace(kept, generation=generation)
            return kept.ids, kept.matrix, []
        e = t.recall_embeddings.c
        joined = t.recall_chunks.outerjoin(
            t.recall_embeddings,
            and_(e.provider == provider, e.model == model, e.content_hash == c.content_hash),
        )
        columns = (c.id, c.session_id, c.entry_id, c.content_hash, e.vector, e.dimensions)
        query = _scoped(select(*columns).select_from(joined), scope)
        cached: list[tuple[int, str, str, str]] = []
        stored: list[tuple[Any, Any]] = []
        missing: set[str] = set()
        with reading(self.database.reader) as connection:
            for row in connection.execute(query.order_by(c.id)):
                if row.vector is None:
                    missing.add(row.content_hash)
                else:
                    cached.append((row.id, row.session_id, row.entry_id, row.content_hash))
                    stored.append((row.vector, row.dimensions))
        decoded = decode_embeddings(stored, size)
        if decoded.damaged:
            damaged: dict[str, DamagedEmbedding] = {}
            for index, reason in decoded.damaged.items():
                _, session_id, entry_id, content_hash = cached[index]
                damaged.setdefault(
                    content_hash, DamagedEmbedding(content_hash, reason, session_id, entry_id)
                )
            self.damage.report(provider, model, list(damaged.values()))
            missing.update(damaged)
        id_array = np.asarray([cached[i][0] for i in decoded.kept], dtype=np.int64)
        matrix = _unit_rows(decoded.matrix)
        if missing:
            return id_array, matrix, self._texts(scope, sorted(missing))
        with self._lock:
            self._vectors[key] = _VectorSet(generation, signature, id_array, matrix)
            while len(self._vectors) > VECTOR_SETS or (
                len(self._vectors) > 1
                and sum(v.matrix.nbytes for v in self._vectors.values()) > VECTOR_BYTES
            ):
                self._vectors.popitem(last=False)
        return id_array, matrix, []

    def _texts(self, scope: RecallScope, hashes: Sequence[str]) -> list[tuple[str, str]]:
        """(content hash, text) of chunks in scope, one per hash."""
        c = t.recall_chunks.c
        found: dict[str, str] = {}
        with reading(self.database.reader) as connection:
            for start in range(0, len(hashes), 500):
                wanted = list(hashes[start : start + 500])
                query = _scoped(select(c.content_hash, c.text), scope)
                for content_hash, text_ in connection.execute(
                    query.where(c.content_hash.in_(wanted))
                ):
                    found.setdefault(content_hash, text_)
        return list(found.items())

    def cached_embeddings(
        self,
        provider: str,
        model: str,
        hashes: Sequence[str],
        session_id: str | None = None,
        size: int | None = None,
    ) -> dict[str, np.ndarray]:
        """The sound cached embeddings of these content hashes, of ``size`` dimensions
        when given; one damaged or of another size is left out (and logged, naming
        ``session_id``, the session asking), to be embedded again."""
        e = t.recall_embeddings.c
        query = select(e.content_hash, e.vector, e.dimensions).where(
            e.provider == provider, e.model == model, e.content_hash.in_(list(hashes))
        )
        with reading(self.database.reader) as connection:
            rows = [tuple(row) for row in connection.execute(query)]
        found: dict[str, np.ndarray] = {}
        damaged: list[DamagedEmbedding] = []
        for content_hash, vector, dimensions in rows:
            # One by one: without a size asked for, each stands alone.
            decoded = decode_embeddings([(vector, dimensions)], size)
            if decoded.kept:
                found[content_hash] = decoded.matrix[0]
            else:
                damaged.append(DamagedEmbedding(content_hash, decoded.damaged[0], session_id))
        if damaged:
            self.damage.report(provider, model, damaged)
        return found

    def store_embeddings(
        self, provider: str, model: str, vectors: Mapping[str, np.ndarray]
    ) -> None:
        """Caches embeddings by (provider, model, content hash). A row already there is
        replaced: it was read as missing, so it is damaged or of the model's former
        size (or another server stored the same vector meanwhile). Written in the
        hashes' order, so that two servers' writes lock their rows alike."""
        import numpy as np

        if not vectors:
            return
        now = int(time.time() * 1_000_000)
        rows = [
            {
                "provider": provider,
                "model": model,
                "content_hash": content_hash,
                "dimensions": int(vector.shape[0]),
                "vector": np.asarray(vector, dtype="<f4").tobytes(),
                "created_us": now,
            }
            for content_hash, vector in sorted(vectors.items())
        ]
        dialect: Any = postgresql if self.database.postgres else sqlite
        statement = dialect.insert(t.recall_embeddings)
        statement = statement.on_conflict_do_update(
            index_elements=["provider", "model", "content_hash"],
            set_={
                "dimensions": statement.excluded.dimensions,
                "vector": statement.excluded.vector,
                "created_us": statement.excluded.created_us,
            },
        )
        with self.database.writer.begin() as connection:
            connection.execute(statement, rows)
        self.damage.replaced(provider, model, list(vectors))


@dataclass(frozen=True)
class _VectorSet:
    generation: tuple[Any, ...]
    signature: tuple[Any, ...]
    ids: np.ndarray
    matrix: np.ndarray  # unit rows: a dot product is the cosine

    def holds(self, size: int | None) -> bool:
        """Whether the set answers a search for vectors of ``size`` dimensions."""
        return size is None or len(self.ids) == 0 or self.matrix.shape[1] == size


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    import numpy as np

    if matrix.size == 0:
        return matrix
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.asarray(matrix / np.where(norms == 0, 1.0, norms), dtype=np.float32)


def _scoped(query: Any, scope: RecallScope) -> Any:
    c = t.recall_chunks.c
    conditions: list[ColumnElement[bool]] = []
    if scope.tenant is not None:
        catalog = t.catalog.c
        sessions = select(catalog.session_id).where(
            catalog.tenant == scope.tenant, catalog.erased == 0
        )
        conditions.append(c.session_id.in_(sessions))
    else:
        conditions.append(c.session_id.in_(list(scope.session_ids)))
    for name, value in scope.labels.items():
        label = t.catalog_labels.c
        conditions.append(
            exists().where(
                and_(label.session_id == c.session_id, label.key == name, label.value == value)
            )
        )
    if scope.since_us is not None:
        conditions.append(c.recorded_us >= scope.since_us)
    if scope.until_us is not None:
        conditions.append(c.recorded_us < scope.until_us)
    return query.where(*conditions)
