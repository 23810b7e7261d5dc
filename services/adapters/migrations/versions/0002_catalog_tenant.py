"""The tenant of each session in the catalog, so that listings show a caller its own.

Sessions catalogued before tenants existed belong to the default tenant, as
their Started events say when read again.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema = op.get_context().version_table_schema
    op.add_column(
        "session_catalog",
        sa.Column("tenant", sa.String(128), nullable=False, server_default="default"),
        schema=schema,
    )
    op.create_index(
        "session_catalog_tenant",
        "session_catalog",
        ["tenant", "created_position"],
        schema=schema,
    )


def downgrade() -> None:
    schema = op.get_context().version_table_schema
    op.drop_index("session_catalog_tenant", "session_catalog", schema=schema)
    op.drop_column("session_catalog", "tenant", schema=schema)
