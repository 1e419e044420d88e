"""``skillyard messages`` (the web channel's messages of a session) and ``skillyard pending list | reply`` (messages
waiting for an answer, §9.2; ``reply`` feeds an answer by hand until inbound channel hooks do)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ..cli.output import in_yard, print_json, print_table
from ..invoke.run import check_session_id

if TYPE_CHECKING:
    from ..yard import SkillYard


@click.command(name="messages")
@click.option("--session", "session_id", required=True, help="The web session whose messages to show.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True, help="How many, newest.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, oldest first.")
def messages_cmd(session_id: str, limit: int, as_json: bool) -> None:
    """Show the messages the web channel holds for a session (oldest first)."""
    from .web import session_messages

    check = _checked_session(session_id)

    async def work(yard: SkillYard) -> list[dict[str, Any]]:
        return await session_messages(yard.database, check, limit)

    messages = in_yard((), work)
    if as_json:
        print_json(messages)
        return
    if not messages:
        click.echo(f"session {check!r} has no web messages")
        return
    for message in messages:
        files = ", ".join(f["filename"] for f in message["files"])
        click.echo(
            f"[{message['created_at'][:19].replace('T', ' ')}] {message['text']}" + (f"  ({files})" if files else "")
        )


def _checked_session(session_id: str) -> str:
    from ..errors import InvalidInput

    try:
        return check_session_id(session_id)
    except InvalidInput as exc:
        raise click.UsageError(f"--session: {exc}") from None


@click.group(name="pending")
def pending_group() -> None:
    """Messages sent with expect_reply, waiting for their recipient's answer (docs/delivery.md#waiting-for-a-reply)."""


@pending_group.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, oldest first.")
def pending_list(as_json: bool) -> None:
    """List the records not yet expired (expired ones are pruned first)."""

    async def work(yard: SkillYard) -> list[dict[str, Any]]:
        return await yard.channels.pending.records()

    records = in_yard((), work)
    if as_json:
        print_json(records)
        return
    if not records:
        click.echo("no message is waiting for a reply")
        return
    rows = [
        [
            r["id"],
            f"{r['channel']}:{r['recipient']}",
            f"chain {r['chain']}" if r["chain"] else f"event {r['event']}",
            r["key"],
            r["expires_at"][:19].replace("T", " "),
            r["outcome"] or ("matched" if r["matched_at"] else "waiting"),
        ]
        for r in records
    ]
    print_table(rows, ["ID", "RECIPIENT", "DRIVES", "KEY", "EXPIRES (UTC)", "STATE"])


@pending_group.command(name="reply")
@click.option("--channel", required=True, help="The channel the reply came on (telegram, feishu, …).")
@click.option("--from", "sender", required=True, help="The sender's id on that channel (the recipient of the record).")
@click.option("--text", required=True, help="The reply's text.")
@click.option("--json", "as_json", is_flag=True, help="Print the matched record and what it drove as JSON.")
def pending_reply(channel: str, sender: str, text: str, as_json: bool) -> None:
    """Feed a reply by hand: the oldest waiting record of that sender drives its chain or event."""
    if not channel.strip() or not sender.strip():
        raise click.UsageError("--channel and --from must not be empty")

    async def work(yard: SkillYard) -> dict[str, Any] | None:
        return await yard.channels.pending.reply(channel.strip(), sender.strip(), text)

    matched = in_yard((), work)
    if as_json:
        print_json({"matched": matched is not None, "record": matched})
        return
    if matched is None:
        click.echo(f"no record waits for a reply from {channel}:{sender}; nothing was driven")
        return
    click.echo(f"matched record {matched['id']} (key {matched['key']}): {matched['outcome']}")
