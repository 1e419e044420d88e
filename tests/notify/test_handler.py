"""notify end to end: Apprise's async notify to a local json:// receiver and a local SMTP server (with an
attachment), several targets at once, partial failure counted, and every bad field refused before sending."""

from __future__ import annotations

import email
import email.policy

import pytest


async def test_a_json_target_gets_the_message(host, receiver):
    await host.alias("ops", f"json://127.0.0.1:{receiver.base.rsplit(':', 1)[1]}/hook")
    result = await host.notify(message="3号机维修完成，费用 1200 元", title="维修完成", target="ops")
    assert result["ok"] is True and result["sent"] is True
    assert result["sent_count"] == 1 and result["failed_count"] == 0
    assert result["targets"] == [{"target": "ops", "sent": True}]
    [posted] = receiver.sent("/hook")
    assert posted.json["message"] == "3号机维修完成，费用 1200 元" and posted.json["title"] == "维修完成"


async def test_mailto_reaches_the_smtp_server_with_the_attachment(host, smtp):
    box, port = smtp
    await host.alias("mail", f"mailto://127.0.0.1:{port}?from=bot@example.com&to=ops@example.com")
    (host.workspace / "report.txt").write_text("monthly numbers")
    result = await host.notify(
        message="see attached", title="Report", target="mail", attach=str(host.workspace / "report.txt")
    )
    assert result["sent"] is True, result
    [envelope] = box.messages
    assert envelope.rcpt_tos == ["ops@example.com"]
    message = email.message_from_bytes(envelope.content, policy=email.policy.default)
    assert message["Subject"] == "Report"
    [attachment] = list(message.iter_attachments())
    assert attachment.get_filename() == "report.txt" and attachment.get_content() in (
        "monthly numbers",
        b"monthly numbers",
    )


async def test_several_targets_and_a_partial_failure_says_the_counts(host, receiver):
    port = receiver.base.rsplit(":", 1)[1]
    await host.alias("ops", f"json://127.0.0.1:{port}/ok")
    await host.alias("down", f"json://127.0.0.1:{port}/broken")
    result = await host.notify(message="hi", target=["ops", "down"])
    assert result["ok"] is False and result["sent"] is False
    assert result["sent_count"] == 1 and result["failed_count"] == 1
    assert result["targets"][0] == {"target": "ops", "sent": True}
    assert result["targets"][1]["target"] == "down" and result["targets"][1]["sent"] is False
    assert result["targets"][1]["error"] and "sent to 1 of 2 targets" in result["error"]


async def test_the_default_alias_serves_a_call_without_target(host, receiver):
    await host.alias("default", f"json://127.0.0.1:{receiver.base.rsplit(':', 1)[1]}/d")
    assert (await host.notify(message="hi"))["sent"] is True


@pytest.mark.parametrize(
    ("input", "field", "needle"),
    [
        ({"message": "  "}, "message", "'message' is required"),  # the platform's schema check
        ({"message": "x", "format": "rtf"}, "format", "'format' is invalid"),
        ({"message": "x", "target": "nope"}, "target", "not a notify alias of this role; known aliases: ops"),
        ({"message": "x", "target": "ops", "attach": "/etc/hostname"}, "attach", "outside the session's workspace"),
        ({"message": "x", "target": "ops", "attach": "relative.txt"}, "attach", "neither an absolute path"),
        ({"message": "x", "target": "ops", "attach": "file_9"}, "attach", "nor an attachment ref of this session"),
    ],
)
async def test_a_bad_field_is_named_and_nothing_is_sent(host, receiver, input, field, needle):
    await host.alias("ops", f"json://127.0.0.1:{receiver.base.rsplit(':', 1)[1]}/hook")
    result = await host.notify(**input)
    assert result["ok"] is False and result["need_param"] == field and needle in result["error"], result
    assert receiver.requests == []


async def test_no_alias_token_shows_in_envelopes_logs_or_run_records(host, receiver, db_env, caplog):
    import logging

    import asyncpg

    from support.datatable import asyncpg_dsn

    token = "s3cr3t-" + host.role
    port = receiver.base.rsplit(":", 1)[1]
    await host.alias("ops", f"json://bot:{token}@127.0.0.1:{port}/ok")
    await host.alias("down", f"json://bot:{token}@127.0.0.1:{port}/broken?+X-Key={token}")
    caplog.set_level(logging.DEBUG)
    result = await host.notify(message="hi", target=["ops", "down"])
    assert result["sent_count"] == 1
    await host.yard.runlog.close()
    conn = await asyncpg.connect(asyncpg_dsn(db_env))
    try:
        records = [dict(r) for r in await conn.fetch("SELECT * FROM skillyard.runs WHERE role_id = $1", host.role)]
    finally:
        await conn.close()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert records and any(r.name.startswith("apprise") for r in caplog.records)
    assert token not in repr(result) and token not in repr(records) and token not in logged
