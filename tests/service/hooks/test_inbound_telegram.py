"""Telegram end to end: the update verified by its secret token, acknowledged, processed as a job by the bound agent,
the reply sent to the fake Bot API on 127.0.0.1; a retry is dropped; groups count only messages mentioning the bot."""

from __future__ import annotations

import asyncio
import uuid

import pytest

MESSAGE = "把标题为季度总结的笔记保存下来：收入增长 12%"
HEADER = {"X-Telegram-Bot-Api-Secret-Token": "tg-secret-1"}


def update(chat: int, text: str, *, group: bool = False, update_id: int | None = None, sender: int | None = None,
           **extra) -> dict:  # fmt: skip
    message = {
        "message_id": 7,
        "from": {"id": sender or chat, "is_bot": False, "first_name": "Ada"},
        "chat": {"id": chat, "type": "group" if group else "private"},
        "date": 1767225600,
        "text": text,
        **extra,
    }
    return {"update_id": update_id or uuid.uuid4().int % 10**9, "message": message}


async def sent_to(telegram, chat: int, count: int = 1, timeout: float = 30) -> list:
    for _ in range(int(timeout * 10)):
        found = [r for r in telegram.sent("/sendMessage") if str(r.json["chat_id"]) == str(chat)]
        if len(found) >= count:
            return found
        await asyncio.sleep(0.1)
    pytest.fail(f"no reply to chat {chat}: {[r.path for r in telegram.requests]}")


async def test_a_direct_message_reaches_the_agent_and_the_reply_goes_back_once(hooked, telegram):
    client = hooked.client()
    chat = 500000 + uuid.uuid4().int % 10**5
    body = update(chat, MESSAGE)
    first = await client.post("/hooks/telegram/telegram1", json=body, headers=HEADER)
    assert first.status_code == 200
    retry = await client.post("/hooks/telegram/telegram1", json=body, headers=HEADER)
    assert retry.status_code == 200
    [reply] = await sent_to(telegram, chat)
    assert "保存这条笔记" in reply.json["text"]  # the approval's question
    await asyncio.sleep(1.0)
    assert len(await sent_to(telegram, chat)) == 1  # the retry was not processed again


async def test_forged_or_missing_secret_tokens_are_refused(hooked):
    client = hooked.client()
    body = update(1, "hi")
    forged = await client.post("/hooks/telegram/telegram1", json=body, headers={"X-Telegram-Bot-Api-Secret-Token": "x"})
    assert forged.status_code == 401 and forged.json()["error"] == "refused"
    assert (await client.post("/hooks/telegram/telegram1", json=body)).status_code == 401
    assert (await client.post("/hooks/telegram/nobinding", json=body, headers=HEADER)).status_code == 404
    assert (await client.post("/hooks/slack/telegram1", json=body, headers=HEADER)).status_code == 404


async def test_in_groups_only_messages_mentioning_the_bot_count(hooked, telegram):
    client = hooked.client()
    chat = -100000 - uuid.uuid4().int % 10**6
    plain = update(chat, "hello all", group=True)
    await client.post("/hooks/telegram/telegram1", json=plain, headers=HEADER)
    other = update(chat, "@someone_else hi", group=True, entities=[{"type": "mention", "offset": 0, "length": 13}])
    await client.post("/hooks/telegram/telegram1", json=other, headers=HEADER)
    text = "@yard_bot " + MESSAGE
    mention = update(chat, text, group=True, sender=31337, entities=[{"type": "mention", "offset": 0, "length": 9}])
    await client.post("/hooks/telegram/telegram1", json=mention, headers=HEADER)
    replies = await sent_to(telegram, chat)
    await asyncio.sleep(1.0)
    assert len([r for r in telegram.sent("/sendMessage") if str(r.json["chat_id"]) == str(chat)]) == len(replies) == 1


async def test_a_photo_becomes_an_attachment_of_the_session(hooked, telegram):
    client = hooked.client()
    chat = 700000 + uuid.uuid4().int % 10**5
    body = update(chat, "", photo=[{"file_id": "small"}, {"file_id": "BIGPHOTO"}], caption=MESSAGE)
    body["message"].pop("text")
    assert (await client.post("/hooks/telegram/telegram1", json=body, headers=HEADER)).status_code == 200
    await sent_to(telegram, chat)
    from skillyard.service.hooks.inbound import Inbound
    from skillyard.service.hooks.job import session_of
    from skillyard.service.hooks.telegram import parse  # noqa: F401  (the parser the hook used)

    binding = hooked.app.state.service.settings.bindings["telegram1"]
    session = session_of(binding, Inbound("x", str(chat), str(chat), ""))
    items = [a.as_dict() for a in await hooked.yard.attachments.for_session(session)]
    assert [i["filename"] for i in items] == [f"{body['update_id']}-photo_7.jpg"]
    assert telegram.sent("/getFile")[0].query["file_id"] == "BIGPHOTO"
