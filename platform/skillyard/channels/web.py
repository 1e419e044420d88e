"""Default plugin: the web channel: messages kept in PostgreSQL per session, read by the web front end (and by
``skillyard messages --session S``).

A message may go only to a web session of the sender's own organisation: the first web run of a session records
which organisation it belongs to (:func:`claim_session`, called by the delivery processor).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..hookspecs import hookimpl
from ..invoke.run import SAFE_SESSION
from .adapter import MB, ChannelError, OutgoingMessage, SendContext, WholeMessageChannel

if TYPE_CHECKING:
    from ..storage.database import Database


async def claim_session(database: Database, session_id: str, org_id: str) -> None:
    """Record that a web session belongs to ``org_id`` (the first claim stands)."""
    from sqlalchemy.dialects.postgresql import insert as pg_insert

    from ..storage.tables import web_sessions

    sessions = await database.session_factory()
    async with sessions() as session, session.begin():
        stmt = pg_insert(web_sessions).values(session_id=session_id, org_id=org_id)
        await session.execute(stmt.on_conflict_do_nothing(index_elements=["session_id"]))


async def session_org(database: Database, session_id: str) -> str | None:
    """The organisation a web session belongs to, or None for a session never seen on the web channel."""
    from sqlalchemy import select

    from ..storage.tables import web_sessions

    sessions = await database.session_factory()
    async with sessions() as session:
        found = await session.scalar(select(web_sessions.c.org_id).where(web_sessions.c.session_id == session_id))
    return None if found is None else str(found)


async def session_messages(database: Database, session_id: str, limit: int = 100) -> list[dict[str, Any]]:
    """The newest ``limit`` messages of a session, oldest first."""
    from sqlalchemy import select

    from ..storage.tables import web_messages

    sessions = await database.session_factory()
    async with sessions() as session:
        rows = (
            await session.execute(
                select(web_messages)
                .where(web_messages.c.session_id == session_id)
                .order_by(web_messages.c.id.desc())
                .limit(limit)
            )
        ).all()
    return [
        {
            "id": row.id,
            "session_id": row.session_id,
            "text": row.text,
            "format": row.format,
            "files": row.files,
            "created_at": row.created_at.isoformat(),
        }
        for row in reversed(rows)
    ]


class WebChannel(WholeMessageChannel):
    name = "web"
    max_file_bytes = 200 * MB  # the file stays in the workspace: the message only names it
    max_text_chars = 100_000
    recipient_pattern = SAFE_SESSION
    recipient_help = "<session id>"

    async def send(self, recipient: str, message: OutgoingMessage, ctx: SendContext) -> str | None:
        database = ctx.yard.database
        owner = await session_org(database, recipient)
        if owner is None or owner != ctx.org_id:
            raise ChannelError.bad_recipient(
                f"web:{recipient} is not a web session of your organisation; send to a session id your "
                "organisation's users opened (recipients come from business data, e.g. an order's origin_session_id)"
            )
        from sqlalchemy import insert

        from ..storage.tables import web_messages

        files = [
            {"filename": f.filename, "media": f.media, "size": f.size, "local_path": str(f.path), "ref": f.ref}
            for f in message.files
        ]
        sessions = await database.session_factory()
        async with sessions() as session, session.begin():
            new_id = await session.scalar(
                insert(web_messages)
                .values(org_id=ctx.org_id, session_id=recipient, text=message.text, format=message.format, files=files)
                .returning(web_messages.c.id)
            )
        return str(new_id)


@hookimpl
def register_channels(register: Any) -> None:
    register("web", WebChannel())
