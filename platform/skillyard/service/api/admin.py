"""Admin endpoints: skill configs and notify aliases of the token's role (listed masked), and the tokens of the
token's organisation. An admin token manages its own role and organisation only."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from ...builtin_skills.notify.aliases import PREFIX, SKILL, Alias, AliasError, aliases_of, check_name
from ...errors import SkillyardError
from ...tokens.store import TokenStore
from ..auth import Principal
from ..errors import bad_request, not_found, refused
from .deps import AdminDep, service_of

router = APIRouter(prefix="/api", tags=["admin"])
MASK = "********"


class ConfigBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    values: dict[str, str] = Field(min_length=1, description="KEY: value pairs; credential-like keys are encrypted.")


class AliasBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    urls: list[str] = Field(default_factory=list, max_length=50, description="Apprise URLs.")
    config: str | None = Field(default=None, max_length=262_144, description="An Apprise config file's text.")
    tags: list[str] = Field(default_factory=list, max_length=50)


class TokenBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=100)
    identity: dict[str, Any] = Field(default_factory=dict, description="team_role, user_id, actor_* …")
    admin: bool = False


def _role(principal: Principal, role: str | None) -> str:
    if role is not None and role != principal.role_id:
        raise refused(
            f"role {role!r} is not your token's role {principal.role_id!r}",
            "an admin token manages its own role's configs; use a token of that role",
        )
    return principal.role_id


@router.get("/configs/{skill}", summary="A skill's configs of your role (secrets masked)")
async def list_configs(request: Request, skill: str, principal: AdminDep, role: str | None = None) -> dict[str, Any]:
    configs = service_of(request).yard.configs
    try:
        listing = await configs.listing(_role(principal, role), skill)
    except SkillyardError as exc:
        raise bad_request(str(exc)) from None
    return {k: {"value": MASK if secret else value, "secret": secret} for k, (value, secret) in sorted(listing.items())}


@router.put("/configs/{skill}", summary="Set configs of a skill for your role")
async def set_configs(
    request: Request, skill: str, body: ConfigBody, principal: AdminDep, role: str | None = None
) -> dict[str, Any]:
    try:
        stored = await service_of(request).yard.configs.set(_role(principal, role), skill, body.values)
    except SkillyardError as exc:
        raise bad_request(str(exc)) from None
    return {"set": {k: {"secret": v} for k, v in stored.items()}}


@router.delete("/configs/{skill}", summary="Unset some (keys=a,b) or all configs of a skill for your role")
async def unset_configs(
    request: Request, skill: str, principal: AdminDep, keys: str = "", role: str | None = None
) -> dict[str, Any]:
    chosen = [k.strip() for k in keys.split(",") if k.strip()] or None
    try:
        removed = await service_of(request).yard.configs.unset(_role(principal, role), skill, chosen)
    except SkillyardError as exc:
        raise bad_request(str(exc)) from None
    return {"removed": removed}


def _checked_alias(name: str, body: AliasBody) -> Alias:
    import apprise

    from ...builtin_skills.notify.targets import asset

    try:
        alias_name = check_name(name)
    except AliasError as exc:
        raise bad_request(f"name: {exc}") from None
    if not body.urls and body.config is None:
        raise bad_request("urls and config are both empty", "give Apprise URLs in urls, or an Apprise config in config")
    for position, url in enumerate(body.urls):
        if apprise.Apprise.instantiate(url, asset=asset()) is None:
            raise bad_request(f"urls[{position}] is not a usable Apprise URL", "check it against Apprise's URL list")
    if body.config is not None:
        config = apprise.AppriseConfig(asset=asset(), recursion=0)
        notifier = apprise.Apprise(asset=asset())
        if not config.add_config(body.config) or not notifier.add(config) or not len(notifier):
            raise bad_request("config holds no URL Apprise can use", "send an Apprise YAML or TEXT config")
    elif body.tags:
        raise bad_request("tags select URLs of a config", "send config too, or leave tags out")
    return Alias(alias_name, tuple(body.urls), body.config, tuple(dict.fromkeys(body.tags)))


@router.get("/notify/aliases", summary="Your role's notify aliases (URLs masked)")
async def list_aliases(request: Request, principal: AdminDep) -> list[dict[str, Any]]:
    stored = aliases_of(await service_of(request).yard.configs.get(principal.role_id, SKILL))
    found = []
    for name, text in sorted(stored.items()):
        try:
            found.append(Alias.from_json(name, text).masked())
        except AliasError:
            found.append(Alias(name).masked())
    return found


@router.put("/notify/aliases/{name}", summary="Set a notify alias of your role")
async def set_alias(request: Request, name: str, body: AliasBody, principal: AdminDep) -> dict[str, Any]:
    alias = _checked_alias(name, body)
    await service_of(request).yard.configs.set(principal.role_id, SKILL, {PREFIX + alias.name: alias.to_json()})
    return alias.masked()


@router.delete("/notify/aliases/{name}", summary="Remove a notify alias of your role")
async def remove_alias(request: Request, name: str, principal: AdminDep) -> dict[str, Any]:
    try:
        alias_name = check_name(name)
    except AliasError as exc:
        raise bad_request(f"name: {exc}") from None
    removed = await service_of(request).yard.configs.unset(principal.role_id, SKILL, [PREFIX + alias_name])
    if not removed:
        raise not_found(f"your role has no notify alias {alias_name!r}", "GET /api/notify/aliases lists them")
    return {"removed": alias_name}


@router.get("/tokens", summary="The tokens of your organisation (never the tokens themselves)")
async def list_tokens(request: Request, principal: AdminDep) -> list[dict[str, Any]]:
    rows = await TokenStore(service_of(request).yard.database).list()
    return [r for r in rows if r["org_id"] == principal.org_id]


@router.post("/tokens", summary="Make a token of your organisation and role; shown only in this answer")
async def add_token(request: Request, body: TokenBody, principal: AdminDep) -> dict[str, Any]:
    try:
        token = await TokenStore(service_of(request).yard.database).add(
            body.name, principal.role_id, principal.org_id, body.identity, body.admin
        )
    except SkillyardError as exc:
        raise bad_request(str(exc)) from None
    return {"name": body.name, "token": token, "org_id": principal.org_id, "role_id": principal.role_id}


@router.delete("/tokens/{name}", summary="Revoke a token of your organisation")
async def revoke_token(request: Request, name: str, principal: AdminDep) -> dict[str, Any]:
    store = TokenStore(service_of(request).yard.database)
    if not [r for r in await store.list() if r["name"] == name and r["org_id"] == principal.org_id]:
        raise not_found(f"your organisation has no token {name!r}", "GET /api/tokens lists them")
    await store.revoke(name)
    return {"revoked": name}
