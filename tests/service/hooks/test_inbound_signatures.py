"""Each channel's verification on the real server: the challenge answered, a signed (and, where the channel
encrypts, encrypted) message accepted and stored once, forged signatures, old timestamps and wrong keys refused."""

from __future__ import annotations

import json
import time
import uuid

from sqlalchemy import select

from skillyard.storage.tables import service_hook_events
from support.channels.webhooks import (
    dingtalk_headers,
    feishu_encrypted,
    feishu_headers,
    slack_headers,
    wecom_encrypt,
    wecom_query,
)


async def stored(served, binding: str, event_id: str) -> bool:
    sessions = await served.yard.database.session_factory()
    async with sessions() as session:
        row = await session.scalar(
            select(service_hook_events.c.event_id).where(
                service_hook_events.c.binding == binding, service_hook_events.c.event_id == event_id
            )
        )
    return row is not None


async def test_slack(hooked):
    client = hooked.client()
    challenge = json.dumps({"type": "url_verification", "challenge": "abc123"}).encode()
    answer = await client.post("/hooks/slack/slack1", content=challenge, headers=slack_headers(challenge))
    assert answer.json() == {"challenge": "abc123"}
    event_id = "Ev" + uuid.uuid4().hex[:10]
    body = json.dumps(
        {"type": "event_callback", "event_id": event_id, "authorizations": [{"user_id": "UBOT"}],
         "event": {"type": "message", "channel_type": "im", "user": "U1", "channel": "D1", "text": "hi", "ts": "1.2"}}
    ).encode()  # fmt: skip
    assert (await client.post("/hooks/slack/slack1", content=body, headers=slack_headers(body))).status_code == 200
    assert await stored(hooked, "slack1", event_id)
    forged = await client.post("/hooks/slack/slack1", content=body, headers=slack_headers(body, "wrong"))
    assert forged.status_code == 401 and "X-Slack-Signature" in forged.json()["detail"]
    old = await client.post("/hooks/slack/slack1", content=body, headers=slack_headers(body, at=int(time.time()) - 600))
    assert old.status_code == 401 and "5 minutes" in old.json()["detail"]
    tampered = body.replace(b"hi", b"ho")
    assert (await client.post("/hooks/slack/slack1", content=tampered, headers=slack_headers(body))).status_code == 401
    channel_message = json.dumps(
        {"type": "event_callback", "event_id": "Ev" + uuid.uuid4().hex[:10],
         "event": {"type": "message", "channel_type": "channel", "user": "U1", "channel": "C1", "text": "x"}}
    ).encode()  # fmt: skip
    await client.post("/hooks/slack/slack1", content=channel_message, headers=slack_headers(channel_message))
    assert not await stored(hooked, "slack1", json.loads(channel_message)["event_id"])


async def test_feishu(hooked):
    client = hooked.client()
    challenge = feishu_encrypted({"type": "url_verification", "challenge": "c-1", "token": "fs-verify-1"})
    answer = await client.post("/hooks/feishu/feishu1", content=challenge, headers=feishu_headers(challenge))
    assert answer.json() == {"challenge": "c-1"}
    event_id = uuid.uuid4().hex
    event = {
        "schema": "2.0",
        "header": {"event_id": event_id, "event_type": "im.message.receive_v1", "token": "fs-verify-1"},
        "event": {"sender": {"sender_id": {"open_id": "ou_ada"}, "sender_type": "user"},
                  "message": {"message_id": "om_1", "chat_id": "oc_1", "chat_type": "p2p", "message_type": "text",
                              "content": json.dumps({"text": "你好"})}},
    }  # fmt: skip
    body = feishu_encrypted(event)
    assert (await client.post("/hooks/feishu/feishu1", content=body, headers=feishu_headers(body))).status_code == 200
    assert await stored(hooked, "feishu1", event_id)
    wrong_token = feishu_encrypted({**event, "header": {**event["header"], "token": "nope"}})
    refused = await client.post("/hooks/feishu/feishu1", content=wrong_token, headers=feishu_headers(wrong_token))
    assert refused.status_code == 401 and "verification token" in refused.json()["detail"]
    wrong_key = feishu_encrypted(event, key="another key")
    assert (await client.post("/hooks/feishu/feishu1", content=wrong_key)).status_code == 401
    headers = feishu_headers(body) | {"X-Lark-Signature": "0" * 64}
    assert (await client.post("/hooks/feishu/feishu1", content=body, headers=headers)).status_code == 401
    plain = json.dumps(event).encode()
    assert (await client.post("/hooks/feishu/feishu1", content=plain)).status_code == 401  # must be encrypted


async def test_wecom(hooked):
    client = hooked.client()
    echo = wecom_encrypt(b"echo-1234")
    check = await client.get("/hooks/wecom/wecom1", params={**wecom_query(echo), "echostr": echo})
    assert check.status_code == 200 and check.text == "echo-1234"
    msg_id = str(uuid.uuid4().int % 10**12)
    inner = (
        "<xml><ToUserName>ww1234567890</ToUserName><FromUserName>zhangsan</FromUserName><CreateTime>1</CreateTime>"
        f"<MsgType>text</MsgType><Content>你好</Content><MsgId>{msg_id}</MsgId><AgentID>1</AgentID></xml>"
    ).encode()
    encrypted = wecom_encrypt(inner)
    outer = f"<xml><ToUserName>ww1234567890</ToUserName><Encrypt>{encrypted}</Encrypt></xml>"
    answer = await client.post("/hooks/wecom/wecom1", params=wecom_query(encrypted), content=outer)
    assert answer.status_code == 200 and await stored(hooked, "wecom1", msg_id)
    forged = await client.post("/hooks/wecom/wecom1", params=wecom_query(encrypted, "other"), content=outer)
    assert forged.status_code == 401 and "msg_signature" in forged.json()["detail"]
    other_corp = wecom_encrypt(inner, corp="ww_other")
    outer2 = f"<xml><Encrypt>{other_corp}</Encrypt></xml>"
    assert (await client.post("/hooks/wecom/wecom1", params=wecom_query(other_corp), content=outer2)).status_code == 401
    dtd = '<!DOCTYPE x [<!ENTITY a "b">]><xml><Encrypt>&a;</Encrypt></xml>'
    assert (await client.post("/hooks/wecom/wecom1", params=wecom_query("x"), content=dtd)).status_code == 400


async def test_dingtalk(hooked):
    client = hooked.client()
    msg_id = "msg" + uuid.uuid4().hex[:10]
    body = {"msgtype": "text", "text": {"content": "你好"}, "msgId": msg_id, "conversationType": "1",
            "senderStaffId": "staff1", "senderNick": "Ada"}  # fmt: skip
    assert (await client.post("/hooks/dingtalk/dingtalk1", json=body, headers=dingtalk_headers())).status_code == 200
    assert await stored(hooked, "dingtalk1", msg_id)
    assert (await client.post("/hooks/dingtalk/dingtalk1", json=body, headers=dingtalk_headers("x"))).status_code == 401
    old = dingtalk_headers(at=int(time.time() * 1000) - 2 * 3600 * 1000)
    assert (await client.post("/hooks/dingtalk/dingtalk1", json=body, headers=old)).status_code == 401
    group = {**body, "msgId": "g" + msg_id, "conversationType": "2", "isInAtList": False}
    await client.post("/hooks/dingtalk/dingtalk1", json=group, headers=dingtalk_headers())
    assert not await stored(hooked, "dingtalk1", "g" + msg_id)


async def test_web_needs_a_token_of_the_bindings_organisation(hooked):
    anonymous = await hooked.client().post("/hooks/web/web1", json={"message": "hi"})
    assert anonymous.status_code == 401
    stranger = hooked.client(await hooked.token(org="elsewhere"))
    assert (await stranger.post("/hooks/web/web1", json={"message": "hi"})).status_code == 403
    member = hooked.client(await hooked.token())
    answer = await member.post("/hooks/web/web1", json={"message": "hi", "session": "w-" + uuid.uuid4().hex[:6]})
    assert answer.status_code == 202 and answer.json()["accepted"] is True
    assert (await member.post("/hooks/web/web1", json={"message": ""})).status_code == 422
