"""§9.2 pending records: send_message with expect_reply stores one per delivered recipient and returns at once; a
matching reply (same channel and sender, before expiry, first one wins) starts the chain it names with
``{reply, from, channel, key}``; ``skillyard pending list | reply`` show and feed them; expired ones are pruned."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import uuid

import pytest
from sqlalchemy import update

from skillyard import SkillYard
from skillyard.storage.tables import pending_replies
from support.cli import invoke, usage_error

ECHO = "async def execute(input, ctx):\n    return {'ok': True, 'got': input}\n"
CHAIN = """
name: {name}
steps:
  - id: answer
    skill: echo
    input: {{reply: "{{{{ trigger.reply }}}}", key: "{{{{ trigger.key }}}}", sender: "{{{{ trigger.from }}}}"}}
"""


@pytest.fixture
async def yard(db_env, make_skill, telegram):
    root = make_skill("echo", files={"handler.py": ECHO}).parent
    async with SkillYard([root]) as yard:
        await yard.configs.set(
            "pend", "send_message", {"telegram_bot_token": telegram.TOKEN, "telegram_api_base": telegram.base}
        )
        yield yard


def _sender() -> str:
    return str(uuid.uuid4().int % 10**9)


async def test_a_reply_starts_the_chain_with_the_reply_as_its_trigger(yard):
    chain = "approve_" + uuid.uuid4().hex[:8]
    async with yard.chains() as chains:
        await chains.add(chains.read(CHAIN.format(name=chain), f"{chain}.yaml"))
    who = _sender()
    sent = await yard.run(
        "send_message",
        {"to": f"telegram:{who}", "message": "Approve order 7?", "expect_reply": {"chain": chain, "ttl_s": 600}},
        {"role_id": "pend"},
    )
    assert sent["ok"] is True
    [pending] = sent["pending"]
    assert pending["to"] == f"telegram:{who}" and pending["key"]  # the default key: the message id
    records = [r for r in await yard.channels.pending.records() if r["recipient"] == who]
    assert len(records) == 1 and records[0]["chain"] == chain and records[0]["matched_at"] is None
    assert await yard.channels.pending.reply("telegram", "someone-else", "yes") is None
    matched = await yard.channels.pending.reply("telegram", who, "yes, approved")
    assert matched["chain_run"] and await yard.channels.pending.reply("telegram", who, "again") is None  # first wins
    async with yard.chains() as chains:
        run = await chains.get_run(matched["chain_run"])
    assert run["trigger"] == {"reply": "yes, approved", "from": who, "channel": "telegram", "key": pending["key"]}


async def test_an_event_record_is_delivered_to_the_agent_runtime(yard):
    who = _sender()
    sent = await yard.run(
        "send_message",
        {
            "to": f"telegram:{who}",
            "message": "ok?",
            "expect_reply": {"event": "confirmed", "key": "order-9", "ttl_s": 60},
        },
        {"role_id": "pend"},
    )
    assert sent["pending"][0]["key"] == "order-9"
    matched = await yard.channels.pending.reply("telegram", who, "ok")
    assert matched["event"] == "confirmed" and matched["event_id"].startswith("event_")
    assert "kept 24 hours" in matched["outcome"]  # no node waits for (confirmed, order-9) yet


async def test_expired_records_are_pruned_and_match_nothing(yard):
    who = _sender()
    await yard.run(
        "send_message",
        {"to": f"telegram:{who}", "message": "?", "expect_reply": {"event": "e", "ttl_s": 60}},
        {"role_id": "pend"},
    )
    sessions = await yard.database.session_factory()
    async with sessions() as session, session.begin():
        past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
        await session.execute(update(pending_replies).where(pending_replies.c.recipient == who).values(expires_at=past))
    assert await yard.channels.pending.reply("telegram", who, "late") is None
    assert not [r for r in await yard.channels.pending.records() if r["recipient"] == who]


@pytest.mark.parametrize(
    ("expect", "needle"),
    [
        ({"chain": "c"}, "ttl_s must be a number"),
        ({"ttl_s": 10}, "exactly one of chain"),
        ({"chain": "c", "event": "e", "ttl_s": 10}, "exactly one of chain"),
        ({"chain": "c", "ttl_s": 10, "wait": True}, "unknown fields ['wait']"),
        ("soon", "not of type 'object'"),  # the schema's own check comes first
    ],
)
async def test_a_bad_expect_reply_sends_nothing(yard, telegram, expect, needle):
    result = await yard.run(
        "send_message", {"to": "telegram:1", "message": "x", "expect_reply": expect}, {"role_id": "pend"}
    )
    assert result["need_param"] == "expect_reply" and needle in result["error"] and telegram.requests == []


async def test_the_pending_commands_list_and_feed_replies(yard):
    who = _sender()
    await yard.run(
        "send_message",
        {"to": f"telegram:{who}", "message": "?", "expect_reply": {"event": "answered", "ttl_s": 600}},
        {"role_id": "pend"},
    )
    listed = await asyncio.to_thread(invoke, "pending", "list", "--json")
    assert listed.exit_code == 0 and any(r["recipient"] == who for r in json.loads(listed.stdout))
    table = await asyncio.to_thread(invoke, "pending", "list")
    assert f"telegram:{who}" in table.stdout and "event answered" in table.stdout
    fed = await asyncio.to_thread(
        invoke, "pending", "reply", "--channel", "telegram", "--from", who, "--text", "done", "--json"
    )
    assert fed.exit_code == 0 and json.loads(fed.stdout)["matched"] is True
    again = await asyncio.to_thread(invoke, "pending", "reply", "--channel", "telegram", "--from", who, "--text", "x")
    assert "no record waits for a reply" in again.stdout


def test_pending_reply_needs_a_channel_and_a_sender():
    usage_error(invoke("pending", "reply", "--channel", " ", "--from", "1", "--text", "t"), "--channel and --from")
