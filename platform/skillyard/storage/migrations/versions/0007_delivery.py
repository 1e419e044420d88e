"""Delivery (docs/delivery.md): the web channel's messages per session, which organisation each web session belongs
to, and the pending records of messages that wait for a reply (§9.2).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "web_messages",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("org_id", sa.String(200), nullable=False, server_default=""),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("text", sa.Text, nullable=False, server_default=""),
        sa.Column("format", sa.String(20), nullable=False, server_default="text"),
        sa.Column("files", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        schema="skillyard",
    )
    op.create_index("web_messages_session_idx", "web_messages", ["session_id", "id"], schema="skillyard")
    op.create_table(
        "web_sessions",
        sa.Column("session_id", sa.String(200), primary_key=True),
        sa.Column("org_id", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        schema="skillyard",
    )
    op.create_table(
        "pending_replies",
        sa.Column("id", sa.BigInteger, sa.Identity(), primary_key=True),
        sa.Column("channel", sa.String(100), nullable=False),
        sa.Column("recipient", sa.String(300), nullable=False),
        sa.Column("key", sa.String(300), nullable=False),
        sa.Column("chain", sa.String(200)),
        sa.Column("event", sa.String(200)),
        sa.Column("role_id", sa.String(200), nullable=False, server_default=""),
        sa.Column("org_id", sa.String(200), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("matched_at", sa.DateTime(timezone=True)),
        sa.Column("reply", sa.Text),
        sa.Column("outcome", sa.Text),
        schema="skillyard",
    )
    op.create_index(
        "pending_replies_open_idx",
        "pending_replies",
        ["channel", "recipient", "created_at"],
        schema="skillyard",
        postgresql_where=sa.text("matched_at IS NULL"),
    )
    op.create_index("pending_replies_expiry_idx", "pending_replies", ["expires_at"], schema="skillyard")


def downgrade() -> None:
    op.drop_table("pending_replies", schema="skillyard")
    op.drop_table("web_sessions", schema="skillyard")
    op.drop_table("web_messages", schema="skillyard")
