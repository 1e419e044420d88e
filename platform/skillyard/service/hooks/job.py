"""The queued job of one inbound message: the sender becomes a person through the identity directory, a pending
record it answers is driven (§9.2), otherwise the message and its files (§4.7 attachments) go to the binding's
agent with ``reply_to`` set, and the reply goes back through the channel's adapter.

Group chats are one session per chat, direct messages one per person. The job's arguments are the binding and the
event id; the message waits in the hook-events row until the job takes it.
"""

from __future__ import annotations

import hashlib
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...channels.adapter import CREDENTIALS_SKILL, OutgoingMessage
from ...channels.address import Address
from ...credentials import mask_secrets, masked_logger
from ...mcp.session import Caller
from ..auth import Principal
from ..display import turn_text
from ..settings import Binding, ServiceSettings
from . import dedup
from .inbound import Inbound

if TYPE_CHECKING:
    from ...yard import SkillYard
    from ..agents import Agents

log = masked_logger("skillyard.service.hooks")
#: How long a message waits for a running turn of its session (the platform retried long before).
LOCK_WAIT_S = 300.0
MAX_FILE_BYTES = 50 * 1024 * 1024
#: The agents of a serving process, by yard and model: its jobs use the same loaded agents, locks and progress events.
_AGENTS: weakref.WeakKeyDictionary[Any, dict[str | None, Agents]] = weakref.WeakKeyDictionary()


def share_agents(yard: SkillYard, agents: Agents) -> None:
    _AGENTS.setdefault(yard, {})[agents.model] = agents


def _agents(yard: SkillYard, settings: ServiceSettings, model: str | None) -> Agents:
    by_model = _AGENTS.setdefault(yard, {})
    found = by_model.get(model)
    if found is None:  # a `skillyard worker` running a job it recovered
        from ..agents import Agents
        from ..bus import Bus
        from ..locks import TurnLocks
        from ..sessions import SessionOwners
        from ..turns import TurnEvents

        found = Agents(
            yard,
            SessionOwners(yard.database),
            TurnLocks(yard.database),
            TurnEvents(yard.database, Bus(yard)),
            agents_dir=settings.agents_dir,
            model=model,
        )
        by_model[model] = found
    return found


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:24]


def session_of(binding: Binding, message: Inbound) -> str:
    """One session per group chat, one per person in direct messages."""
    if binding.channel == "web":
        return message.chat
    if message.group:
        return f"{binding.name}-g-{_digest(message.chat)}"
    return f"{binding.name}-p-{_digest(message.sender)}"


def job_arguments(binding: str, event_id: str, agent: str, model: str | None) -> dict[str, Any]:
    """What the job of an inbound message needs, and nothing secret: the ids of its stored message, and the agent
    folder (or stored agent's code) and model spec the accepting process answers with, which a worker that
    recovers the job knows of no other way (``serve --agent`` and ``--model`` are that process's own)."""
    return {"binding": binding, "event_id": event_id, "agent": agent, "model": model}


async def process_inbound(
    yard: SkillYard, binding: str, event_id: str, agent: str | None = None, model: str | None = None
) -> None:
    """The job: one stored inbound message, answered once. The message leaves its row only under the session's
    turn lock, right before it is answered: a process that dies before then (waiting for a turn of the session,
    say) leaves it to the retry that a worker's stalled-job recovery makes."""
    settings = ServiceSettings.load(yard.settings.home)
    bound = settings.bindings.get(binding)
    if bound is None:
        log.warning("inbound event %s of binding %r dropped: the binding is no longer configured", event_id, binding)
        return
    stored = await dedup.stored_message(yard.database, binding, event_id)
    if stored is None:
        return  # answered by an earlier attempt
    message = Inbound.from_json(stored)
    agents = _agents(yard, settings, model or settings.model)
    session_id = session_of(bound, message)
    async with agents.locks.hold(session_id, wait_s=LOCK_WAIT_S):
        if await dedup.take_message(yard.database, binding, event_id) is None:
            return  # another attempt took it while this one waited
        configs = dict(await yard.configs.get(bound.role_id, CREDENTIALS_SKILL))
        secrets = [str(v) for v in configs.values() if v]
        with mask_secrets(secrets):
            await _process(yard, agents, agent or bound.agent, bound, message, configs, session_id)


async def _process(
    yard: SkillYard,
    agents: Agents,
    agent_spec: str,
    bound: Binding,
    message: Inbound,
    configs: dict[str, Any],
    session_id: str,
) -> None:
    if bound.channel == "telegram" and message.group and not await _mentions_bot(yard, message, configs):
        return
    if bound.channel != "web":
        for sender in dict.fromkeys([message.sender, message.chat]):
            matched = await yard.channels.pending.reply(bound.channel, sender, message.text)
            if matched is not None:
                log.info("inbound message of %s answered pending record %s: %s", bound.name, matched["id"],
                         matched.get("outcome"))  # fmt: skip
                return
    principal = _principal(bound, message)
    identity = dict(principal.caller.context)
    if bound.channel != "web":
        identity = dict(await yard.directory.fill(identity))
        principal = Principal(principal.name, Caller(principal.owner, identity), bound.org_id, bound.role_id, False)
    agent = await agents.by_spec(agent_spec)
    await agents.owners.claim(session_id, principal)
    paths = await _download(yard, bound, message, configs, session_id)
    if paths:
        await yard.attach(session_id, paths)
    reply_to = f"{bound.channel}:{message.chat}"
    turn = await agents.send(
        agent.profile.agent_code,
        session_id,
        principal,
        message.text or "(files)",
        {"channel": bound.channel, "reply_to": reply_to},
        wait_s=LOCK_WAIT_S,
    )
    text = turn_text(turn.as_dict(), bound.channel)
    if not text:
        return
    if bound.channel == "web":
        from ...channels.web import claim_session

        await claim_session(yard.database, session_id, bound.org_id)
    [outcome] = await yard.channels.send(
        [Address(bound.channel, message.chat)],
        OutgoingMessage(text, "markdown" if bound.channel in ("web", "feishu", "dingtalk") else "text"),
        role_id=bound.role_id,
        org_id=bound.org_id,
        configs=configs,
        conversation={"session_id": session_id, "reply_to": reply_to},
    )
    if not outcome.ok:
        log.warning("the reply to %s could not be sent: %s", reply_to, outcome.error)


def _principal(bound: Binding, message: Inbound) -> Principal:
    """Who the message's runs are: the binding's organisation and role, the sender as the person."""
    if bound.channel == "web":
        identity = dict(message.extra.get("identity") or {})
        owner = str(message.extra.get("owner") or message.sender)
        return Principal(
            owner, Caller(owner, identity), str(identity.get("org_id") or ""), str(identity.get("role_id") or ""), False
        )
    owner = f"binding:{bound.name}:{message.chat if message.group else message.sender}"
    identity = {
        "org_id": bound.org_id,
        "role_id": bound.role_id,
        "channel": bound.channel,
        "channel_account": message.sender,
        "user_id": message.sender,
        "actor_name": message.sender_name,
        "chat_mode": True,
        "allow_sql": False,
    }
    return Principal(f"binding:{bound.name}", Caller(owner, identity), bound.org_id, bound.role_id, False)


async def _mentions_bot(yard: SkillYard, message: Inbound, configs: dict[str, Any]) -> bool:
    """A Telegram group message counts when one of its mentions is this bot (its username from getMe)."""
    token = str(configs.get("telegram_bot_token") or "")
    base = str(configs.get("telegram_api_base") or "https://api.telegram.org").rstrip("/")
    mentions = {str(m).lower() for m in message.extra.get("mentions") or []}
    if not token or not mentions:
        return False
    answer = await yard.channels.http().get(f"{base}/bot{token}/getMe")
    username = str(((answer.json() or {}).get("result") or {}).get("username") or "") if answer.is_success else ""
    return bool(username) and f"@{username.lower()}" in mentions


async def _download(
    yard: SkillYard, bound: Binding, message: Inbound, configs: dict[str, Any], session_id: str
) -> list[Path]:
    """The message's files in the session's workspace (Telegram and Slack; the other channels' files are named in
    the log and not fetched)."""
    if not message.files:
        return []
    folder = Path(yard.workspace(session_id)) / "inbound"
    folder.mkdir(parents=True, exist_ok=True)
    http = yard.channels.http()
    paths = []
    for item in message.files[:10]:
        url, headers = None, {}
        if bound.channel == "telegram":
            token = str(configs.get("telegram_bot_token") or "")
            base = str(configs.get("telegram_api_base") or "https://api.telegram.org").rstrip("/")
            answer = await http.get(f"{base}/bot{token}/getFile", params={"file_id": item["file_id"]})
            file_path = ((answer.json() or {}).get("result") or {}).get("file_path") if answer.is_success else None
            url = f"{base}/file/bot{token}/{file_path}" if file_path else None
        elif bound.channel == "slack":
            url, headers = item.get("url"), {"Authorization": f"Bearer {configs.get('slack_bot_token') or ''}"}
        if not url:
            log.info("file %s of a %s message was not fetched", item.get("filename"), bound.channel)
            continue
        response = await http.get(url, headers=headers)
        if not response.is_success or len(response.content) > MAX_FILE_BYTES:
            log.warning("file %s of a %s message could not be fetched", item.get("filename"), bound.channel)
            continue
        name = Path(str(item.get("filename") or "file")).name or "file"
        target = folder / f"{message.event_id[:40]}-{name}".replace("/", "_")
        target.write_bytes(response.content)
        paths.append(target)
    return paths
