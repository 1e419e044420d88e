"""`skillyard serve` (docs/serve.md): session owners, inbound events seen, rate-limit windows, turn progress events
and the approvers of checkpoints, all in PostgreSQL so that several serve processes share them.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

S = "skillyard"


def _now() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False)


def upgrade() -> None:
    op.create_table(
        "service_sessions",
        sa.Column("session_id", sa.String(200), primary_key=True),
        sa.Column("owner", sa.String(300), nullable=False),
        sa.Column("org_id", sa.String(200), nullable=False, server_default=""),
        _now(),
        schema=S,
    )
    op.create_table(
        "service_hook_events",
        sa.Column("binding", sa.String(100), primary_key=True),
        sa.Column("event_id", sa.String(300), primary_key=True),
        sa.Column("message", JSONB),
        sa.Column("received_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        schema=S,
    )
    op.create_index("service_hook_events_received", "service_hook_events", ["received_at"], schema=S)
    op.create_table(
        "service_rate_windows",
        sa.Column("subject", sa.String(300), primary_key=True),
        sa.Column("window_start", sa.BigInteger, primary_key=True),
        sa.Column("used", sa.Integer, nullable=False),
        schema=S,
    )
    op.create_table(
        "service_turn_events",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("turn_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(30), nullable=False),
        sa.Column("event", JSONB, nullable=False),
        _now(),
        schema=S,
    )
    op.create_index("service_turn_events_session", "service_turn_events", ["session_id", "id"], schema=S)
    op.create_table(
        "service_approvals",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("agent_code", sa.String(200), nullable=False),
        sa.Column("checkpoint", sa.String(30), nullable=False),
        sa.Column("action", sa.String(20), nullable=False),
        sa.Column("tool", sa.String(200)),
        sa.Column("approver", JSONB, nullable=False),
        _now(),
        schema=S,
    )
    op.create_index("service_approvals_session", "service_approvals", ["session_id"], schema=S)


def downgrade() -> None:
    for table in ("service_approvals", "service_turn_events", "service_rate_windows", "service_hook_events"):
        op.drop_table(table, schema=S)
    op.drop_table("service_sessions", schema=S)
