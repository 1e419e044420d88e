"""External events of the agent runtime (docs/agents.md "External events"): the waits of suspended nodes and the
events received, kept for a later wait when nobody waits for them yet.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_events",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("org_id", sa.String(200), nullable=False),
        sa.Column("event", sa.String(100), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("payload", JSONB, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True)),
        sa.Column("claimed_by", sa.String(64)),
        schema="skillyard",
    )
    op.create_index(
        "agent_events_open",
        "agent_events",
        ["org_id", "event", "key", "created_at"],
        schema="skillyard",
        postgresql_where=sa.text("claimed_at IS NULL"),
    )
    op.create_table(
        "agent_event_waits",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("org_id", sa.String(200), nullable=False),
        sa.Column("event", sa.String(100), nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("task_id", sa.String(64), nullable=False),
        sa.Column("node_id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("event_id", sa.String(64)),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        schema="skillyard",
    )
    op.create_index(
        "agent_event_waits_waiting",
        "agent_event_waits",
        ["org_id", "event", "key"],
        schema="skillyard",
        postgresql_where=sa.text("status = 'WAITING'"),
    )


def downgrade() -> None:
    op.drop_table("agent_event_waits", schema="skillyard")
    op.drop_table("agent_events", schema="skillyard")
