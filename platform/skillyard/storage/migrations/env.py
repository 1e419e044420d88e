"""Alembic environment: always online, on the connection the host hands over, schema ``skillyard``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

from skillyard.storage.tables import SCHEMA, metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("skillyard runs its migrations itself when the database is first opened")

# Two processes opening a fresh database at once must not both create the schema.
connection.execute(text("SELECT pg_advisory_xact_lock(7250001)"))
connection.execute(text(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"))
context.configure(connection=connection, target_metadata=metadata, version_table_schema=SCHEMA)
with context.begin_transaction():
    context.run_migrations()
