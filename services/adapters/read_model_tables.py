"""The read models' tables, as SQLAlchemy Core metadata.

Times are microseconds since the epoch (UTC) in BIGINT columns: SQLite has
no time type, and integers sort and compare the same on both databases. The
tables are created by the Alembic migrations, never from this metadata, so
that a schema change is always a migration; the indexes are named here (and the
full-text side of the recall index below) so that a store missing one is told
(services.adapters.read_model_repair).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()

tracking = Table(
    "read_model_tracking",
    metadata,
    Column("name", String(64), primary_key=True),
    # The last notification id this read model applied.
    Column("position", BigInteger, nullable=False),
)

catalog = Table(
    "session_catalog",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("title", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("parent_session_id", Text, nullable=False),
    Column("created_us", BigInteger, nullable=False),
    Column("updated_us", BigInteger, nullable=False),
    # Notification ids of the session's first and latest events: stable sort keys.
    Column("created_position", BigInteger, nullable=False),
    Column("updated_position", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("entries", BigInteger, nullable=False),
    Column("tokens", BigInteger, nullable=False),
    Column("compactions", BigInteger, nullable=False),
    Column("prunes", BigInteger, nullable=False),
    Column("erased", Integer, nullable=False),
    Column("tenant", String(128), nullable=False),
)
Index("session_catalog_created", catalog.c.created_position)
Index("session_catalog_updated", catalog.c.updated_position)
Index("session_catalog_tenant", catalog.c.tenant, catalog.c.created_position)

catalog_labels = Table(
    "session_catalog_labels",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
)
Index("session_catalog_labels_kv", catalog_labels.c.key, catalog_labels.c.value)

compactions = Table(
    "compaction_audit",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("version", BigInteger, primary_key=True),
    Column("position", BigInteger, nullable=False),
    Column("recorded_us", BigInteger, nullable=False),
    Column("trigger", Text, nullable=False),
    Column("outcome", String(16), nullable=False),
    Column("stage", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("summarizer_model", Text, nullable=False),
    Column("first_kept_entry_id", Text, nullable=False),
    Column("first_kept_position", BigInteger, nullable=False),
    Column("first_covered_entry_id", Text, nullable=False),
    Column("last_covered_entry_id", Text, nullable=False),
    Column("entries_covered", BigInteger, nullable=False),
    Column("tokens_before", BigInteger, nullable=False),
    Column("tokens_after", BigInteger, nullable=False),
    Column("tokens_before_source", Text, nullable=False),
    Column("tokens_after_source", Text, nullable=False),
    Column("summary_tokens", BigInteger, nullable=False),
    Column("prompt_hash", Text, nullable=False),
    Column("chunks", BigInteger, nullable=False),
    Column("fallback_stage", Text, nullable=False),
    Column("attempt", BigInteger, nullable=False),
    Column("duration_ms", BigInteger, nullable=False),
    Column("engine", Text, nullable=False),
    Column("instructions", Text, nullable=False),
    Column("compaction_version", BigInteger, nullable=False),
    Column("restored_compaction_version", BigInteger, nullable=False),
    Column("undo_version", BigInteger, nullable=False),
    Column("requested_by", Text, nullable=False),
)
Index("compaction_audit_time", compactions.c.recorded_us)

prunes = Table(
    "prune_audit",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("version", BigInteger, primary_key=True),
    Column("entry_id", Text, primary_key=True),
    Column("position", BigInteger, nullable=False),
    Column("recorded_us", BigInteger, nullable=False),
    Column("action", String(32), nullable=False),
    Column("head_chars", BigInteger),
    Column("tail_chars", BigInteger),
    Column("chars_before", BigInteger),
    Column("chars_after", BigInteger),
    Column("reason", Text, nullable=False),
)
Index("prune_audit_time", prunes.c.recorded_us)

quarantine = Table(
    "read_model_quarantine",
    metadata,
    # An event a read model could not apply: skipped, so the model went on, and
    # kept here until `sessionstore readmodels retry` applies it.
    Column("model", String(64), primary_key=True),
    Column("position", BigInteger, primary_key=True),
    Column("session_id", Text, nullable=False),
    Column("topic", Text, nullable=False),
    Column("error", Text, nullable=False),
    Column("recorded_us", BigInteger, nullable=False),
    Column("attempts", Integer, nullable=False),
)

# The recall index (services.adapters.recall_index). Its full-text side is not
# here: an FTS5 table on SQLite, a generated tsvector column on PostgreSQL.
recall_chunks = Table(
    "recall_chunks",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True),
    Column("session_id", Text, nullable=False),
    Column("entry_id", Text, nullable=False),
    Column("chunk", Integer, nullable=False),
    Column("entry_position", BigInteger, nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("position", BigInteger, nullable=False),
    Column("recorded_us", BigInteger, nullable=False),
    Column("role", String(16), nullable=False),
    Column("text", Text, nullable=False),
    Column("content_hash", String(64), nullable=False),
)
Index("recall_chunks_entry", recall_chunks.c.session_id, recall_chunks.c.entry_id)
Index("recall_chunks_hash", recall_chunks.c.content_hash)

recall_sessions = Table(
    "recall_sessions",
    metadata,
    Column("session_id", Text, primary_key=True),
    Column("entries", BigInteger, nullable=False),
)

recall_embeddings = Table(
    "recall_embeddings",
    metadata,
    Column("provider", Text, primary_key=True),
    Column("model", Text, primary_key=True),
    Column("content_hash", String(64), primary_key=True),
    Column("dimensions", Integer, nullable=False),
    Column("vector", LargeBinary, nullable=False),
    Column("created_us", BigInteger, nullable=False),
)
Index("recall_embeddings_hash", recall_embeddings.c.content_hash)

# The tables of each read model, by its name: those its writer writes (ReadModel.
# tables), that a rebuild empties, and that are made again together when one of
# them (or an index of theirs) was dropped (services.adapters.read_model_repair).
MODEL_TABLES: dict[str, tuple[Table, ...]] = {
    "catalog": (catalog_labels, catalog),
    "compactions": (compactions,),
    "prunes": (prunes,),
    "recall": (recall_chunks, recall_sessions),
}
# What every model's rows go with: their positions, and the events they skipped.
SHARED_TABLES = (tracking, quarantine)
# Filled as they are used, from nothing.
CACHE_TABLES = (recall_embeddings,)

# The recall index's full-text side, which migration 0006 makes in SQL of each
# database's own: on SQLite an FTS5 table over recall_chunks, kept in step by two
# triggers on it; on PostgreSQL a GIN index on recall_chunks' generated tsvector.
SQLITE_FULL_TEXT_TABLE = "recall_fts"
SQLITE_FULL_TEXT_TRIGGERS = ("recall_chunks_ai", "recall_chunks_ad")
POSTGRES_FULL_TEXT_INDEX = "recall_chunks_search"
