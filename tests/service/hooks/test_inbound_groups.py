"""Group chats end to end: a Feishu group message counts only when it mentions the bot's own open_id (from
``/bot/v3/info``, or ``feishu_bot_open_id`` when set); a DingTalk group message is answered in its group (the
robot's group send), a direct one to the person."""

from __future__ import annotations

import asyncio
import uuid

from skillyard.service.hooks import dedup
from support.channels.vendors import FakeDingtalk, FakeFeishu
from support.channels.webhooks import dingtalk_headers, feishu_encrypted, feishu_headers, feishu_message, sent

MESSAGE = "把标题为季度总结的笔记保存下来：收入增长 12%"
QUESTION = "保存这条笔记"  # the approval the notes agent asks for (examples/agents/notes/demo.yaml)


def _mention(open_id: str, number: int = 1) -> dict:
    return {"key": f"@_user_{number}", "id": {"open_id": open_id, "union_id": "on_x"}, "name": "someone"}


async def _feishu_group_message(hooked, mentioned: str) -> tuple[str, str]:
    """Post a group message mentioning ``mentioned``; its chat id and event id."""
    chat = "oc_" + uuid.uuid4().hex[:10]
    event = feishu_message("ou_ada", chat, "text", {"text": f"@_user_1 {MESSAGE}"}, group=True,
                           mentions=[_mention(mentioned)])  # fmt: skip
    body = feishu_encrypted(event)
    answer = await hooked.client().post("/hooks/feishu/feishu1", content=body, headers=feishu_headers(body))
    assert answer.status_code == 200
    return chat, event["header"]["event_id"]


async def _processed(hooked, binding: str, event_id: str) -> None:
    """Wait until the event's job has taken its message."""
    for _ in range(300):
        if await dedup.stored_message(hooked.yard.database, binding, event_id) is None:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the job of event {event_id} never ran")


async def test_a_feishu_group_message_counts_only_when_it_mentions_the_bot(hooked, feishu):
    other_chat, other_event = await _feishu_group_message(hooked, "ou_someone_else")
    bot_chat, _ = await _feishu_group_message(hooked, FakeFeishu.BOT_OPEN_ID)
    [reply] = await sent(feishu, "/im/v1/messages", lambda r: r.json["receive_id"] == bot_chat)
    assert reply.query["receive_id_type"] == "chat_id" and QUESTION in reply.json["content"]
    await _processed(hooked, "feishu1", other_event)
    assert not [r for r in feishu.sent("/im/v1/messages") if r.json["receive_id"] == other_chat]
    assert len(feishu.sent("/bot/v3/info")) == 1  # the bot's open_id, cached for the app


async def test_feishu_bot_open_id_set_in_the_configs_wins(hooked, feishu):
    role = hooked.app.state.service.settings.bindings["feishu1"].role_id
    await hooked.yard.configs.set(role, "send_message", {"feishu_bot_open_id": "ou_configured_bot"})
    api_bot_chat, api_bot_event = await _feishu_group_message(hooked, FakeFeishu.BOT_OPEN_ID)
    configured_chat, _ = await _feishu_group_message(hooked, "ou_configured_bot")
    await sent(feishu, "/im/v1/messages", lambda r: r.json["receive_id"] == configured_chat)
    await _processed(hooked, "feishu1", api_bot_event)
    assert not [r for r in feishu.sent("/im/v1/messages") if r.json["receive_id"] == api_bot_chat]
    assert feishu.sent("/bot/v3/info") == []


async def _post_dingtalk(hooked, callback: dict) -> None:
    answer = await hooked.client().post("/hooks/dingtalk/dingtalk1", json=callback, headers=dingtalk_headers())
    assert answer.status_code == 200


async def test_dingtalk_group_messages_are_answered_in_the_group_and_direct_ones_to_the_person(hooked, dingtalk):
    group, staff, other = (
        "cid" + uuid.uuid4().hex[:12] + "==",
        "staff" + uuid.uuid4().hex[:8],
        "x" + uuid.uuid4().hex[:8],
    )
    base = {"msgtype": "text", "text": {"content": MESSAGE}, "senderNick": "Ada", "robotCode": FakeDingtalk.ROBOT}
    await _post_dingtalk(hooked, {**base, "msgId": "g" + staff, "conversationType": "2", "conversationId": group,
                                  "isInAtList": True, "senderStaffId": staff})  # fmt: skip
    await _post_dingtalk(hooked, {**base, "msgId": "d" + other, "conversationType": "1", "conversationId": "cidP2P",
                                  "senderStaffId": other})  # fmt: skip
    [in_group] = await sent(dingtalk, "/groupMessages/send", lambda r: r.json["openConversationId"] == group)
    assert in_group.json["robotCode"] == FakeDingtalk.ROBOT and QUESTION in in_group.json["msgParam"]
    [direct] = await sent(dingtalk, "/oToMessages/batchSend", lambda r: r.json["userIds"] == [other])
    assert QUESTION in direct.json["msgParam"]
    assert not [r for r in dingtalk.sent("/batchSend") if r.json["userIds"] == [staff]]  # not to the group's sender
    assert [r.json["openConversationId"] for r in dingtalk.sent("/groupMessages/send")] == [group]
