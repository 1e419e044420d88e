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
from sqlalchemy.dialects.postgresql import JSONB

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

# The identity directory (docs/identity.md): people, departments and channel accounts per organisation.
directory_orgs = Table(
    "directory_orgs",
    metadata,
    Column("org_id", String(200), primary_key=True),
    Column("version", BigInteger, nullable=False, default=0),  # bumped by every import: caches reload
    Column("updated_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
)

directory_departments = Table(
    "directory_departments",
    metadata,
    Column("org_id", String(200), primary_key=True),
    Column("dept_id", String(200), primary_key=True),
    Column("name", Text, nullable=False),
    Column("parent_id", String(200), nullable=False, default=""),
    Column("disabled", Boolean, nullable=False, default=False),
)

directory_people = Table(
    "directory_people",
    metadata,
    Column("org_id", String(200), primary_key=True),
    Column("emp_no", String(200), primary_key=True),
    Column("name", Text, nullable=False, default=""),
    Column("department", String(200), nullable=False, default=""),
    Column("position", Text, nullable=False, default=""),
    Column("title", Text, nullable=False, default=""),
    Column("phone", Text, nullable=False, default=""),
    Column("email", Text, nullable=False, default=""),
    Column("tags", JSONB, nullable=False, default=list),
    Column("actor_key", String(200), nullable=False, default=""),
    Column("actor_id", String(200), nullable=False, default=""),
    Column("active", Boolean, nullable=False, default=True),
)

directory_accounts = Table(
    "directory_accounts",
    metadata,
    Column("org_id", String(200), primary_key=True),
    Column("channel", String(100), primary_key=True),
    Column("account", String(300), primary_key=True),
    Column("emp_no", String(200), nullable=False),
)
