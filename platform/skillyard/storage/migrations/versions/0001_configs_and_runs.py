"""Skill configs per role and the run log.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "skill_configs",
        sa.Column("role_id", sa.String(200), primary_key=True),
        sa.Column("skill", sa.String(200), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("secret", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        schema="skillyard",
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("skill", sa.String(200), nullable=False),
        sa.Column("role_id", sa.String(200), nullable=False, server_default=""),
        sa.Column("session_id", sa.String(200), nullable=False, server_default=""),
        sa.Column("ok", sa.Boolean, nullable=False),
        sa.Column("error_type", sa.String(50)),
        sa.Column("exception_type", sa.String(200)),
        sa.Column("timed_out", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        schema="skillyard",
    )
    op.create_index("runs_session_idx", "runs", ["session_id", "started_at"], schema="skillyard")


def downgrade() -> None:
    op.drop_table("runs", schema="skillyard")
    op.drop_table("skill_configs", schema="skillyard")
