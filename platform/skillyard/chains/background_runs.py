"""What became of each background run (§8), by run id, in PostgreSQL: ``running`` from the moment it is accepted,
then ``succeeded`` or ``failed`` with its envelope, whichever process ran its job (the accepting one, or a worker
that recovered it). A client that pulls results (the MCP server's ``skillyard_run_status``) reads it from any
process; chat channels get theirs pushed as before. Rows older than :data:`KEEP_DAYS` are dropped as new runs come.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, insert, select, update

from ..storage.tables import background_runs

if TYPE_CHECKING:
    from ..yard import SkillYard

KEEP_DAYS = 7
RUNNING = "running"


@dataclass(frozen=True)
class BackgroundRun:
    run_id: str
    skill: str
    session_id: str
    status: str
    envelope: dict[str, Any] | None
    created_at: dt.datetime
    finished_at: dt.datetime | None


async def started(yard: SkillYard, run_id: str, skill: str, session_id: str) -> None:
    sessions = await yard.database.session_factory()
    async with sessions() as session, session.begin():
        cutoff = dt.datetime.now(dt.UTC) - dt.timedelta(days=KEEP_DAYS)
        await session.execute(delete(background_runs).where(background_runs.c.created_at < cutoff))
        await session.execute(
            insert(background_runs).values(run_id=run_id, skill=skill, session_id=session_id, status=RUNNING)
        )


async def finished(yard: SkillYard, run_id: str, envelope: dict[str, Any]) -> None:
    status = "succeeded" if envelope.get("ok", envelope.get("success")) else "failed"
    stored = json.loads(json.dumps(envelope, default=str))  # JSON as the client will read it (paths, dates as text)
    sessions = await yard.database.session_factory()
    async with sessions() as session, session.begin():
        await session.execute(
            update(background_runs)
            .where(background_runs.c.run_id == run_id)
            .values(status=status, envelope=stored, finished_at=func.now())
        )


async def read(yard: SkillYard, run_id: str) -> BackgroundRun | None:
    sessions = await yard.database.session_factory()
    async with sessions() as session:
        row = (await session.execute(select(background_runs).where(background_runs.c.run_id == run_id))).first()
    if row is None:
        return None
    return BackgroundRun(
        row.run_id, row.skill, row.session_id, row.status, row.envelope, row.created_at, row.finished_at
    )
