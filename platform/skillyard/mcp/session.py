"""Who is calling, and in which skillyard session.

A caller's identity comes from its token (HTTP) or from the server's ``--context`` (stdio, ``--no-auth``), never
from its arguments (§4.8). Each MCP session is one skillyard session (workspace, attachments, failure budget)
owned by the identity that opened it; another identity naming it is refused.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..invoke.budget import Turn
from ..invoke.run import SAFE_SESSION
from ..storage.session_owners import SessionOwners, derived_session, names_anothers
from ..tokens.identity import DEFAULTS, TokenIdentity

if TYPE_CHECKING:
    from ..storage.database import Database

#: The skillyard channel of MCP runs: not a chat channel that results could be pushed to later.
CHANNEL = "mcp"
#: A client may name the skillyard session of a request in ``_meta`` (sessionless protocol versions need this).
SESSION_META_KEY = "io.skillyard/session"
#: Sessions whose failure budgets a server remembers; the least recently used go first.
MAX_SESSIONS = 10_000
#: Fields a caller's context never sets for itself: the server derives them per MCP session.
PER_SESSION = ("session_id", "workspace_dir", "skill_configs", "skill_args", "attachments")


class SessionRefused(Exception):
    """A request names a session that another identity owns, or a session id skillyard cannot use."""


@dataclass(frozen=True)
class Caller:
    """An identity: ``owner`` says whose sessions are whose, ``context`` is the platform segment its runs get."""

    owner: str
    context: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_token(cls, identity: TokenIdentity) -> Caller:
        return cls(f"token:{identity.name}", identity.context())

    @classmethod
    def from_server_context(cls, given: Mapping[str, Any]) -> Caller:
        """The operator's ``--context`` (stdio, ``--no-auth``): trusted, except the fields each session sets."""
        return cls("server-context", {**DEFAULTS, **{k: v for k, v in given.items() if k not in PER_SESSION}})


def session_from_mcp(mcp_session_id: str) -> str:
    """The skillyard session of an MCP session id (``Mcp-Session-Id``): a safe name whatever the id holds."""
    if SAFE_SESSION.match(f"mcp-{mcp_session_id}"):
        return f"mcp-{mcp_session_id}"
    return "mcp-" + hashlib.sha256(mcp_session_id.encode("utf-8", "replace")).hexdigest()[:32]


def default_session(caller: Caller) -> str:
    """The session of a caller's sessionless requests: one per identity."""
    return derived_session("mcp", caller.owner)


def new_connection_session() -> str:
    """The session of one stdio connection."""
    return f"mcp-stdio-{uuid.uuid4().hex}"


def named_session(value: Any, caller: Caller, *own: str) -> str:
    """A session a client named in ``_meta``, checked (the same rule as every session id); ``own``: sessions
    derived for this request that it may name too (its MCP session's)."""
    if not isinstance(value, str) or not SAFE_SESSION.match(value):
        raise SessionRefused(
            f"_meta {SESSION_META_KEY!r} must be a session id of letters, digits, '.', '_', '-' (up to 128), "
            f"not {value!r}"
        )
    if names_anothers(value, caller.owner, *own):
        raise SessionRefused(
            f"session {value!r} has the shape of a session skillyard derives for another identity; name another"
        )
    return value


class Sessions:
    """The sessions of one server: their owners (in PostgreSQL, shared with every process and the HTTP API) and
    their turns (one failure budget per MCP session, kept by the process serving it)."""

    def __init__(self, database: Database) -> None:
        self.owners = SessionOwners(database)
        self._turns: OrderedDict[str, Turn] = OrderedDict()

    async def claim(self, session_id: str, caller: Caller) -> Turn:
        """The session's turn for this caller; the first caller owns it, any other identity is refused."""
        owner, _ = await self.owners.claim(session_id, caller.owner, str(caller.context.get("org_id") or ""))
        if owner != caller.owner:
            raise SessionRefused(f"session {session_id!r} belongs to another identity; open a session of your own")
        turn = self._turns.get(session_id)
        if turn is None:
            turn = self._turns[session_id] = Turn(session_id=session_id, channel=CHANNEL, context={})
            while len(self._turns) > MAX_SESSIONS:
                self._turns.popitem(last=False)
        self._turns.move_to_end(session_id)
        return turn
