"""Alembic migrations of the read models' tables (see services.adapters.migrate)."""
