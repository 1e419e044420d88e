"""Session attachments: uploads and artifacts, with stable per-session reference ids.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "attachments",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("ref", sa.String(50), nullable=False),
        sa.Column("type", sa.String(20), nullable=False),
        sa.Column("filename", sa.Text, nullable=False, server_default=""),
        sa.Column("local_path", sa.Text),
        sa.Column("url", sa.Text),
        sa.Column("size", sa.BigInteger),
        sa.Column("sha256", sa.String(64)),
        sa.Column("skill", sa.String(200), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.UniqueConstraint("session_id", "ref", name="attachments_session_ref_key"),
        schema="skillyard",
    )
    op.create_index("attachments_session_idx", "attachments", ["session_id", "id"], schema="skillyard")


def downgrade() -> None:
    op.drop_table("attachments", schema="skillyard")
