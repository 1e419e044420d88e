"""Inbound files from Feishu, WeCom and DingTalk end to end: the hook's job fetches each file from the channel's
API on 127.0.0.1 (with the adapter's token) into the session's workspace, registers it as a §4.7 attachment, and
the agent's reply goes back; a file that cannot be fetched (refused, too large, too slow) becomes a note to the
agent without a secret in it, and the message is still answered."""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path

import pytest

from skillyard.service.hooks import files
from skillyard.service.hooks.inbound import Inbound
from skillyard.service.hooks.job import session_of
from support import FIXTURES
from support.channels.vendors import FakeDingtalk, FakeFeishu, FakeSlack, FakeWecom
from support.channels.webhooks import (
    SECRETS,
    dingtalk_headers,
    feishu_encrypted,
    feishu_headers,
    feishu_message,
    sent,
    slack_headers,
    wecom_callback,
)

PNG = b"\x89PNG\r\n\x1a\n fake image"
PDF = b"%PDF-1.4 fake report"
#: What the agent asks about a message of files only (the model's script).
QUESTION = "这份文件要保存成哪条笔记？"


@pytest.fixture
def agent_model() -> str:
    return f"script:{FIXTURES}/agents/notes_files_question.yaml"


def _session(hooked, binding: str, sender: str) -> str:
    bound = hooked.app.state.service.settings.bindings[binding]
    return session_of(bound, Inbound("x", sender, sender, ""))


async def _attachments(hooked, session: str) -> dict[str, bytes]:
    found = await hooked.yard.attachments.for_session(session)
    return {a.filename: Path(a.local_path).read_bytes() for a in found if a.local_path}


async def _said(hooked, session: str) -> str:
    """What the agent was told in the session (its user messages)."""
    view = await hooked.app.state.service.agents.session_view(session)
    return "\n".join(view["user_messages"]) if view else ""


def _no_secret_in(text: str, *apis) -> None:
    secrets = [*SECRETS.values(), FakeFeishu.APP_SECRET, FakeWecom.CORP_SECRET, FakeDingtalk.APP_SECRET]
    secrets += [api.valid for api in apis]  # the access tokens the adapters fetched
    assert not [s for s in secrets if s and s in text], text


async def _post_feishu(hooked, event: dict) -> None:
    body = feishu_encrypted(event)
    answer = await hooked.client().post("/hooks/feishu/feishu1", content=body, headers=feishu_headers(body))
    assert answer.status_code == 200


async def _post_wecom(hooked, fields: dict[str, str]) -> None:
    query, body = wecom_callback({"CreateTime": "1", "AgentID": FakeWecom.AGENT_ID, **fields})
    assert (await hooked.client().post("/hooks/wecom/wecom1", params=query, content=body)).status_code == 200


async def _post_dingtalk(hooked, callback: dict) -> None:
    answer = await hooked.client().post("/hooks/dingtalk/dingtalk1", json=callback, headers=dingtalk_headers())
    assert answer.status_code == 200


async def test_feishu_images_and_files_become_attachments(hooked, feishu):
    feishu.files |= {"img_v3_photo": (PNG, "image/png"), "file_v3_report": (PDF, "application/pdf")}
    ada, bob = "ou_" + uuid.uuid4().hex[:10], "ou_" + uuid.uuid4().hex[:10]
    image = feishu_message(ada, "oc_p2p1", "image", {"image_key": "img_v3_photo"})
    await _post_feishu(hooked, image)
    document = feishu_message(bob, "oc_p2p2", "file", {"file_key": "file_v3_report", "file_name": "季度报告.pdf"})
    await _post_feishu(hooked, document)
    await sent(
        feishu,
        "/im/v1/messages",
        lambda r: r.json["receive_id"] in (ada, bob) and QUESTION in r.json["content"],
        count=2,
    )
    event_id = image["header"]["event_id"][:40]
    assert await _attachments(hooked, _session(hooked, "feishu1", ada)) == {f"{event_id}-img_v3_photo.png": PNG}
    event_id = document["header"]["event_id"][:40]
    assert await _attachments(hooked, _session(hooked, "feishu1", bob)) == {f"{event_id}-季度报告.pdf": PDF}
    [fetched_image] = feishu.sent("/resources/img_v3_photo")
    assert (
        fetched_image.path
        == f"/open-apis/im/v1/messages/{image['event']['message']['message_id']}/resources/img_v3_photo"
    )
    assert (
        fetched_image.query == {"type": "image"} and fetched_image.headers["authorization"] == f"Bearer {feishu.valid}"
    )
    assert feishu.sent("/resources/file_v3_report")[0].query == {"type": "file"}


@pytest.mark.parametrize("localized", [False, True])
async def test_a_feishu_rich_text_message_gives_its_text_and_images(hooked, feishu, localized):
    key = f"img_v3_post{uuid.uuid4().hex[:6]}"
    feishu.files |= {key: (PNG, "image/png")}
    ada = "ou_" + uuid.uuid4().hex[:10]
    lines = [
        [{"tag": "text", "text": "看这张图 "}, {"tag": "a", "text": "链接", "href": "https://example.com"}],
        [{"tag": "img", "image_key": key}],
    ]
    post = {"title": "周报", "content": lines}
    message = feishu_message(ada, "oc_post", "post", {"zh_cn": post} if localized else post)
    await _post_feishu(hooked, message)
    await sent(feishu, "/im/v1/messages", lambda r: r.json["receive_id"] == ada)
    session = _session(hooked, "feishu1", ada)
    event_id = message["header"]["event_id"][:40]
    assert await _attachments(hooked, session) == {f"{event_id}-{key}.png": PNG}
    said = await _said(hooked, session)
    assert "周报" in said and "看这张图 链接" in said, said
    assert feishu.sent(f"/resources/{key}")[0].query == {"type": "image"}


async def test_a_file_feishu_refuses_is_a_note_to_the_agent(hooked, feishu):
    ada = "ou_" + uuid.uuid4().hex[:10]
    await _post_feishu(hooked, feishu_message(ada, "oc_p2p", "file", {"file_key": "file_gone", "file_name": "a.pdf"}))
    await sent(feishu, "/im/v1/messages", lambda r: r.json["receive_id"] == ada)
    session = _session(hooked, "feishu1", ada)
    said = await _said(hooked, session)
    assert "The file a.pdf sent with this message could not be fetched: feishu answered HTTP 400" in said
    _no_secret_in(said, feishu)
    assert await _attachments(hooked, session) == {}


async def test_wecom_images_by_media_id_or_pic_url_and_a_refused_file(hooked, wecom, caplog, monkeypatch):
    caplog.set_level(logging.INFO, logger="httpx")  # httpx logs each request's URL, the access token in its query
    monkeypatch.setenv("SKILLYARD_ALLOW_PRIVATE_URLS", "1")  # the fake image server of PicUrl is on 127.0.0.1
    wecom.files |= {"MEDIA_IMG": (PNG, "image/jpeg"), "pic1.jpg": (PNG, "image/jpeg")}
    users = [f"user{uuid.uuid4().hex[:8]}" for _ in range(3)]
    ids = [str(uuid.uuid4().int % 10**12) for _ in range(3)]  # MsgIds: events seen stay in the shared database
    await _post_wecom(hooked, {"FromUserName": users[0], "MsgType": "image", "MsgId": ids[0],
                               "PicUrl": f"{wecom.base}/pic/pic1.jpg", "MediaId": "MEDIA_IMG"})  # fmt: skip
    await _post_wecom(hooked, {"FromUserName": users[1], "MsgType": "image", "MsgId": ids[1],
                               "PicUrl": f"{wecom.base}/pic/pic1.jpg"})  # fmt: skip
    await _post_wecom(hooked, {"FromUserName": users[2], "MsgType": "file", "MsgId": ids[2],
                               "MediaId": "MEDIA_GONE", "FileName": "周报.xlsx"})  # fmt: skip
    await sent(wecom, "/message/send", lambda r: r.json.get("touser") in users and QUESTION in str(r.json), count=3)
    assert await _attachments(hooked, _session(hooked, "wecom1", users[0])) == {f"{ids[0]}-image_{ids[0]}.jpg": PNG}
    media_ids = {r.query["media_id"] for r in wecom.sent("/media/get")}
    assert media_ids == {"MEDIA_IMG", "MEDIA_GONE"}  # an image by its MediaId (with the token) when it has one
    assert len(wecom.sent("/pic/pic1.jpg")) == 1  # its PicUrl only when it has none
    assert await _attachments(hooked, _session(hooked, "wecom1", users[1])) == {f"{ids[1]}-image_{ids[1]}.jpg": PNG}
    said = await _said(hooked, _session(hooked, "wecom1", users[2]))
    assert "周报.xlsx" in said and "wecom refused it (errcode 40007: invalid media_id)" in said
    _no_secret_in(said, wecom)
    assert "/cgi-bin/media/get?access_token=***" in caplog.text
    _no_secret_in(caplog.text, wecom)


async def test_wecom_voice_and_video_are_fetched_by_media_id(hooked, wecom):
    amr, mp4 = b"#!AMR\n" + bytes(64), bytes(32) + b"ftypmp42"
    wecom.files |= {"MEDIA_VOICE": (amr, "audio/amr"), "MEDIA_VIDEO": (mp4, "video/mp4")}
    users = [f"user{uuid.uuid4().hex[:8]}" for _ in range(2)]
    ids = [str(uuid.uuid4().int % 10**12) for _ in range(2)]
    await _post_wecom(hooked, {"FromUserName": users[0], "MsgType": "voice", "MsgId": ids[0], "MediaId": "MEDIA_VOICE",
                               "Format": "amr", "Recognition": "明天开会"})  # fmt: skip
    await _post_wecom(hooked, {"FromUserName": users[1], "MsgType": "video", "MsgId": ids[1], "MediaId": "MEDIA_VIDEO",
                               "ThumbMediaId": "MEDIA_THUMB"})  # fmt: skip
    await sent(wecom, "/message/send", lambda r: r.json.get("touser") in users, count=2)
    voice = _session(hooked, "wecom1", users[0])
    assert await _attachments(hooked, voice) == {f"{ids[0]}-voice_{ids[0]}.amr": amr}
    assert "明天开会" in await _said(hooked, voice)  # WeCom's transcript is the message's text
    assert await _attachments(hooked, _session(hooked, "wecom1", users[1])) == {f"{ids[1]}-video_{ids[1]}.mp4": mp4}


async def test_a_pic_url_to_a_private_address_is_refused_with_a_note(hooked, wecom, monkeypatch):
    """PicUrl is a URL inside the message: only public addresses are fetched (the API's own URLs are configured)."""
    monkeypatch.delenv("SKILLYARD_ALLOW_PRIVATE_URLS", raising=False)
    wecom.files |= {"pic2.jpg": (PNG, "image/jpeg")}
    user, msg_id = f"user{uuid.uuid4().hex[:8]}", str(uuid.uuid4().int % 10**12)
    await _post_wecom(hooked, {"FromUserName": user, "MsgType": "image", "MsgId": msg_id,
                               "PicUrl": f"{wecom.base}/pic/pic2.jpg"})  # fmt: skip
    await sent(wecom, "/message/send", lambda r: r.json.get("touser") == user)
    assert not wecom.sent("/pic/pic2.jpg")  # never connected to
    said = await _said(hooked, _session(hooked, "wecom1", user))
    assert "could not be fetched: its address was refused: the host 127.0.0.1 is a loopback address" in said, said
    assert await _attachments(hooked, _session(hooked, "wecom1", user)) == {}


async def test_slack_files_follow_the_redirect_with_the_bot_token(hooked, slack):
    slack.files |= {"notes.pdf": (PDF, "application/pdf")}
    user, event_id = "U" + uuid.uuid4().hex[:8].upper(), "Ev" + uuid.uuid4().hex[:10]
    private = f"{slack.base}/files-pri"
    files = [{"id": "F1", "name": "notes.pdf", "url_private_download": f"{private}/T1-F1/notes.pdf"},
             {"id": "F2", "name": "gone.txt", "url_private_download": f"{private}/T1-F2/gone.txt"}]  # fmt: skip
    body = json.dumps(
        {"type": "event_callback", "event_id": event_id, "authorizations": [{"user_id": "UBOT"}],
         "event": {"type": "message", "channel_type": "im", "user": user, "channel": "D" + user[1:], "text": "see",
                   "ts": "1.2", "files": files}}
    ).encode()  # fmt: skip
    answer = await hooked.client().post("/hooks/slack/slack1", content=body, headers=slack_headers(body))
    assert answer.status_code == 200, answer.text
    await sent(slack, "/chat.postMessage", lambda r: (r.json or r.form).get("channel") == "D" + user[1:])
    session = _session(hooked, "slack1", user)
    assert await _attachments(hooked, session) == {f"{event_id}-notes.pdf": PDF}
    [fetched] = [r for r in slack.requests if r.path == "/files-cdn/notes.pdf"]
    assert fetched.headers["authorization"] == f"Bearer {FakeSlack.TOKEN}"  # kept: the redirect stayed on the host
    said = await _said(hooked, session)
    assert "The file gone.txt sent with this message could not be fetched: slack answered HTTP 404" in said, said
    assert FakeSlack.TOKEN not in said


async def test_dingtalk_pictures_files_and_rich_text(hooked, dingtalk):
    dingtalk.files |= {"dl-pic": (PNG, "image/png"), "dl-doc": (PDF, "application/pdf"), "dl-rich": (PNG, "image/png")}
    users = [f"staff{uuid.uuid4().hex[:8]}" for _ in range(3)]
    base = {"conversationType": "1", "senderNick": "Ada", "conversationId": "cidP2P=="}
    await _post_dingtalk(hooked, {**base, "msgtype": "picture", "msgId": "p" + users[0], "senderStaffId": users[0],
                                  "content": {"downloadCode": "dl-pic"}})  # fmt: skip
    await _post_dingtalk(hooked, {**base, "msgtype": "file", "msgId": "f" + users[1], "senderStaffId": users[1],
                                  "content": {"downloadCode": "dl-doc", "fileName": "合同.pdf"}})  # fmt: skip
    rich = {"richText": [{"text": "看这张图"}, {"type": "picture", "downloadCode": "dl-rich"}]}
    await _post_dingtalk(hooked, {**base, "msgtype": "richText", "msgId": "r" + users[2], "senderStaffId": users[2],
                                  "content": rich})  # fmt: skip
    await sent(
        dingtalk, "/batchSend", lambda r: r.json["userIds"][0] in users and QUESTION in r.json["msgParam"], count=3
    )
    assert await _attachments(hooked, _session(hooked, "dingtalk1", users[0])) == {f"p{users[0]}-picture_1.png": PNG}
    assert await _attachments(hooked, _session(hooked, "dingtalk1", users[1])) == {f"f{users[1]}-合同.pdf": PDF}
    session = _session(hooked, "dingtalk1", users[2])
    assert await _attachments(hooked, session) == {f"r{users[2]}-picture_1.png": PNG}
    assert "看这张图" in await _said(hooked, session)
    asked = dingtalk.sent("/messageFiles/download")
    assert {r.json["downloadCode"] for r in asked} == {"dl-pic", "dl-doc", "dl-rich"}
    assert all(r.json["robotCode"] == FakeDingtalk.ROBOT for r in asked)


@pytest.fixture
def small_downloads(monkeypatch):
    """Downloads capped at 1 KB (SKILLYARD_MAX_DOWNLOAD_MB, read when the served host is made) and at 1 s."""
    monkeypatch.setenv("SKILLYARD_MAX_DOWNLOAD_MB", str(1 / 1024))
    monkeypatch.setattr(files, "DOWNLOAD_TIMEOUT_S", 1.0)


async def test_too_large_and_too_slow_files_are_notes(small_downloads, hooked, dingtalk):
    dingtalk.files |= {"dl-big": (b"x" * 4096, "application/pdf"), "dl-slow": (PDF, "application/pdf")}
    dingtalk.slow["/files/dl-slow"] = 3.0
    staff = f"staff{uuid.uuid4().hex[:8]}"
    content = {
        "richText": [{"type": "picture", "downloadCode": "dl-big"}, {"type": "picture", "downloadCode": "dl-slow"}]
    }
    await _post_dingtalk(hooked, {"msgtype": "richText", "msgId": "m" + staff, "conversationType": "1",
                                  "senderStaffId": staff, "content": content})  # fmt: skip
    await sent(dingtalk, "/batchSend", lambda r: r.json["userIds"] == [staff])
    session = _session(hooked, "dingtalk1", staff)
    said = await _said(hooked, session)
    assert "picture_1 sent with this message could not be fetched: it is larger than the limit of 1 KB" in said
    assert "picture_2 sent with this message could not be fetched: dingtalk sent no complete file within 1 s" in said
    _no_secret_in(said, dingtalk)
    assert await _attachments(hooked, session) == {}
