"""The Feishu adapter against a local Feishu Open API: tenant token cached and refreshed once, text, markdown,
images and files, and each error answer mapped onto the envelope."""

from __future__ import annotations

import pytest

from support.channels.vendors import FakeFeishu


@pytest.fixture
def feishu():
    api = FakeFeishu()
    with api.serving():
        yield api


async def _configure(host, api, secret=FakeFeishu.APP_SECRET):
    await host.configure(feishu_app_id=api.APP_ID, feishu_app_secret=secret, feishu_api_base=api.base)


async def test_text_and_files_reach_the_recipient_with_one_cached_token(host, feishu):
    await _configure(host, feishu)
    (host.workspace / "photo.png").write_bytes(b"\x89PNG fake")
    (host.workspace / "report.pdf").write_bytes(b"%PDF-1.4 fake")
    result = await host.send(
        to=["feishu:ou_alice", "feishu:oc_group"],
        message="您报修的 3号机 已修复。",
        attach=[str(host.workspace / "photo.png"), str(host.workspace / "report.pdf")],
    )
    assert result["ok"] is True and result["delivered"] == ["feishu:ou_alice", "feishu:oc_group"]
    assert feishu.issued == 1  # one token for both recipients and all six calls
    messages = feishu.sent("/im/v1/messages")
    assert sorted(m.query["receive_id_type"] for m in messages) == ["chat_id"] * 3 + ["open_id"] * 3
    assert {m.json["msg_type"] for m in messages} == {"text", "image", "file"}
    [image] = feishu.sent("/im/v1/images")[:1]
    assert image.files["image"] == ("photo.png", b"\x89PNG fake") and image.form["image_type"] == "message"
    assert feishu.sent("/im/v1/files")[0].form == {"file_type": "pdf", "file_name": "report.pdf"}


async def test_markdown_goes_as_a_post_with_an_md_element(host, feishu):
    await _configure(host, feishu)
    result = await host.send(to="feishu:on_union1", message="**done**", format="markdown")
    assert result["ok"] is True
    [message] = feishu.sent("/im/v1/messages")
    assert message.query["receive_id_type"] == "union_id" and message.json["msg_type"] == "post"
    assert '"tag": "md"' in message.json["content"]


async def test_an_expired_token_is_fetched_again_once(host, feishu):
    await _configure(host, feishu)
    assert (await host.send(to="feishu:ou_a", message="one"))["ok"] is True
    feishu.expire_token()
    assert (await host.send(to="feishu:ou_a", message="two"))["ok"] is True
    assert feishu.issued == 2


async def test_an_unknown_recipient_is_recoverable_and_the_others_still_get_it(host, feishu):
    await _configure(host, feishu)
    result = await host.send(to=["feishu:ou_alice", f"feishu:{FakeFeishu.UNKNOWN}"], message="hi")
    assert result["ok"] is False and result["delivered"] == ["feishu:ou_alice"]
    [failed] = result["failed"]
    assert failed["to"] == f"feishu:{FakeFeishu.UNKNOWN}" and failed["error_type"] == "recoverable"
    assert "230001" in failed["error"] and "delivered to 1 of 2 recipients" in result["error"]


async def test_bad_credentials_are_config_and_not_retriable(host, feishu):
    await _configure(host, feishu, secret="wrong-secret-value")
    result = await host.send(to="feishu:ou_alice", message="hi")
    assert result["ok"] is False and result["error_type"] == "config" and result["non_retriable"] is True
    assert "10014" in result["failed"][0]["error"]


async def test_a_rate_limit_is_transient(host, feishu):
    await _configure(host, feishu)
    feishu.fail_next["/open-apis/im/v1/messages"] = [
        (400, {"code": 99991400, "msg": "request trigger frequency limit"})
    ]
    result = await host.send(to="feishu:ou_alice", message="hi")
    assert result["failed"][0]["error_type"] == "transient" and result["non_retriable"] is False


async def test_a_recipient_of_the_wrong_form_sends_nothing(host, feishu):
    await _configure(host, feishu)
    result = await host.send(to=["feishu:ou_alice", "feishu:alice"], message="hi")
    assert result["ok"] is False and result["need_param"] == "to" and "ou_… (open_id)" in result["error"]
    assert feishu.requests == []
