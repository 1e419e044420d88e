"""The token store: tokens are generated with :mod:`secrets`, shown once, and kept only as their SHA-256 hash.

A token holds 256 random bits, so a plain SHA-256 (not a slow password hash) is what makes a stolen table useless:
nobody can search that space. A lookup compares hashes in SQL by equality on a unique index.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import CursorResult, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert

from ..errors import InvalidInput
from ..storage.tables import api_tokens
from .identity import TokenIdentity, parse_identity

if TYPE_CHECKING:
    from ..storage.database import Database

#: Visible in logs and secret scanners as a skillyard token; 43 url-safe characters of 32 random bytes follow it.
PREFIX = "sy_"
NAME_RX = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\Z")


def token_hash(token: str) -> str:
    """The stored form of a token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _identity(row: Any) -> TokenIdentity:
    return TokenIdentity(row.name, row.org_id, row.role_id, row.is_admin, dict(row.identity or {}))


class TokenStore:
    """Named tokens on the platform's database (table ``skillyard.api_tokens``)."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def add(
        self, name: str, role_id: str, org_id: str, identity: Mapping[str, Any] | None = None, is_admin: bool = False
    ) -> str:
        """Make a token and return it: the only time its text exists outside the caller's hands."""
        if not NAME_RX.match(name):
            raise InvalidInput(
                f"token name {name!r} is not usable; use letters, digits, '_', '.', '-' (up to 100, a letter or "
                "digit first)"
            )
        if not org_id.strip():
            raise InvalidInput("--org must name the token's organisation (a token is admin of its own org only)")
        fields = parse_identity(identity or {})
        token = PREFIX + secrets.token_urlsafe(32)
        sessions = await self.database.session_factory()
        async with sessions() as session, session.begin():
            stmt = insert(api_tokens).values(
                name=name,
                token_hash=token_hash(token),
                role_id=role_id,
                org_id=org_id,
                is_admin=is_admin,
                identity=fields,
            )
            result = cast(
                "CursorResult[Any]", await session.execute(stmt.on_conflict_do_nothing(index_elements=["name"]))
            )
            if result.rowcount == 0:
                raise InvalidInput(
                    f"the token name {name!r} is taken; choose another name (or revoke your token of that name)"
                )
        return token

    async def verify(self, token: str) -> TokenIdentity | None:
        """The identity of a presented token, or None when it is no live token (revoked, mistyped, made up)."""
        if not token.startswith(PREFIX) or len(token) > 200:
            return None
        sessions = await self.database.session_factory()
        async with sessions() as session, session.begin():
            row = (
                await session.execute(
                    update(api_tokens)
                    .where(api_tokens.c.token_hash == token_hash(token))
                    .values(last_used_at=func.now())
                    .returning(
                        api_tokens.c.name,
                        api_tokens.c.org_id,
                        api_tokens.c.role_id,
                        api_tokens.c.is_admin,
                        api_tokens.c.identity,
                    )
                )
            ).first()
        return _identity(row) if row is not None else None

    async def list(self) -> list[dict[str, Any]]:
        """Every token's name and identity, with when it was made and last used."""
        sessions = await self.database.session_factory()
        async with sessions() as session:
            rows = (await session.execute(select(api_tokens).order_by(api_tokens.c.name))).all()
        return [
            {
                **_identity(row).describe(),
                "created_at": row.created_at.isoformat(),
                "last_used_at": row.last_used_at.isoformat() if row.last_used_at else None,
            }
            for row in rows
        ]

    async def revoke(self, name: str) -> bool:
        """Delete a token; False when no token has that name."""
        sessions = await self.database.session_factory()
        async with sessions() as session, session.begin():
            result = cast(
                "CursorResult[Any]", await session.execute(delete(api_tokens).where(api_tokens.c.name == name))
            )
        return bool(result.rowcount)
