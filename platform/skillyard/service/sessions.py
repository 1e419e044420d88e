"""Who may use a session through the HTTP API: its owner (the identity that first used it, recorded in PostgreSQL, so
every serve process and the MCP mount agree) or an admin of the owner's organisation."""

from __future__ import annotations

from typing import Any

from ..invoke.run import SAFE_SESSION
from ..storage.database import Database
from ..storage.session_owners import SessionOwners as StoredOwners
from ..storage.session_owners import derived_session, names_anothers
from .auth import Principal
from .errors import ApiError, bad_request, not_found


def check_session(session_id: Any) -> str:
    if not isinstance(session_id, str) or not SAFE_SESSION.match(session_id):
        raise bad_request(
            f"session {session_id!r} is not a session id",
            "use 1-128 letters, digits, '_', '-' or '.' (the same rule as `skillyard run --session`)",
        )
    return session_id


def default_session(principal: Principal) -> str:
    """The session of a caller's requests that name none: one per identity."""
    return derived_session("http", principal.owner)


class SessionOwners:
    """The HTTP API's view of :class:`~skillyard.storage.session_owners.SessionOwners`: errors as API errors, an
    admin of the owner's organisation let in."""

    def __init__(self, database: Database) -> None:
        self.store = StoredOwners(database)

    async def owner(self, session_id: str) -> tuple[str, str] | None:
        """(owner, org_id) of a session, or None for a session nobody used."""
        return await self.store.owner(session_id)

    async def claim(self, session_id: str, principal: Principal) -> None:
        """Use a session: the first identity owns it; another is refused (403) unless an admin of its org."""
        check_session(session_id)
        # an unused derived session is only its identity's to start; once used, ownership decides (admins too)
        if names_anothers(session_id, principal.owner) and await self.owner(session_id) is None:
            raise ApiError(
                403,
                "forbidden",
                f"session {session_id!r} has the shape of a session skillyard derives for another identity",
                "name a session of your own, or send none to use your identity's own session",
            )
        known = await self.store.claim(session_id, principal.owner, principal.org_id)
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
