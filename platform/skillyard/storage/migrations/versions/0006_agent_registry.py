"""Agents stored in the database (contract spec §1.1): agent_profile, skill_profile and their two bindings.

``skillyard agent import`` writes a folder agent into them (upsert by ``agent_code`` / ``skill_key``) and
``agent run --agent-code`` loads from them, reading only ``status = 'ACTIVE'`` profiles and ``enabled_flag = 1``
bindings, as the spec says. ``sort_order`` keeps the order of ``skills:`` and ``tools:`` (the fallback plan runs
the first skill).

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_profile",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("agent_code", sa.String(200), nullable=False, unique=True),
        sa.Column("agent_name", sa.Text, nullable=False, server_default=""),
        sa.Column("identity_desc", sa.Text, nullable=False, server_default=""),
        sa.Column("mission_desc", sa.Text, nullable=False, server_default=""),
        sa.Column("boundary_desc", sa.Text, nullable=False, server_default=""),
        sa.Column("style_desc", sa.Text, nullable=False, server_default=""),
        sa.Column("principle_desc", sa.Text, nullable=False, server_default=""),
        sa.Column("status", sa.String(20), nullable=False, server_default="ACTIVE"),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        schema="skillyard",
    )
    op.create_table(
        "skill_profile",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("skill_key", sa.String(200), nullable=False, unique=True),
        sa.Column("skill_name", sa.Text, nullable=False, server_default=""),
        sa.Column("semantic_desc", sa.Text, nullable=False, server_default=""),
        sa.Column("skill_manual", sa.Text, nullable=False, server_default=""),
        sa.Column("skill_contract", sa.Text, nullable=False, server_default=""),
        sa.Column("status", sa.String(20), nullable=False, server_default="ACTIVE"),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        schema="skillyard",
    )
    op.create_table(
        "agent_skill_binding",
        sa.Column(
            "agent_id", sa.BigInteger, sa.ForeignKey("skillyard.agent_profile.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column(
            "skill_id", sa.BigInteger, sa.ForeignKey("skillyard.skill_profile.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("enabled_flag", sa.SmallInteger, nullable=False, server_default="1"),
        sa.Column("sort_order", sa.Integer, nullable=False, server_default="0"),
        schema="skillyard",
    )
    op.create_table(
        "skill_tool_binding",
        sa.Column(
            "skill_id", sa.BigInteger, sa.ForeignKey("skillyard.skill_profile.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("tool_name", sa.String(200), primary_key=True),
        sa.Column("enabled_flag", sa.SmallInteger, nullable=False, server_default="1"),
        sa.Column("sort_order", sa.Integer, nullable=False, server_default="0"),
        schema="skillyard",
    )


def downgrade() -> None:
    for table in ("skill_tool_binding", "agent_skill_binding", "skill_profile", "agent_profile"):
        op.drop_table(table, schema="skillyard")
