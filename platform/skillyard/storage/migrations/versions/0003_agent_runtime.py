"""The agent runtime's state: sessions, tasks, nodes (with their checkpoints) and evidence.

Each row keeps its state object as JSONB (agent/state.py round-trips it), next to the columns queries need: a
suspended node is found by session, an identical write by task and idempotency key.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_sessions",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("agent_code", sa.String(200), nullable=False),
        sa.Column("state", JSONB, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        schema="skillyard",
    )
    op.create_table(
        "agent_tasks",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("state", JSONB, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        schema="skillyard",
    )
    op.create_index("agent_tasks_session_idx", "agent_tasks", ["session_id"], schema="skillyard")
    op.create_table(
        "agent_nodes",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("task_id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("state", JSONB, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        schema="skillyard",
    )
    op.create_index("agent_nodes_task_idx", "agent_nodes", ["task_id"], schema="skillyard")
    op.create_table(
        "agent_evidence",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("task_id", sa.String(64), nullable=False),
        sa.Column("node_id", sa.String(64), nullable=False),
        sa.Column("tool", sa.String(200), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("idempotency_key", sa.String(200)),
        sa.Column("state", JSONB, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        schema="skillyard",
    )
    op.create_index("agent_evidence_task_idx", "agent_evidence", ["task_id", "idempotency_key"], schema="skillyard")


def downgrade() -> None:
    for table in ("agent_evidence", "agent_nodes", "agent_tasks", "agent_sessions"):
        op.drop_table(table, schema="skillyard")
