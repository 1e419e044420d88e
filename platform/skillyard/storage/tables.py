"""Platform tables (schema ``skillyard``), described for queries; Alembic migrations create them."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    MetaData,
    String,
    Table,
    Text,
    func,
)

SCHEMA = "skillyard"
metadata = MetaData(schema=SCHEMA)

skill_configs = Table(
    "skill_configs",
    metadata,
    Column("role_id", String(200), primary_key=True),
    Column("skill", String(200), primary_key=True),
    Column("key", String(200), primary_key=True),
    Column("value", Text, nullable=False),
    Column("secret", Boolean, nullable=False, default=False),
    Column("updated_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("skill", String(200), nullable=False),
    Column("role_id", String(200), nullable=False, default=""),
    Column("session_id", String(200), nullable=False, default=""),
    Column("ok", Boolean, nullable=False),
    Column("error_type", String(50)),
    Column("exception_type", String(200)),
    Column("timed_out", Boolean, nullable=False, default=False),
    Column("duration_ms", Float, nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
)

attachments = Table(
    "attachments",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("session_id", String(200), nullable=False),
    Column("ref", String(50), nullable=False),
    Column("type", String(20), nullable=False),
    Column("filename", Text, nullable=False, default=""),
    Column("local_path", Text),
    Column("url", Text),
    Column("size", BigInteger),
    Column("sha256", String(64)),
    Column("skill", String(200), nullable=False, default=""),
    Column("created_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
)
