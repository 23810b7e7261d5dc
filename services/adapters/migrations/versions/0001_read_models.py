"""Session catalog, compaction and prune audits, and their tracking positions.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _schema() -> str | None:
    return op.get_context().version_table_schema


def upgrade() -> None:
    schema = _schema()
    big, text = sa.BigInteger, sa.Text
    op.create_table(
        "read_model_tracking",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("position", big, nullable=False),
        schema=schema,
    )
    op.create_table(
        "session_catalog",
        sa.Column("session_id", sa.String(128), primary_key=True),
        sa.Column("title", text, nullable=False),
        sa.Column("model", text, nullable=False),
        sa.Column("parent_session_id", sa.String(128), nullable=False),
        *(
            sa.Column(name, big, nullable=False)
            for name in (
                "created_us",
                "updated_us",
                "created_position",
                "updated_position",
                "version",
                "entries",
                "tokens",
                "compactions",
                "prunes",
            )
        ),
        sa.Column("erased", sa.Integer, nullable=False),
        schema=schema,
    )
    op.create_index(
        "session_catalog_created", "session_catalog", ["created_position"], schema=schema
    )
    op.create_index(
        "session_catalog_updated", "session_catalog", ["updated_position"], schema=schema
    )
    op.create_table(
        "session_catalog_labels",
        sa.Column("session_id", sa.String(128), primary_key=True),
        sa.Column("key", text, primary_key=True),
        sa.Column("value", text, nullable=False),
        schema=schema,
    )
    op.create_index(
        "session_catalog_labels_kv", "session_catalog_labels", ["key", "value"], schema=schema
    )
    op.create_table(
        "compaction_audit",
        sa.Column("session_id", sa.String(128), primary_key=True),
        sa.Column("version", big, primary_key=True),
        sa.Column("position", big, nullable=False),
        sa.Column("recorded_us", big, nullable=False),
        sa.Column("trigger", text, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        *(
            sa.Column(name, text, nullable=False)
            for name in ("stage", "reason", "summarizer_model", "first_kept_entry_id")
        ),
        sa.Column("first_kept_position", big, nullable=False),
        sa.Column("first_covered_entry_id", text, nullable=False),
        sa.Column("last_covered_entry_id", text, nullable=False),
        sa.Column("entries_covered", big, nullable=False),
        sa.Column("tokens_before", big, nullable=False),
        sa.Column("tokens_after", big, nullable=False),
        sa.Column("tokens_before_source", text, nullable=False),
        sa.Column("tokens_after_source", text, nullable=False),
        sa.Column("summary_tokens", big, nullable=False),
        sa.Column("prompt_hash", text, nullable=False),
        sa.Column("chunks", big, nullable=False),
        sa.Column("fallback_stage", text, nullable=False),
        sa.Column("attempt", big, nullable=False),
        sa.Column("duration_ms", big, nullable=False),
        sa.Column("engine", text, nullable=False),
        sa.Column("instructions", text, nullable=False),
        schema=schema,
    )
    op.create_index("compaction_audit_time", "compaction_audit", ["recorded_us"], schema=schema)
    op.create_table(
        "prune_audit",
        sa.Column("session_id", sa.String(128), primary_key=True),
        sa.Column("version", big, primary_key=True),
        sa.Column("entry_id", text, primary_key=True),
        sa.Column("position", big, nullable=False),
        sa.Column("recorded_us", big, nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("head_chars", big),
        sa.Column("tail_chars", big),
        sa.Column("chars_before", big),
        sa.Column("chars_after", big),
        sa.Column("reason", text, nullable=False),
        schema=schema,
    )
    op.create_index("prune_audit_time", "prune_audit", ["recorded_us"], schema=schema)


def downgrade() -> None:
    schema = _schema()
    for table in (
        "prune_audit",
        "compaction_audit",
        "session_catalog_labels",
        "session_catalog",
        "read_model_tracking",
    ):
        op.drop_table(table, schema=schema)
