"""Chains and the job queue: procrastinate's own schema (in schema ``procrastinate``) and the chain tables.

procrastinate's schema is its published ``schema.sql`` for the pinned release (pyproject pins procrastinate to one
minor version; a release that changes the schema comes with a migration of ours applying its migration files).
Chain runs and steps keep their status, attempts and scrubbed envelopes; schedules and their claimed ticks make a
tick start one run however many workers evaluate it.

Revision ID: 0004
Revises: 0003
"""

import pglast
import sqlalchemy as sa
from alembic import op
from procrastinate.schema import SchemaManager
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

QUEUE_SCHEMA = "procrastinate"


def _queue_schema() -> None:
    bind = op.get_bind()
    bind.exec_driver_sql(f"CREATE SCHEMA IF NOT EXISTS {QUEUE_SCHEMA}")
    previous = bind.exec_driver_sql("SELECT current_setting('search_path')").scalar_one()
    bind.exec_driver_sql(f"SELECT set_config('search_path', '{QUEUE_SCHEMA}', true)")
    for statement in pglast.split(SchemaManager.get_schema()):
        bind.exec_driver_sql(statement)
    bind.execute(sa.text("SELECT set_config('search_path', :p, true)"), {"p": previous})


def _now() -> sa.TextClause:
    return sa.text("now()")


def upgrade() -> None:
    _queue_schema()
    op.create_table(
        "chains",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("definition", JSONB, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False),
        schema="skillyard",
    )
    op.create_table(
        "chain_runs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("chain", sa.String(200), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("definition", JSONB, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("trigger", JSONB, nullable=False),
        sa.Column("queue", sa.String(200), nullable=False),
        sa.Column("schedule_id", sa.String(64)),
        sa.Column("error", sa.Text),
        sa.Column("deadline", sa.DateTime(timezone=True)),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        schema="skillyard",
    )
    op.create_index("chain_runs_chain_idx", "chain_runs", ["chain", "created_at"], schema="skillyard")
    op.create_index("chain_runs_schedule_idx", "chain_runs", ["schedule_id", "status"], schema="skillyard")
    op.create_table(
        "chain_steps",
        sa.Column(
            "run_id", sa.String(64), sa.ForeignKey("skillyard.chain_runs.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("step_id", sa.String(200), primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("skill", sa.String(200), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("job_id", sa.BigInteger),
        sa.Column("envelope", JSONB),
        sa.Column("error", sa.Text),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        schema="skillyard",
    )
    op.create_table(
        "chain_schedules",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("chain", sa.String(200), nullable=False),
        sa.Column("cron", sa.String(200), nullable=False),
        sa.Column("tz", sa.String(100), nullable=False),
        sa.Column("input", JSONB, nullable=False),
        sa.Column("overlap", sa.String(10), nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False),
        sa.Column("last_tick_at", sa.DateTime(timezone=True)),
        schema="skillyard",
    )
    op.create_table(
        "chain_ticks",
        sa.Column(
            "schedule_id",
            sa.String(64),
            sa.ForeignKey("skillyard.chain_schedules.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("tick_at", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("run_id", sa.String(64)),
        sa.Column("claimed_at", sa.DateTime(timezone=True), server_default=_now(), nullable=False),
        schema="skillyard",
    )


def downgrade() -> None:
    for table in ("chain_ticks", "chain_schedules", "chain_steps", "chain_runs", "chains"):
        op.drop_table(table, schema="skillyard")
    op.execute(f"DROP SCHEMA IF EXISTS {QUEUE_SCHEMA} CASCADE")
