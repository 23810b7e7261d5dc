"""A table of the events each read model could not apply, so one event stops nothing.

A database whose projection was stuck on such an event (a NUL in a model name
on PostgreSQL, say) moves on by itself after this revision: the event is
quarantined here and the model continues after it.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema = op.get_context().version_table_schema
    op.create_table(
        "read_model_quarantine",
        sa.Column("model", sa.String(64), primary_key=True),
        sa.Column("position", sa.BigInteger, primary_key=True),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("topic", sa.Text, nullable=False),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("recorded_us", sa.BigInteger, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        schema=schema,
    )


def downgrade() -> None:
    op.drop_table("read_model_quarantine", schema=op.get_context().version_table_schema)
