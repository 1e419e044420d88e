"""send_message's own rules: every malformed field named with its fix and nothing sent; no credential of any
channel in envelopes, log lines or run records (searched for the plaintext)."""

from __future__ import annotations

import logging

import asyncpg
import pytest

from support.channels.vendors import FakeFeishu, FakeTelegram, WebhookReceiver
from support.datatable import asyncpg_dsn


@pytest.fixture
def telegram():
    api = FakeTelegram()
    with api.serving():
        yield api


@pytest.mark.parametrize(
    ("input", "field", "needle"),
    [
        ({"to": "telegram:1", "message": ""}, "message", "'message' is required"),
        ({"to": "12345", "message": "x"}, "to", "has no channel prefix"),
        ({"to": "telegram:", "message": "x"}, "to", "has no recipient id"),
        ({"to": [], "message": "x"}, "to", "'to' is required"),
        ({"to": "telegram:1", "message": "x", "format": "pdf"}, "format", "'format' is invalid"),
        ({"to": "telegram:1", "message": "x", "attach": "/etc/hostname"}, "attach", "outside the session's workspace"),
        ({"to": "telegram:1", "message": "x", "attach": ["file_3"]}, "attach", "nor an attachment ref"),
        ({"to": "telegram:@a", "message": "x"}, "to", "@channelusername"),
    ],
)
async def test_a_malformed_field_is_named_and_nothing_is_sent(host, telegram, input, field, needle):
    await host.configure(telegram_bot_token=telegram.TOKEN, telegram_api_base=telegram.base)
    result = await host.send(**input)
    assert result["ok"] is False and result["need_param"] == field and needle in result["error"], result
    assert telegram.requests == []


async def test_a_file_too_large_for_the_channel_sends_nothing(host, telegram):
    await host.configure(telegram_bot_token=telegram.TOKEN, telegram_api_base=telegram.base)
    big = host.workspace / "big.bin"
    with big.open("wb") as handle:
        handle.truncate(51 * 1024 * 1024)  # sparse: 51 MB on paper, nothing on disk
    result = await host.send(to=["telegram:1", "telegram:2"], message="x", attach=str(big))
    assert result["need_param"] == "attach" and "telegram takes files up to 50 MB" in result["error"]
    assert telegram.requests == []


async def test_no_credential_shows_in_envelopes_logs_or_run_records(host, db_env, caplog):
    feishu, telegram, hook = FakeFeishu(), FakeTelegram(), WebhookReceiver()
    with feishu.serving(), telegram.serving(), hook.serving():
        webhook = f"{hook.base}/hooks/SECRET-PATH-abcdef"
        await host.configure(
            feishu_app_id=feishu.APP_ID,
            feishu_app_secret=feishu.APP_SECRET,
            feishu_api_base=feishu.base,
            telegram_bot_token=telegram.TOKEN,
            telegram_api_base=telegram.base,
            webhook_url_ops=webhook,
        )
        caplog.set_level(logging.DEBUG)
        ok = await host.send(to=["feishu:ou_a", "telegram:5", "webhook:ops"], message="hello")
        telegram.fail_next[f"/bot{telegram.TOKEN}/sendMessage"] = [(500, {"ok": False, "error_code": 500})]
        failed = await host.send(to=["telegram:5", f"feishu:{FakeFeishu.UNKNOWN}"], message="again")
    assert ok["ok"] is True and failed["ok"] is False
    await host.yard.runlog.close()  # flush the run records
    conn = await asyncpg.connect(asyncpg_dsn(db_env))
    try:
        records = [dict(r) for r in await conn.fetch("SELECT * FROM skillyard.runs WHERE role_id = $1", host.role)]
    finally:
        await conn.close()
    assert records
    text = repr([ok, failed, records]) + "\n".join(r.getMessage() for r in caplog.records)
    for secret in (FakeFeishu.APP_SECRET, FakeTelegram.TOKEN, "SECRET-PATH-abcdef", webhook):
        assert secret not in text
    requests = [r.getMessage() for r in caplog.records if r.name == "httpx"]
    assert any("/bot***/sendMessage" in line for line in requests)  # httpx logged the URL, masked
