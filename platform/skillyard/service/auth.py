"""Who is calling: the token of the request (the MCP server's token store and verifier, one for MCP and HTTP), or
the server's ``--context`` under ``--no-auth``. The platform segment of every run comes from here, never from a
request body (§4.8)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request

from ..mcp.auth import StoreTokenVerifier, identity_of
from ..mcp.session import Caller
from ..tokens.identity import TokenIdentity
from ..tokens.store import TokenStore
from .errors import ApiError

#: The console keeps the token a person signed in with in this cookie (HttpOnly, SameSite=Strict).
COOKIE = "skillyard_token"
#: The fields of an identity an approval record names.
APPROVER_FIELDS = ("user_id", "actor_id", "actor_name", "actor_emp_no", "team_role")


@dataclass(frozen=True)
class Principal:
    """A verified caller: ``owner`` says whose sessions are whose, ``context`` is the platform segment its runs
    get; ``name`` is the token's (``server-context`` under ``--no-auth``)."""

    name: str
    caller: Caller
    org_id: str
    role_id: str
    is_admin: bool

    @property
    def owner(self) -> str:
        return self.caller.owner

    @property
    def context(self) -> dict[str, Any]:
        return dict(self.caller.context)

    @classmethod
    def from_token(cls, identity: TokenIdentity) -> Principal:
        return cls(identity.name, Caller.from_token(identity), identity.org_id, identity.role_id, identity.is_admin)

    @classmethod
    def from_server_context(cls, given: dict[str, Any]) -> Principal:
        caller = Caller.from_server_context(given)
        ctx = caller.context
        return cls(
            "server-context",
            caller,
            str(ctx.get("org_id") or ""),
            str(ctx.get("role_id") or ""),
            bool(ctx.get("is_admin")),
        )

    def approver(self) -> dict[str, Any]:
        """Who answered a checkpoint, as recorded with it."""
        ctx = self.caller.context
        found = {key: ctx[key] for key in APPROVER_FIELDS if ctx.get(key)}
        return {"token": self.name, "org_id": self.org_id, "role_id": self.role_id, **found}

    def may_act_for(self, owner: str, org_id: str) -> bool:
        """The owner itself, or an admin of the owner's organisation."""
        return owner == self.owner or (self.is_admin and bool(org_id) and org_id == self.org_id)


class Authenticator:
    """Verifies bearer tokens (and the console's cookie) through the token store, 5 s cache included."""

    def __init__(self, store: TokenStore, server: Principal | None) -> None:
        self.verifier = StoreTokenVerifier(store)
        self.server = server

    async def verify(self, token: str) -> Principal | None:
        access = await self.verifier.verify_token(token)
        identity = identity_of(access) if access is not None else None
        return Principal.from_token(identity) if identity is not None else None

    async def principal(self, request: Request, *, cookie: bool = False) -> Principal:
        """The caller of ``request``, or 401 naming what is missing."""
        if self.server is not None:
            return self.server
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if not header and cookie:
            token, scheme = request.cookies.get(COOKIE, ""), "bearer"
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(
                401,
                "unauthorized",
                "this endpoint needs a token and the request has none",
                "send 'Authorization: Bearer <token>' with a token from `skillyard token add`",
                {"WWW-Authenticate": "Bearer"},
            )
        found = await self.verify(token.strip())
        if found is None:
            raise ApiError(
                401,
                "unauthorized",
                "the token is not a live token (revoked, mistyped or made up)",
                "ask an admin for a token (`skillyard token add`) and send it as 'Authorization: Bearer <token>'",
                {"WWW-Authenticate": 'Bearer error="invalid_token"'},
            )
        return found


def require_admin(principal: Principal, what: str) -> None:
    if not principal.is_admin:
        raise ApiError(
            403,
            "forbidden",
            f"{what} is for admins and token {principal.name!r} is no admin",
            "use a token made with `skillyard token add … --admin`",
        )
