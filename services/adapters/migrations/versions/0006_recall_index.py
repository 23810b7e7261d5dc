"""The recall index: every entry's text in chunks, searchable by full text, and
the embeddings of chunks cached by (provider, model, content hash).

Full text is SQLite's FTS5 (an external-content table kept in step by
triggers) on SQLite and a generated tsvector with a GIN index on PostgreSQL.
Both use language-neutral tokenizers (unicode61, the 'simple' configuration):
sessions mix languages, identifiers and code, which stemming would mangle.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema = op.get_context().version_table_schema
    postgres = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "recall_chunks",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("entry_id", sa.Text, nullable=False),
        sa.Column("chunk", sa.Integer, nullable=False),
        sa.Column("entry_position", sa.BigInteger, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("recorded_us", sa.BigInteger, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("content_hash", sa.String(64), nullable=False),
        schema=schema,
    )
    op.create_index(
        "recall_chunks_entry", "recall_chunks", ["session_id", "entry_id"], schema=schema
    )
    op.create_index("recall_chunks_hash", "recall_chunks", ["content_hash"], schema=schema)
    op.create_table(
        "recall_sessions",
        sa.Column("session_id", sa.Text, primary_key=True),
        # Entries the session's history holds so far (the next one's position).
        sa.Column("entries", sa.BigInteger, nullable=False),
        schema=schema,
    )
    op.create_table(
        "recall_embeddings",
        sa.Column("provider", sa.Text, primary_key=True),
        sa.Column("model", sa.Text, primary_key=True),
        sa.Column("content_hash", sa.String(64), primary_key=True),
        sa.Column("dimensions", sa.Integer, nullable=False),
        # float32, little-endian.
        sa.Column("vector", sa.LargeBinary, nullable=False),
        sa.Column("created_us", sa.BigInteger, nullable=False),
        schema=schema,
    )
    op.create_index("recall_embeddings_hash", "recall_embeddings", ["content_hash"], schema=schema)
    if postgres:
        table = f'"{schema}".recall_chunks' if schema else "recall_chunks"
        op.execute(
            f"ALTER TABLE {table} ADD COLUMN search tsvector "
            # Words only, as FTS5's unicode61 splits them: the default parser would
            # keep "secret/zebra-7731" whole, as a path, where a search asks for "zebra".
            "GENERATED ALWAYS AS (to_tsvector('simple', regexp_replace(text, '\\W+', ' ', 'g'))) "
            "STORED"
        )
        # No pending list (fastupdate): the projection pays for each chunk's terms as
        # it writes them, and no search scans thousands of unmerged rows.
        op.execute(
            f"CREATE INDEX recall_chunks_search ON {table} USING GIN (search) "
            "WITH (fastupdate = off)"
        )
        return
    op.execute(
        "CREATE VIRTUAL TABLE recall_fts USING fts5("
        "text, content='recall_chunks', content_rowid='id', tokenize='unicode61')"
    )
    op.execute(
        "CREATE TRIGGER recall_chunks_ai AFTER INSERT ON recall_chunks BEGIN "
        "INSERT INTO recall_fts(rowid, text) VALUES (new.id, new.text); END"
    )
    op.execute(
        "CREATE TRIGGER recall_chunks_ad AFTER DELETE ON recall_chunks BEGIN "
        "INSERT INTO recall_fts(recall_fts, rowid, text) VALUES ('delete', old.id, old.text); END"
    )


def downgrade() -> None:
    schema = op.get_context().version_table_schema
    if op.get_bind().dialect.name != "postgresql":
        op.execute("DROP TABLE recall_fts")
    for table in ("recall_embeddings", "recall_sessions", "recall_chunks"):
        op.drop_table(table, schema=schema)
