"""What every endpoint depends on: the service of the app, and the verified, rate-limited caller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, Request

from ..auth import Principal, require_admin

if TYPE_CHECKING:
    from ..app import Service


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


async def caller(request: Request) -> Principal:
    """The token's identity (401 without a live one), counted against its rate limit (429 past it)."""
    service = service_of(request)
    principal = await service.auth.principal(request)
    await service.limiter.check(principal.name)
    return principal


async def admin(request: Request) -> Principal:
    principal = await caller(request)
    require_admin(principal, f"{request.method} {request.url.path}")
    return principal


CallerDep = Annotated[Principal, Depends(caller)]
AdminDep = Annotated[Principal, Depends(admin)]


def json_safe(value: Any) -> Any:
    """Values the JSON response can carry (datetimes as ISO text)."""
    import datetime as dt

    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return value
