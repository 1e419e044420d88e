"""Platform tables (schema ``skillyard``), described for queries; Alembic migrations create them."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Identity,
    Integer,
    MetaData,
    SmallInteger,
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

# Agents stored in the database (contract spec §1.1; docs/agents.md "Agents in the database").
agent_profile = Table(
    "agent_profile",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("agent_code", String(200), nullable=False, unique=True),
    Column("agent_name", Text, nullable=False, default=""),
    Column("identity_desc", Text, nullable=False, default=""),
    Column("mission_desc", Text, nullable=False, default=""),
    Column("boundary_desc", Text, nullable=False, default=""),
    Column("style_desc", Text, nullable=False, default=""),
    Column("principle_desc", Text, nullable=False, default=""),
    Column("status", String(20), nullable=False, default="ACTIVE"),
    Column("updated_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
)

skill_profile = Table(
    "skill_profile",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("skill_key", String(200), nullable=False, unique=True),
    Column("skill_name", Text, nullable=False, default=""),
    Column("semantic_desc", Text, nullable=False, default=""),
    Column("skill_manual", Text, nullable=False, default=""),
    Column("skill_contract", Text, nullable=False, default=""),  # the contract as JSON text (§16 rule 1)
    Column("status", String(20), nullable=False, default="ACTIVE"),
    Column("updated_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
)

agent_skill_binding = Table(
    "agent_skill_binding",
    metadata,
    Column("agent_id", BigInteger, ForeignKey("skillyard.agent_profile.id", ondelete="CASCADE"), primary_key=True),
    Column("skill_id", BigInteger, ForeignKey("skillyard.skill_profile.id", ondelete="CASCADE"), primary_key=True),
    Column("enabled_flag", SmallInteger, nullable=False, default=1),
    Column("sort_order", Integer, nullable=False, default=0),  # the order of AGENT.md skills:
)

skill_tool_binding = Table(
    "skill_tool_binding",
    metadata,
    Column("skill_id", BigInteger, ForeignKey("skillyard.skill_profile.id", ondelete="CASCADE"), primary_key=True),
    Column("tool_name", String(200), primary_key=True),
    Column("enabled_flag", SmallInteger, nullable=False, default=1),
    Column("sort_order", Integer, nullable=False, default=0),  # the order of SKILL.md tools:
)

# Delivery (docs/delivery.md): the web channel's messages, the web sessions of each organisation, pending replies.
web_messages = Table(
    "web_messages",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("org_id", String(200), nullable=False, default=""),
    Column("session_id", String(200), nullable=False),
    Column("text", Text, nullable=False, default=""),
    Column("format", String(20), nullable=False, default="text"),
    Column("files", JSONB, nullable=False, default=list),
    Column("created_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
)

web_sessions = Table(
    "web_sessions",
    metadata,
    Column("session_id", String(200), primary_key=True),
    Column("org_id", String(200), nullable=False),
    Column("created_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
)

pending_replies = Table(
    "pending_replies",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("channel", String(100), nullable=False),
    Column("recipient", String(300), nullable=False),
    Column("key", String(300), nullable=False),
    Column("chain", String(200)),
    Column("event", String(200)),
    Column("role_id", String(200), nullable=False, default=""),
    Column("org_id", String(200), nullable=False, default=""),
    Column("created_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("matched_at", DateTime(timezone=True)),
    Column("reply", Text),
    Column("outcome", Text),
)

# Access tokens (docs/mcp.md#tokens): who an MCP or HTTP caller is; only a hash of each token is kept.
api_tokens = Table(
    "api_tokens",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("role_id", String(200), nullable=False),
    Column("org_id", String(200), nullable=False),
    Column("is_admin", Boolean, nullable=False, default=False),
    Column("identity", JSONB, nullable=False, default=dict),
    Column("created_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
    Column("last_used_at", DateTime(timezone=True)),
)

# External events of the agent runtime (docs/agents.md "External events"): node waits and the events received.
agent_events = Table(
    "agent_events",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("org_id", String(200), nullable=False),
    Column("event", String(100), nullable=False),
    Column("key", String(200), nullable=False),
    Column("payload", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("claimed_at", DateTime(timezone=True)),
    Column("claimed_by", String(64)),
)

background_runs = Table(  # async skills' background runs by run id (§8): read back by whoever started them
    "background_runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("skill", String(200), nullable=False),
    Column("session_id", String(200), nullable=False),
    Column("status", String(20), nullable=False),  # running, succeeded, failed
    Column("envelope", JSONB),
    Column("created_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
)

agent_event_waits = Table(
    "agent_event_waits",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("org_id", String(200), nullable=False),
    Column("event", String(100), nullable=False),
    Column("key", String(200), nullable=False),
    Column("session_id", String(200), nullable=False),
    Column("task_id", String(64), nullable=False),
    Column("node_id", String(64), nullable=False),
    Column("status", String(20), nullable=False),
    Column("deadline", DateTime(timezone=True), nullable=False),
    Column("event_id", String(64)),
    Column("created_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
    Column("updated_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
)

# `skillyard serve` (docs/serve.md): what several serve processes on one database share (migration 0010).
service_sessions = Table(  # who owns a session: the identity that first used it
    "service_sessions",
    metadata,
    Column("session_id", String(200), primary_key=True),
    Column("owner", String(300), nullable=False),
    Column("org_id", String(200), nullable=False, default=""),
    Column("created_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
)

service_hook_events = Table(  # inbound webhook events seen: a platform's retry of one event is dropped
    "service_hook_events",
    metadata,
    Column("binding", String(100), primary_key=True),
    Column("event_id", String(300), primary_key=True),
    Column("message", JSONB),  # the message until its job read it (job arguments carry ids only)
    Column("received_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
)

service_rate_windows = Table(  # fixed-window rate-limit counters per token
    "service_rate_windows",
    metadata,
    Column("subject", String(300), primary_key=True),
    Column("window_start", BigInteger, primary_key=True),  # epoch seconds
    Column("used", Integer, nullable=False),
)

service_turn_events = Table(  # progress events of agent turns, streamed over SSE by any process
    "service_turn_events",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("session_id", String(200), nullable=False),
    Column("turn_id", String(64), nullable=False),
    Column("kind", String(30), nullable=False),
    Column("event", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
)

service_approvals = Table(  # who answered an agent's checkpoint through the service
    "service_approvals",
    metadata,
    Column("id", BigInteger, Identity(), primary_key=True),
    Column("session_id", String(200), nullable=False),
    Column("agent_code", String(200), nullable=False),
    Column("checkpoint", String(30), nullable=False),
    Column("action", String(20), nullable=False),
    Column("tool", String(200)),
    Column("approver", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), server_default=func.now(), nullable=False),
)
