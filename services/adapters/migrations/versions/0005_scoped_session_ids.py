"""Session ids up to 128 characters scoped by a tenant of up to 64: longer keys.

Other tenants' sessions are stored as ``tenant/id`` (domain.session.stream_id),
up to 193 characters, beyond the VARCHAR(128) of the first revisions. SQLite
does not enforce lengths, so only PostgreSQL's columns change.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

COLUMNS = (
    ("session_catalog", "session_id"),
    ("session_catalog", "parent_session_id"),
    ("session_catalog_labels", "session_id"),
    ("compaction_audit", "session_id"),
    ("prune_audit", "session_id"),
)


def upgrade() -> None:
    _retype(sa.Text())


def downgrade() -> None:
    _retype(sa.String(128))


def _retype(kind: sa.types.TypeEngine[str]) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    schema = op.get_context().version_table_schema
    for table, column in COLUMNS:
        op.alter_column(table, column, type_=kind, schema=schema)
