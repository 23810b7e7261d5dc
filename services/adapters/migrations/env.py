"""Alembic's entry point: runs on the connection that services.adapters.migrate
opened and locked, in the schema it names."""

from __future__ import annotations

from alembic import context

from services.adapters.read_model_db import VERSION_TABLE

connection = context.config.attributes["connection"]
schema = context.config.attributes.get("schema")
context.configure(
    connection=connection,
    version_table=VERSION_TABLE,
    version_table_schema=schema,
)
with context.begin_transaction():
    context.run_migrations()
