"""The WeCom adapter against a local WeCom server API: access token from corp id and secret (refreshed once when
expired), users and parties, uploaded media, and WeCom's errcode answers (``invaliduser`` included)."""

from __future__ import annotations

import pytest

from support.channels.vendors import FakeWecom


@pytest.fixture
def wecom():
    api = FakeWecom()
    with api.serving():
        yield api


async def _configure(host, api, secret=FakeWecom.CORP_SECRET):
    await host.configure(
        wecom_corp_id=api.CORP_ID, wecom_corp_secret=secret, wecom_agent_id=api.AGENT_ID, wecom_api_base=api.base
    )


async def test_text_markdown_and_a_file_to_a_user_and_a_party(host, wecom):
    await _configure(host, wecom)
    (host.workspace / "week.xlsx").write_bytes(b"PK fake")
    result = await host.send(
        to=["wecom:zhangsan", "wecom:party:7"],
        message="**周报**",
        format="markdown",
        attach=[str(host.workspace / "week.xlsx")],
    )
    assert result["ok"] is True and result["delivered"] == ["wecom:zhangsan", "wecom:party:7"]
    sends = wecom.sent("/message/send")
    assert {(s.json.get("touser"), s.json.get("toparty"), s.json["msgtype"]) for s in sends} == {
        ("zhangsan", None, "markdown"),
        ("zhangsan", None, "file"),
        (None, "7", "markdown"),
        (None, "7", "file"),
    }
    assert all(s.json["agentid"] == 1000002 for s in sends)
    uploads = wecom.sent("/media/upload")
    assert uploads[0].query["type"] == "file" and uploads[0].files["media"] == ("week.xlsx", b"PK fake")
    assert wecom.issued == 1


async def test_an_expired_token_is_fetched_again_once(host, wecom):
    await _configure(host, wecom)
    assert (await host.send(to="wecom:zhangsan", message="one"))["ok"] is True
    wecom.expire_token()
    assert (await host.send(to="wecom:zhangsan", message="two"))["ok"] is True
    assert wecom.issued == 2


async def test_an_invalid_user_is_recoverable(host, wecom):
    await _configure(host, wecom)
    result = await host.send(to=["wecom:zhangsan", f"wecom:{FakeWecom.UNKNOWN}"], message="hi")
    assert result["delivered"] == ["wecom:zhangsan"]
    assert result["failed"][0]["error_type"] == "recoverable" and "not reachable" in result["failed"][0]["error"]


async def test_bad_credentials_and_a_rate_limit(host, wecom):
    await _configure(host, wecom, secret="not-the-secret")
    bad = await host.send(to="wecom:zhangsan", message="hi")
    assert bad["error_type"] == "config" and bad["non_retriable"] is True and "40001" in bad["error"]
    await _configure(host, wecom)
    wecom.fail_next["/cgi-bin/message/send"] = [(200, {"errcode": 45009, "errmsg": "api freq out of limit"})]
    limited = await host.send(to="wecom:zhangsan", message="hi")
    assert limited["failed"][0]["error_type"] == "transient"


async def test_an_answer_nested_past_what_json_reads_is_taken_as_one_that_is_not_json(host, wecom):
    """Python's json raises RecursionError past its depth: the answer is read as any body that is not JSON."""
    await _configure(host, wecom)
    answers = {}
    for body in (b"not json", b"[" * 5000 + b"]" * 5000):
        wecom.fail_next["/cgi-bin/message/send"] = [(200, body)]
        answers[body[:8]] = await host.send(to="wecom:zhangsan", message="hi")
    assert answers[b"[" * 8] == answers[b"not json"] and "RecursionError" not in str(answers), answers


async def test_a_missing_agent_id_names_the_config_to_set(host, wecom):
    await host.configure(wecom_corp_id=wecom.CORP_ID, wecom_corp_secret=wecom.CORP_SECRET, wecom_api_base=wecom.base)
    result = await host.send(to="wecom:zhangsan", message="hi")
    assert result["error_type"] == "config"
    assert (
        "wecom_agent_id" in result["error"] and "skillyard config set send_message wecom_agent_id=-" in result["error"]
    )
