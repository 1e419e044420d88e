"""The Telegram adapter against a local Bot API: messages, photos and documents, and the Bot API's error answers
(401, chat not found, 429 with retry_after)."""

from __future__ import annotations

from support.channels.vendors import FakeTelegram


async def test_text_a_photo_and_a_document(host, telegram):
    await host.configure(telegram_bot_token=telegram.TOKEN, telegram_api_base=telegram.base)
    (host.workspace / "a.jpg").write_bytes(b"\xff\xd8 jpeg")
    (host.workspace / "b.csv").write_text("x,y\n1,2\n")
    result = await host.send(
        to="telegram:123456",
        message="<b>done</b>",
        format="html",
        attach=[str(host.workspace / "a.jpg"), str(host.workspace / "b.csv")],
    )
    assert result["ok"] is True
    [text] = telegram.sent("/sendMessage")
    assert text.json == {"chat_id": "123456", "text": "<b>done</b>", "parse_mode": "HTML"}
    assert telegram.sent("/sendPhoto")[0].files["photo"] == ("a.jpg", b"\xff\xd8 jpeg")
    assert telegram.sent("/sendDocument")[0].form["chat_id"] == "123456"


async def test_errors_map_onto_the_envelope(host, telegram):
    await host.configure(telegram_bot_token=telegram.TOKEN, telegram_api_base=telegram.base)
    unknown = await host.send(to=f"telegram:{FakeTelegram.UNKNOWN}", message="hi")
    assert unknown["error_type"] == "recoverable" and "chat not found" in unknown["error"]
    telegram.fail_next[f"/bot{telegram.TOKEN}/sendMessage"] = [telegram.rate_limit(7)]
    limited = await host.send(to="telegram:123456", message="hi")
    assert limited["error_type"] == "transient" and "wait 7 s" in limited["error"]
    await host.configure(telegram_bot_token="123:wrong-token-value")
    bad = await host.send(to="telegram:123456", message="hi")
    assert bad["error_type"] == "config" and bad["non_retriable"] is True


async def test_a_message_too_long_for_telegram_sends_nothing(host, telegram):
    await host.configure(telegram_bot_token=telegram.TOKEN, telegram_api_base=telegram.base)
    result = await host.send(to="telegram:123456", message="x" * 5000)
    assert result["need_param"] == "message" and "at most 4096" in result["error"]
    assert telegram.requests == []
