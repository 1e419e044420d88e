"""Hostile and malformed inbound requests on the real server: a body of the wrong shape, even correctly signed, is a
JSON 400 (never a 500), an XML DTD is refused in any encoding, text the database cannot hold is cleaned, and a web
message names only its own fields and its sender's sessions."""

from __future__ import annotations

import json
import uuid

import pytest

from skillyard.service.hooks.inbound import Inbound
from skillyard.service.hooks.router import scrubbed
from skillyard.storage.session_owners import SessionOwners
from support.channels.webhooks import dingtalk_headers, feishu_encrypted, feishu_headers, slack_headers, wecom_query
from support.service import refused_cleanly

TELEGRAM = {"X-Telegram-Bot-Api-Secret-Token": "tg-secret-1"}


@pytest.mark.parametrize(
    "message",
    [
        {"from": "x", "chat": {"id": 1}, "text": "hi"},
        {"from": {"id": 1}, "chat": {"id": 1}, "photo": "x"},
        {"from": {"id": 1}, "chat": {"id": 1}, "text": "hi", "entities": [{"type": "mention"}]},
        {"from": {"id": 1}, "chat": {"id": 1}, "text": "hi", "entities": "x"},
        {"from": {"id": 1}, "chat": {"id": 1}, "document": {"file_id": 5}},
    ],
)
async def test_a_telegram_update_of_the_wrong_shape_is_a_400(hooked, message):
    body = {"update_id": 1, "message": message}
    refused_cleanly(await hooked.client().post("/hooks/telegram/telegram1", json=body, headers=TELEGRAM), 400)


@pytest.mark.parametrize(
    "body",
    [
        [],
        None,
        "x",
        {"type": "event_callback", "event": "x"},
        {"type": "event_callback", "event_id": "E1", "authorizations": "x",
         "event": {"type": "message", "channel_type": "im", "user": "U1", "channel": "D1", "text": "hi"}},
    ],
)  # fmt: skip
async def test_a_signed_slack_event_of_the_wrong_shape_is_a_400(hooked, body):
    raw = json.dumps(body).encode()
    refused_cleanly(await hooked.client().post("/hooks/slack/slack1", content=raw, headers=slack_headers(raw)), 400)


async def test_feishu_bodies_of_the_wrong_shape_are_400s_before_and_after_decryption(hooked):
    client = hooked.client()
    for unsigned in ({"header": "x"}, {"header": ["a"]}):
        refused_cleanly(await client.post("/hooks/feishu/feishu1", json=unsigned), 401)  # an encrypt key is set
    header = {"event_id": uuid.uuid4().hex, "event_type": "im.message.receive_v1", "token": "fs-verify-1"}
    wrong = [
        {"header": "x"},
        {"header": ["a"]},
        {"schema": "2.0", "header": header, "event": "x"},
        {"schema": "2.0", "header": header,
         "event": {"sender": {"sender_id": "x"}, "message": {"chat_id": "oc", "message_type": "text"}}},
    ]  # fmt: skip
    for payload in wrong:
        body = feishu_encrypted(payload)
        refused_cleanly(await client.post("/hooks/feishu/feishu1", content=body, headers=feishu_headers(body)), 400)


async def test_a_signed_dingtalk_message_of_the_wrong_shape_is_a_400(hooked):
    body = {"msgtype": "text", "text": "x", "msgId": "m1", "conversationType": "1", "senderStaffId": "s"}
    answer = await hooked.client().post("/hooks/dingtalk/dingtalk1", json=body, headers=dingtalk_headers())
    refused_cleanly(answer, 400)


async def test_json_nested_past_the_parsers_depth_is_a_400_on_every_channel(hooked):
    """Python's json raises RecursionError (not a ValueError) for deep nesting: each channel answers 400 for it."""
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    client = hooked.client()
    answers = [
        await client.post("/hooks/telegram/telegram1", content=deep, headers=TELEGRAM),
        await client.post("/hooks/slack/slack1", content=deep, headers=slack_headers(deep)),
        await client.post("/hooks/dingtalk/dingtalk1", content=deep, headers=dingtalk_headers()),
        await client.post("/hooks/feishu/feishu1", content=deep, headers=feishu_headers(deep)),
        await client.post("/hooks/web/web1", content=deep, headers={"Authorization": f"Bearer {await hooked.token()}"}),
    ]
    for answer in answers:
        refused_cleanly(answer, 400)


async def test_a_wecom_dtd_is_refused_in_utf16_too(hooked):
    """The entity bomb is refused before any signature check, whatever the document's encoding."""
    entities = "".join(f'<!ENTITY a{i} "{f"&a{i - 1};" * 10}">' for i in range(1, 4))
    xml = f'<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE x [<!ENTITY a0 "aaaaaaaaaa">{entities}]>'
    xml += "<xml><Encrypt>&a3;</Encrypt></xml>"
    answer = await hooked.client().post("/hooks/wecom/wecom1", params=wecom_query("x"), content=xml.encode("utf-16"))
    refused_cleanly(answer, 400)
    assert "DTD" in answer.json()["detail"]


async def test_web_messages_take_only_their_fields_and_their_senders_sessions(hooked):
    member = hooked.client(await hooked.token())
    taken = "w-" + uuid.uuid4().hex[:8]
    await SessionOwners(hooked.yard.database).claim(taken, "token:someone-else", hooked.org)
    refused_cleanly(await member.post("/hooks/web/web1", json={"message": "hijack", "session": taken}), 403)
    extra = await member.post("/hooks/web/web1", json={"message": "hi", "org_id": "beta", "is_admin": True})
    refused_cleanly(extra, 422)
    detail = extra.json()["detail"]
    assert extra.json()["error"] == "invalid_request" and "org_id: is not a field" in detail and "is_admin" in detail
    for blank in ({"message": ""}, {"message": " \n"}, {"message": 5}, {}, ["hi"], "hi"):
        empty = await member.post("/hooks/web/web1", json=blank)
        refused_cleanly(empty, 422)
        assert empty.json()["error"] == "invalid_request"
    for raw in (b"{", b"\xff\xfe", b"[" * 5000):
        refused_cleanly(await member.post("/hooks/web/web1", content=raw), 400)
    numbered = await member.post("/hooks/web/web1", json={"message": "hi", "event_id": 10**30})
    assert numbered.status_code == 202 and numbered.json()["event_id"] == str(10**30), numbered.text
    nul = await member.post("/hooks/web/web1", json={"message": "hi\u0000", "event_id": "\u0000" + uuid.uuid4().hex})
    assert nul.status_code == 202, nul.text


def test_text_the_database_cannot_hold_is_cleaned_from_an_inbound_message():
    message = Inbound(event_id="e\x00", sender="s\ud800", chat="c", text="a\x00b", files=[{"name": "f\x00"}])
    clean = Inbound(event_id="e\ufffd", sender="s\ufffd", chat="c", text="a\ufffdb", files=[{"name": "f\ufffd"}])
    assert scrubbed(message) == clean
