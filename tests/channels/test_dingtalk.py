"""The DingTalk adapter against a local DingTalk API: access token from app key and secret (refreshed once on
401), robot messages to users, media uploads, and DingTalk's error shapes."""

from __future__ import annotations

import pytest

from support.channels.vendors import FakeDingtalk


@pytest.fixture
def dingtalk():
    api = FakeDingtalk()
    with api.serving():
        yield api


async def _configure(host, api, secret=FakeDingtalk.APP_SECRET):
    await host.configure(
        dingtalk_app_key=api.APP_KEY,
        dingtalk_app_secret=secret,
        dingtalk_robot_code=api.ROBOT,
        dingtalk_api_base=api.base,
    )


async def test_text_and_an_image_reach_a_user(host, dingtalk):
    await _configure(host, dingtalk)
    (host.workspace / "chart.png").write_bytes(b"\x89PNG fake")
    result = await host.send(to="dingtalk:user01", message="图表已生成", attach=str(host.workspace / "chart.png"))
    assert result["ok"] is True
    sends = dingtalk.sent("/batchSend")
    assert [s.json["msgKey"] for s in sends] == ["sampleText", "sampleImageMsg"]
    assert sends[0].json["userIds"] == ["user01"] and sends[0].json["robotCode"] == FakeDingtalk.ROBOT
    assert '"photoURL": "@lADPfake"' in sends[1].json["msgParam"]
    assert dingtalk.sent("/media/upload")[0].query["type"] == "image"


async def test_an_expired_token_is_fetched_again_once(host, dingtalk):
    await _configure(host, dingtalk)
    assert (await host.send(to="dingtalk:user01", message="one"))["ok"] is True
    dingtalk.expire_token()
    assert (await host.send(to="dingtalk:user01", message="two"))["ok"] is True
    assert dingtalk.issued == 2


async def test_errors_map_onto_the_envelope(host, dingtalk):
    await _configure(host, dingtalk)
    unknown = await host.send(to=f"dingtalk:{FakeDingtalk.UNKNOWN}", message="hi")
    assert unknown["failed"][0]["error_type"] == "recoverable"
    dingtalk.fail_next["/v1.0/robot/oToMessages/batchSend"] = [
        (429, {"code": "Throttling.Api", "message": "请求被流控", "requestid": "r9"})
    ]
    limited = await host.send(to="dingtalk:user01", message="hi")
    assert limited["failed"][0]["error_type"] == "transient"
    await _configure(host, dingtalk, secret="wrong")
    bad = await host.send(to="dingtalk:user01", message="hi")
    assert bad["error_type"] == "config" and bad["non_retriable"] is True


async def test_a_group_recipient_goes_through_the_robots_group_send(host, dingtalk):
    await _configure(host, dingtalk)
    result = await host.send(to=["dingtalk:group:cidAbC+/1==", f"dingtalk:group:{FakeDingtalk.UNKNOWN_GROUP}"],
                             message="**周报**", format="markdown")  # fmt: skip
    assert result["delivered"] == ["dingtalk:group:cidAbC+/1=="]
    assert result["failed"][0]["error_type"] == "recoverable" and "resource.not.found" in result["failed"][0]["error"]
    sent = dingtalk.sent("/groupMessages/send")
    assert sorted(s.json["openConversationId"] for s in sent) == ["cidAbC+/1==", FakeDingtalk.UNKNOWN_GROUP]
    assert all(s.json["robotCode"] == FakeDingtalk.ROBOT and s.json["msgKey"] == "sampleMarkdown" for s in sent)
    assert dingtalk.sent("/batchSend") == []
