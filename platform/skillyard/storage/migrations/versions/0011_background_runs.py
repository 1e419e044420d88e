"""Background runs of async skills (§8) by run id: their status and, once done, their envelope, so that whoever
started one can ask for it from any process (``skillyard_run_status`` of the MCP server).

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

S = "skillyard"


def upgrade() -> None:
    op.create_table(
        "background_runs",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("skill", sa.String(200), nullable=False),
        sa.Column("session_id", sa.String(200), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("envelope", JSONB),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        schema=S,
    )
    op.create_index("background_runs_created", "background_runs", ["created_at"], schema=S)


def downgrade() -> None:
    op.drop_table("background_runs", schema=S)
