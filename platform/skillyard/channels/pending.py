"""Pending records (§9.2): a message sent with ``expect_reply`` waits for its recipient's answer without anyone
awaiting it. A matching reply (same channel and sender, before expiry; the first one wins) drives what the record
names: a chain is started with ``{reply, from, channel, key}`` as its trigger input; an event is delivered to the
agent runtime (``yard.agent_event``) with that payload, for the record's org and key. Expired records are pruned
whenever records are added, listed or matched.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, insert, select, update

from ..errors import SkillyardError
from ..storage.tables import pending_replies

if TYPE_CHECKING:
    from ..yard import SkillYard

#: The longest a record may wait (30 days): a reply weeks later drives nothing sensible.
MAX_TTL_S = 30 * 86400
NAME_LIMIT = 200


class ExpectReplyError(ValueError):
    """An ``expect_reply`` value that cannot be stored; the message names the field and the fix."""


@dataclass(frozen=True)
class ExpectReply:
    """What a reply should drive (a chain or an event), the key it carries and how long it may take."""

    ttl_s: float
    chain: str | None = None
    event: str | None = None
    key: str | None = None

    @classmethod
    def parse(cls, value: Any) -> ExpectReply:
        if not isinstance(value, Mapping):
            raise ExpectReplyError('expect_reply must be an object such as {"chain": "approve_order", "ttl_s": 3600}')
        unknown = sorted(set(value) - {"chain", "event", "key", "ttl_s"})
        if unknown:
            raise ExpectReplyError(f"expect_reply has unknown fields {unknown}; use chain, event, key and ttl_s")
        ttl = value.get("ttl_s")
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
            raise ExpectReplyError(f"expect_reply.ttl_s must be a number of seconds above 0, got {ttl!r}")
        if ttl > MAX_TTL_S:
            raise ExpectReplyError(f"expect_reply.ttl_s is at most {MAX_TTL_S} (30 days), got {ttl}")
        fields = {name: _name(value.get(name), name) for name in ("chain", "event", "key")}
        if (fields["chain"] is None) == (fields["event"] is None):
            raise ExpectReplyError("expect_reply needs exactly one of chain (a chain's name) or event (an event name)")
        return cls(float(ttl), fields["chain"], fields["event"], fields["key"])


def _name(value: Any, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > NAME_LIMIT:
        raise ExpectReplyError(f"expect_reply.{field} must be text of 1-{NAME_LIMIT} characters, got {value!r}")
    return value.strip()


def _record(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "channel": row.channel,
        "recipient": row.recipient,
        "key": row.key,
        "chain": row.chain,
        "event": row.event,
        "role_id": row.role_id,
        "created_at": row.created_at.isoformat(),
        "expires_at": row.expires_at.isoformat(),
        "matched_at": row.matched_at.isoformat() if row.matched_at else None,
        "outcome": row.outcome,
    }


class PendingReplies:
    """The pending records of a host's database (``yard.pending``)."""

    def __init__(self, yard: SkillYard) -> None:
        self._yard = yard

    async def add(
        self, channel: str, recipient: str, expect: ExpectReply, key: str, *, role_id: str = "", org_id: str = ""
    ) -> dict[str, Any]:
        """Store one record; ``key`` is ``expect.key`` or, by default, the message id."""
        await self.prune()
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=expect.ttl_s)
        values = {
            "channel": channel,
            "recipient": recipient,
            "key": expect.key or key,
            "chain": expect.chain,
            "event": expect.event,
            "role_id": role_id,
            "org_id": org_id,
            "expires_at": expires,
        }
        sessions = await self._yard.database.session_factory()
        async with sessions() as session, session.begin():
            row = (await session.execute(insert(pending_replies).values(values).returning(pending_replies))).one()
        return _record(row)

    async def records(self) -> list[dict[str, Any]]:
        """Every record not yet expired, oldest first (matched ones show what they drove)."""
        await self.prune()
        sessions = await self._yard.database.session_factory()
        async with sessions() as session:
            rows = (await session.execute(select(pending_replies).order_by(pending_replies.c.id))).all()
        return [_record(row) for row in rows]

    async def prune(self) -> int:
        """Remove the expired records; how many went."""
        sessions = await self._yard.database.session_factory()
        async with sessions() as session, session.begin():
            result = await session.execute(delete(pending_replies).where(pending_replies.c.expires_at <= _now()))
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def reply(self, channel: str, sender: str, text: str) -> dict[str, Any] | None:
        """Match a reply to the oldest open record of (channel, sender) and drive it; None when none waits."""
        await self.prune()
        sessions = await self._yard.database.session_factory()
        async with sessions() as session, session.begin():
            row = (
                await session.execute(
                    select(pending_replies)
                    .where(
                        pending_replies.c.channel == channel,
                        pending_replies.c.recipient == sender,
                        pending_replies.c.matched_at.is_(None),
                        pending_replies.c.expires_at > _now(),
                    )
                    .order_by(pending_replies.c.id)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                )
            ).one_or_none()
            if row is None:
                return None
            await session.execute(
                update(pending_replies).where(pending_replies.c.id == row.id).values(matched_at=_now(), reply=text)
            )
        outcome = {"reply": text, **await self._drive(row, channel, sender, text)}
        async with sessions() as session, session.begin():
            await session.execute(
                update(pending_replies).where(pending_replies.c.id == row.id).values(outcome=outcome["outcome"])
            )
        return {**_record(row), "matched_at": _now().isoformat(), **outcome}

    async def _drive(self, row: Any, channel: str, sender: str, text: str) -> dict[str, Any]:
        if row.chain:
            trigger = {"reply": text, "from": sender, "channel": channel, "key": row.key}
            try:
                async with self._yard.chains() as chains:
                    run_id = await chains.start(row.chain, trigger)
            except SkillyardError as exc:  # the chain was removed meanwhile: the reply is kept, the failure named
                return {"outcome": f"chain {row.chain} could not start: {exc}"}
            return {"outcome": f"started chain {row.chain} (run {run_id})", "chain_run": run_id}
        payload = {"reply": text, "from": sender, "channel": channel, "key": row.key}
        try:
            delivery = await self._yard.agent_event(row.event, row.key, payload, org_id=row.org_id)
        except SkillyardError as exc:  # e.g. a key the agent runtime cannot correlate: the reply is kept
            return {"outcome": f"event {row.event} could not be delivered: {exc}", "event": row.event}
        waiting = len(delivery["deliveries"])
        how = f"resumed {waiting} waiting node(s)" if waiting else "kept 24 hours for a node that waits for it"
        return {
            "outcome": f"event {row.event} ({delivery['event_id']}): {how}",
            "event": row.event,
            "event_id": delivery["event_id"],
        }


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
