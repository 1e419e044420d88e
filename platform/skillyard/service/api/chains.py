"""``/api/chains``, ``/api/chain-runs`` and ``/api/schedules``: the chain CLI's operations, for admins of an
organisation, over the chains whose identity is of that organisation."""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from ...chains.definition import IDENTITY_KEYS, ChainInvalid
from ...chains.engine import ChainError
from ..auth import Principal
from ..errors import ApiError, bad_request, not_found, refused
from .deps import AdminDep, json_safe, service_of

router = APIRouter(prefix="/api", tags=["chains"])


class ChainBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    definition: str = Field(min_length=1, max_length=1_048_576, description="The chain file's YAML text.")


class RunBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input: dict[str, Any] = Field(default_factory=dict, description="The trigger input.")
    wait: bool = Field(default=False, description="Run it here to its end (else queued for `skillyard worker`).")


class ScheduleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    chain: str = Field(min_length=1, max_length=128)
    cron: str = Field(min_length=1, max_length=200)
    tz: str = "UTC"
    input: dict[str, Any] = Field(default_factory=dict)
    overlap: str = "skip"


def _org(chain: dict[str, Any]) -> str:
    return str((chain.get("identity") or {}).get("org_id") or "")


async def _engine(request: Request) -> Any:
    return await service_of(request).chain_engine()


async def _chain(request: Request, name: str, principal: Principal) -> dict[str, Any]:
    try:
        chain: dict[str, Any] = await (await _engine(request)).chain(name)
    except ChainError:
        chain = {}
    if not chain or _org(chain) != principal.org_id:
        raise not_found(f"no chain named {name!r} in organisation {principal.org_id!r}", "GET /api/chains lists them")
    return chain


def _owned(chain: Any, principal: Principal) -> Any:
    """The chain as it will be stored: the token's role; the token's identity unless the admin gave one (of its
    own organisation)."""
    if chain.role_id and chain.role_id != principal.role_id:
        raise refused(
            f"role_id {chain.role_id!r} is not your token's role {principal.role_id!r}",
            "leave role_id out (the chain runs with your token's role) or use a token of that role",
        )
    identity = dict(chain.identity)
    if identity:
        if identity.setdefault("org_id", principal.org_id) != principal.org_id:
            raise refused(
                f"identity.org_id {identity['org_id']!r} is not your organisation {principal.org_id!r}",
                "an admin gives identities of its own organisation only",
            )
    else:
        context = principal.context
        identity = {k: context[k] for k in sorted(IDENTITY_KEYS) if context.get(k) not in (None, "", [])}
        identity["org_id"] = principal.org_id
    return dataclasses.replace(chain, role_id=principal.role_id, identity=identity)


@router.get("/chains", summary="The chains of your organisation")
async def list_chains(request: Request, principal: AdminDep) -> list[dict[str, Any]]:
    return [json_safe(c) for c in await (await _engine(request)).chains() if _org(c) == principal.org_id]


@router.post("/chains", summary="Add a chain (a new version when the name exists)")
async def add_chain(request: Request, body: ChainBody, principal: AdminDep) -> dict[str, Any]:
    engine = await _engine(request)
    try:
        chain = engine.read(body.definition, "definition")
    except ChainInvalid as exc:
        raise ApiError(422, "invalid_chain", "; ".join(exc.problems), "fix each place named and add it again") from None
    try:
        existing = await engine.chain(chain.name)
    except ChainError:
        existing = None
    if existing is not None and _org(existing) != principal.org_id:
        raise refused(f"chain {chain.name!r} belongs to another organisation", "choose another name")
    version = await engine.add(_owned(chain, principal))
    return {"name": chain.name, "version": version}


@router.get("/chains/{name}", summary="One chain with its schedules")
async def show_chain(request: Request, name: str, principal: AdminDep) -> dict[str, Any]:
    return json_safe(await _chain(request, name, principal))


@router.delete("/chains/{name}", summary="Remove a chain (force: its schedules too)")
async def remove_chain(request: Request, name: str, principal: AdminDep, force: bool = False) -> dict[str, Any]:
    await _chain(request, name, principal)
    try:
        return await (await _engine(request)).remove(name, force)
    except ChainError as exc:
        raise ApiError(409, "conflict", str(exc), "remove its schedules first, or pass ?force=true") from None


@router.post("/chains/{name}/runs", summary="Run a chain: queued for a worker, or here to its end (wait)")
async def run_chain(request: Request, name: str, body: RunBody, principal: AdminDep) -> dict[str, Any]:
    await _chain(request, name, principal)
    engine = await _engine(request)
    try:
        if body.wait:
            return json_safe(await engine.run(name, body.input))
        run_id = await engine.start(name, body.input)
    except ChainError as exc:
        raise bad_request(str(exc)) from None
    return json_safe(await engine.get_run(run_id))


@router.get("/chains/{name}/runs", summary="The newest runs of a chain, with their steps")
async def chain_runs(request: Request, name: str, principal: AdminDep, limit: int = 20) -> list[dict[str, Any]]:
    await _chain(request, name, principal)
    if not 1 <= limit <= 200:
        raise bad_request(f"limit={limit} is out of range", "use a limit from 1 to 200")
    return [json_safe(r) for r in await (await _engine(request)).runs(name, limit)]


async def _run(request: Request, run_id: str, principal: Principal) -> dict[str, Any]:
    engine = await _engine(request)
    try:
        run: dict[str, Any] = await engine.get_run(run_id)
    except ChainError:
        raise not_found(f"no chain run {run_id!r}", "GET /api/chains/{name}/runs lists them") from None
    await _chain(request, run["chain"], principal)
    return run


@router.get("/chain-runs/{run_id}", summary="One chain run with its steps")
async def get_run(request: Request, run_id: str, principal: AdminDep) -> dict[str, Any]:
    return json_safe(await _run(request, run_id, principal))


@router.post("/chain-runs/{run_id}/cancel", summary="Cancel a run")
async def cancel_run(request: Request, run_id: str, principal: AdminDep) -> dict[str, Any]:
    await _run(request, run_id, principal)
    return json_safe(await (await _engine(request)).cancel(run_id))


@router.get("/schedules", summary="The schedules of your organisation's chains")
async def list_schedules(request: Request, principal: AdminDep) -> list[dict[str, Any]]:
    engine = await _engine(request)
    mine = {c["name"] for c in await engine.chains() if _org(c) == principal.org_id}
    return [s for s in await engine.schedules() if s["chain"] in mine]


@router.post("/schedules", summary="Schedule a chain")
async def add_schedule(request: Request, body: ScheduleBody, principal: AdminDep) -> dict[str, Any]:
    await _chain(request, body.chain, principal)
    try:
        schedule: dict[str, Any] = await (await _engine(request)).schedule(
            body.chain, body.cron, body.tz, body.input, body.overlap
        )
    except ChainError as exc:
        raise bad_request(str(exc), "fix the cron, tz or overlap as the detail says") from None
    return schedule


async def _schedule(request: Request, schedule_id: str, principal: Principal) -> None:
    for schedule in await list_schedules(request, principal):
        if schedule["id"] == schedule_id:
            return
    raise not_found(f"no schedule {schedule_id!r} of your organisation", "GET /api/schedules lists them")


@router.post("/schedules/{schedule_id}/pause", summary="Pause a schedule")
async def pause(request: Request, schedule_id: str, principal: AdminDep) -> dict[str, Any]:
    await _schedule(request, schedule_id, principal)
    await (await _engine(request)).pause(schedule_id, True)
    return {"id": schedule_id, "paused": True}


@router.post("/schedules/{schedule_id}/resume", summary="Resume a paused schedule")
async def resume(request: Request, schedule_id: str, principal: AdminDep) -> dict[str, Any]:
    await _schedule(request, schedule_id, principal)
    await (await _engine(request)).pause(schedule_id, False)
    return {"id": schedule_id, "paused": False}


@router.delete("/schedules/{schedule_id}", summary="Remove a schedule")
async def remove(request: Request, schedule_id: str, principal: AdminDep) -> dict[str, Any]:
    await _schedule(request, schedule_id, principal)
    await (await _engine(request)).unschedule(schedule_id)
    return {"id": schedule_id, "removed": True}
