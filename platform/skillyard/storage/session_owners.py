"""Who owns a session: the identity that first used it, recorded in PostgreSQL, so that every process serving one
database (``skillyard serve`` behind a load balancer, ``mcp serve``) agrees. An owner never changes, so each
process keeps what it has read."""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert

from .database import Database
from .tables import service_sessions

#: Owners a process keeps in memory (the least recently used go first).
MAX_CACHED = 50_000
#: The shape of a session derived from an identity or an MCP session id: a caller may not name another's.
DERIVED = re.compile(r"(?:mcp|http)-[0-9a-f]{32}")


def derived_session(prefix: str, owner: str) -> str:
    """The session an identity's requests that name none run in (``mcp`` or ``http``)."""
    return f"{prefix}-" + hashlib.sha256(owner.encode()).hexdigest()[:32]


def names_anothers(session_id: str, owner: str, *own: str) -> bool:
    """Whether a session id a caller named is one derived for somebody else: anyone can compute the default
    session of a token's name, so without this a caller could claim it first and lock its identity out."""
    if DERIVED.fullmatch(session_id) is None:
        return False
    return session_id not in (derived_session("mcp", owner), derived_session("http", owner), *own)


class SessionOwners:
    """Reads and first claims of ``service_sessions``; what a claim by another identity means is the caller's to
    decide (the HTTP API lets an admin of the owner's organisation in, MCP refuses)."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self._known: OrderedDict[str, tuple[str, str]] = OrderedDict()

    async def owner(self, session_id: str) -> tuple[str, str] | None:
        """(owner, org_id) of a session, or None for a session nobody claimed."""
        known = self._known.get(session_id)
        if known is not None:
            self._known.move_to_end(session_id)
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
        self._known[session_id] = (row.owner, row.org_id)
        while len(self._known) > MAX_CACHED:
            self._known.popitem(last=False)
        return self._known[session_id]

    async def claim(self, session_id: str, owner: str, org_id: str) -> tuple[str, str]:
        """The session's (owner, org_id): this identity's if nobody had claimed it, else the first claimant's."""
        known = await self.owner(session_id)
        if known is not None:
            return known
        sessions = await self.database.session_factory()
        async with sessions() as session, session.begin():
            await session.execute(
                insert(service_sessions)
                .values(session_id=session_id, owner=owner, org_id=org_id)
                .on_conflict_do_nothing(index_elements=["session_id"])
            )
        found = await self.owner(session_id)
        assert found is not None  # the row exists now: ours, or a concurrent first claim's
        return found
