"""``/api/skills``, ``/api/rescan``, ``/api/runs`` and a session's artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from ...catalog.describe import describe_entry, describe_skill
from ...errors import SkillyardError, UnknownSkill
from ...storage.tables import runs, service_sessions
from ..errors import ApiError, bad_request, not_found
from ..sessions import default_session
from .deps import CallerDep, service_of

router = APIRouter(prefix="/api", tags=["skills"])
#: A skill run through the API is on this channel: a program, not a chat front end.
CHANNEL = "api"


class RunBody(BaseModel):
    """What ``POST /api/skills/{name}/run`` takes; the identity comes from the token, never from here."""

    model_config = ConfigDict(extra="forbid")
    input: dict[str, Any] = Field(default_factory=dict, description="The skill's input (a JSON object).")
    session: str | None = Field(default=None, description="Session id: its workspace and attachments.")
    raw_input: str | None = Field(default=None, description="The user's own words, for skills that read them.")


def _entry(request: Request, name: str) -> Any:
    yard = service_of(request).yard
    found = yard.resolve(name)
    if found is None:
        raise not_found(f"no skill named {name!r}", "GET /api/skills lists the skills")
    skill = found[0]
    return next(e for e in yard.entries if e.skill is skill or (e.active and e.skill.name == skill.name))


@router.get("/skills", summary="Every skill folder found, with its state and gating diagnostics")
async def list_skills(request: Request, principal: CallerDep) -> list[dict[str, Any]]:
    return [describe_entry(e) for e in service_of(request).yard.entries]


@router.get("/skills/{name}", summary="One skill: manifest, input schema, tools, requirements")
async def show_skill(request: Request, name: str, principal: CallerDep) -> dict[str, Any]:
    return describe_skill(_entry(request, name))


@router.post("/skills/{name}/run", summary="Run a skill; answers its envelope", response_model=None)
async def run_skill(request: Request, name: str, body: RunBody, principal: CallerDep) -> JSONResponse:
    service = service_of(request)
    session = body.session or default_session(principal)
    await service.owners.claim(session, principal)
    context = {**principal.context, "session_id": session, "channel": CHANNEL, "request": request}
    if body.raw_input is not None:
        context["raw_input"] = body.raw_input
    try:
        envelope = await service.yard.run(name, body.input, context)
    except UnknownSkill:
        raise not_found(f"no skill named {name!r}", "GET /api/skills lists the skills") from None
    except SkillyardError as exc:
        raise bad_request(str(exc)) from None
    return JSONResponse(envelope)  # the envelope is JSON already: no response model to validate it against


@router.post("/rescan", summary="Read the skill roots again (every serve process does)")
async def rescan(request: Request, principal: CallerDep) -> dict[str, Any]:
    service = service_of(request)
    parsed = service.yard.rescan()
    await service.bus.publish("catalog")
    return {"reread": parsed, "skills": len([e for e in service.yard.entries if e.active])}


@router.get("/runs", summary="Recent runs of your sessions (an admin: of its organisation's sessions)")
async def recent_runs(request: Request, principal: CallerDep, limit: int = 50) -> list[dict[str, Any]]:
    return await runs_of(request, principal, limit)


async def runs_of(request: Request, principal: Any, limit: int = 50) -> list[dict[str, Any]]:
    if not 1 <= limit <= 500:
        raise bad_request(f"limit={limit} is out of range", "use a limit from 1 to 500")
    service = service_of(request)
    scope = (
        service_sessions.c.org_id == principal.org_id
        if principal.is_admin and principal.org_id
        else service_sessions.c.owner == principal.owner
    )
    query = (
        select(runs, service_sessions.c.owner)
        .join(service_sessions, service_sessions.c.session_id == runs.c.session_id)
        .where(scope)
        .order_by(runs.c.id.desc())
        .limit(limit)
    )
    await service.yard.runlog.flush()  # this process's own recent runs first
    sessions = await service.yard.database.session_factory()
    async with sessions() as session:
        rows = (await session.execute(query)).all()
    return [
        {
            "id": r.id,
            "skill": r.skill,
            "session_id": r.session_id,
            "ok": r.ok,
            "status": "ok" if r.ok else "failed",
            "error_type": r.error_type,
            "exception_type": r.exception_type,
            "timed_out": r.timed_out,
            "duration_ms": round(r.duration_ms, 1),
            "started_at": r.started_at.isoformat(),
        }
        for r in rows
    ]


@router.get("/sessions/{session_id}/artifacts", summary="A session's attachments and the files its skills made")
async def artifacts(request: Request, session_id: str, principal: CallerDep) -> list[dict[str, Any]]:
    service = service_of(request)
    await service.owners.check(session_id, principal)
    items = [a.as_dict() for a in await service.yard.attachments.for_session(session_id)]
    for item in items:
        item["download"] = f"/api/sessions/{session_id}/files/{item['ref']}"
    return items


@router.get("/sessions/{session_id}/files/{ref}", summary="Download one file of a session", response_model=None)
async def download(request: Request, session_id: str, ref: str, principal: CallerDep) -> FileResponse:
    service = service_of(request)
    await service.owners.check(session_id, principal)
    for item in await service.yard.attachments.for_session(session_id):
        record = item.as_dict()
        if record["ref"] != ref:
            continue
        path = Path(record["local_path"] or "")
        if not record["local_path"] or not path.is_file():
            raise ApiError(410, "gone", f"file {ref!r} of session {session_id!r} is no longer on disk", "run it again")
        return FileResponse(path, filename=record["filename"] or path.name)
    raise not_found(f"session {session_id!r} has no file {ref!r}", f"GET /api/sessions/{session_id}/artifacts")
