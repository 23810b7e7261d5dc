"""Undos and redos in the compaction audit, which then rebuilds from zero.

The audit follows two more event types from this revision on; undos stored
before it were skipped, so its rows and position are dropped and the
projection writes them all again, undos included.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

COLUMNS = ("compaction_version", "restored_compaction_version", "undo_version")


def upgrade() -> None:
    schema = op.get_context().version_table_schema
    for name in COLUMNS:
        op.add_column(
            "compaction_audit",
            sa.Column(name, sa.BigInteger, nullable=False, server_default="0"),
            schema=schema,
        )
    op.add_column(
        "compaction_audit",
        sa.Column("requested_by", sa.Text, nullable=False, server_default=""),
        schema=schema,
    )
    audit = sa.table("compaction_audit", schema=schema)
    tracking = sa.table(
        "read_model_tracking", sa.column("name"), sa.column("position"), schema=schema
    )
    op.execute(sa.delete(audit))
    op.execute(sa.update(tracking).where(tracking.c.name == "compactions").values(position=0))


def downgrade() -> None:
    schema = op.get_context().version_table_schema
    with op.batch_alter_table("compaction_audit", schema=schema) as table:
        for name in (*COLUMNS, "requested_by"):
            table.drop_column(name)
