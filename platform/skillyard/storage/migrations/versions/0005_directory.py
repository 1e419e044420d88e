"""The identity directory: departments, people and channel accounts per organisation, and a version per org.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "directory_orgs",
        sa.Column("org_id", sa.String(200), primary_key=True),
        sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        schema="skillyard",
    )
    op.create_table(
        "directory_departments",
        sa.Column("org_id", sa.String(200), primary_key=True),
        sa.Column("dept_id", sa.String(200), primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("parent_id", sa.String(200), nullable=False, server_default=""),
        sa.Column("disabled", sa.Boolean, nullable=False, server_default=sa.false()),
        schema="skillyard",
    )
    op.create_table(
        "directory_people",
        sa.Column("org_id", sa.String(200), primary_key=True),
        sa.Column("emp_no", sa.String(200), primary_key=True),
        sa.Column("name", sa.Text, nullable=False, server_default=""),
        sa.Column("department", sa.String(200), nullable=False, server_default=""),
        sa.Column("position", sa.Text, nullable=False, server_default=""),
        sa.Column("title", sa.Text, nullable=False, server_default=""),
        sa.Column("phone", sa.Text, nullable=False, server_default=""),
        sa.Column("email", sa.Text, nullable=False, server_default=""),
        sa.Column("tags", JSONB, nullable=False, server_default=sa.text("'[]'::jsonb")),
        sa.Column("actor_key", sa.String(200), nullable=False, server_default=""),
        sa.Column("actor_id", sa.String(200), nullable=False, server_default=""),
        sa.Column("active", sa.Boolean, nullable=False, server_default=sa.true()),
        schema="skillyard",
    )
    op.create_index("directory_people_actor_key_idx", "directory_people", ["org_id", "actor_key"], schema="skillyard")
    op.create_table(
        "directory_accounts",
        sa.Column("org_id", sa.String(200), primary_key=True),
        sa.Column("channel", sa.String(100), primary_key=True),
        sa.Column("account", sa.String(300), primary_key=True),
        sa.Column("emp_no", sa.String(200), nullable=False),
        schema="skillyard",
    )


def downgrade() -> None:
    for table in ("directory_accounts", "directory_people", "directory_departments", "directory_orgs"):
        op.drop_table(table, schema="skillyard")
