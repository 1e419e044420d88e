"""Who owns a session: the identity that first used it, recorded in PostgreSQL (every serve process sees it). Another
identity is refused unless it is an admin of the owner's organisation. An owner never changes, so each process
keeps what it has read."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert

from ..invoke.run import SAFE_SESSION
from ..storage.database import Database
from ..storage.tables import service_sessions
from .auth import Principal
from .errors import ApiError, bad_request, not_found

MAX_CACHED = 50_000


def check_session(session_id: Any) -> str:
    if not isinstance(session_id, str) or not SAFE_SESSION.match(session_id):
        raise bad_request(
            f"session {session_id!r} is not a session id",
            "use 1-128 letters, digits, '_', '-' or '.' (the same rule as `skillyard run --session`)",
        )
    return session_id


def default_session(principal: Principal) -> str:
    """The session of a caller's requests that name none: one per identity."""
    return "http-" + hashlib.sha256(principal.owner.encode()).hexdigest()[:32]


class SessionOwners:
    def __init__(self, database: Database) -> None:
        self.database = database
        self._known: OrderedDict[str, tuple[str, str]] = OrderedDict()

    async def owner(self, session_id: str) -> tuple[str, str] | None:
        """(owner, org_id) of a session, or None for a session nobody used through the service."""
        known = self._known.get(session_id)
        if known is not None:
            return known
        sessions = await self.database.session_factory()
        async with sessions() as session:
            row = (
                await session.execute(
                    select(service_sessions.c.owner, service_sessions.c.org_id).where(
                        service_sessions.c.session_id == session_id
                    )
                )
            ).first()
        if row is None:
            return None
        return self._remember(session_id, (row.owner, row.org_id))

    def _remember(self, session_id: str, value: tuple[str, str]) -> tuple[str, str]:
        self._known[session_id] = value
        while len(self._known) > MAX_CACHED:
            self._known.popitem(last=False)
        return value

    async def claim(self, session_id: str, principal: Principal) -> None:
        """Use a session: the first identity owns it; another is refused (403) unless an admin of its org."""
        check_session(session_id)
        known = await self.owner(session_id)
        if known is None:
            sessions = await self.database.session_factory()
            async with sessions() as session, session.begin():
                await session.execute(
                    insert(service_sessions)
                    .values(session_id=session_id, owner=principal.owner, org_id=principal.org_id)
                    .on_conflict_do_nothing(index_elements=["session_id"])
                )
            self._known.pop(session_id, None)
            known = await self.owner(session_id)
        assert known is not None
        self._allowed(session_id, known, principal)

    async def check(self, session_id: str, principal: Principal) -> None:
        """Read access to a session someone used: 404 for a session never seen, 403 for another's."""
        check_session(session_id)
        known = await self.owner(session_id)
        if known is None:
            raise not_found(f"no session {session_id!r}", "use a session id your runs or messages used")
        self._allowed(session_id, known, principal)

    @staticmethod
    def _allowed(session_id: str, known: tuple[str, str], principal: Principal) -> None:
        owner, org_id = known
        if not principal.may_act_for(owner, org_id):
            raise ApiError(
                403,
                "forbidden",
                f"session {session_id!r} belongs to another identity",
                "use a session of your own (or a token that is an admin of that session's organisation)",
            )
