"""The inbound events seen, by binding and the channel's event id: platforms retry a webhook they think was lost
(Feishu and Slack after about 3 s), and a retry must not answer twice. The row also holds the message until its job
takes it to answer it, so the job's arguments carry ids only."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select, update
from sqlalchemy.dialects.postgresql import insert

from ...storage.tables import service_hook_events

if TYPE_CHECKING:
    from ...storage.database import Database

#: Event ids are remembered this long (Slack retries for up to an hour, Telegram for about a day).
KEEP = dt.timedelta(days=2)


async def first_time(database: Database, binding: str, event_id: str, message: dict[str, Any]) -> bool:
    """Record an event; False when it was seen before (a retry)."""
    sessions = await database.session_factory()
    async with sessions() as session, session.begin():
        inserted = await session.scalar(
            insert(service_hook_events)
            .values(binding=binding, event_id=event_id[:300], message=message)
            .on_conflict_do_nothing(index_elements=["binding", "event_id"])
            .returning(service_hook_events.c.event_id)
        )
    return inserted is not None


async def stored_message(database: Database, binding: str, event_id: str) -> dict[str, Any] | None:
    """The stored message of an event, left in its row (None once a job has taken it)."""
    sessions = await database.session_factory()
    async with sessions() as session:
        message: dict[str, Any] | None = await session.scalar(
            select(service_hook_events.c.message).where(
                service_hook_events.c.binding == binding, service_hook_events.c.event_id == event_id
            )
        )
    return message


async def take_message(database: Database, binding: str, event_id: str) -> dict[str, Any] | None:
    """The stored message of an event, removed from the row (the id stays for de-duplication): of two attempts at
    one event, only one gets it."""
    sessions = await database.session_factory()
    async with sessions() as session, session.begin():
        row = (
            await session.execute(
                select(service_hook_events.c.message)
                .where(service_hook_events.c.binding == binding, service_hook_events.c.event_id == event_id)
                .with_for_update()
            )
        ).first()
        if row is None or row.message is None:
            return None
        await session.execute(
            update(service_hook_events)
            .where(service_hook_events.c.binding == binding, service_hook_events.c.event_id == event_id)
            .values(message=None)
        )
    message: dict[str, Any] = row.message
    return message


async def prune_seen(database: Database) -> None:
    sessions = await database.session_factory()
    async with sessions() as session, session.begin():
        cutoff = dt.datetime.now(dt.UTC) - KEEP
        await session.execute(delete(service_hook_events).where(service_hook_events.c.received_at < cutoff))
