"""The queued job of one inbound message: a group message that does not mention the bot is dropped, the sender
becomes a person through the identity directory, a pending record it answers is driven (§9.2), otherwise the
message and its files (§4.7 attachments, :mod:`.files`) go to the binding's agent with ``reply_to`` set, and the
reply goes back through the channel's adapter.

Group chats are one session per chat, direct messages one per person. The job's arguments are the binding, the
event id and what the accepting process answers with (:func:`job_arguments`); the message waits in the hook-events
row until the job takes it.
"""

from __future__ import annotations

import hashlib
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...channels.adapter import CREDENTIALS_SKILL, ChannelError, ChatChannel, OutgoingMessage, SendContext
from ...channels.address import Address
from ...credentials import mask_secrets, masked_logger
from ...mcp.session import Caller
from ..auth import Principal
from ..display import turn_text
from ..settings import Binding, ServiceSettings
from . import dedup
from .files import fetch_inbound_files
from .inbound import Inbound

if TYPE_CHECKING:
    from ...yard import SkillYard
    from ..agents import Agents

log = masked_logger("skillyard.service.hooks")
#: How long a message waits for a running turn of its session (the platform retried long before).
LOCK_WAIT_S = 300.0
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
    adapter = yard.channels.adapter(bound.channel)
    if adapter is None:
        log.warning("inbound event %s of binding %r dropped: no %s channel is registered", message.event_id,
                    bound.name, bound.channel)  # fmt: skip
        return
    ctx = SendContext(bound.channel, configs, yard.channels.http(), yard, bound.org_id, bound.role_id)
    if message.group and not await _mentions_bot(adapter, message, ctx):
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
    reply_to = f"{bound.channel}:{message.chat}"
    turn = await agents.send(
        agent.profile.agent_code,
        session_id,
        principal,
        await _agent_message(yard, adapter, message, ctx, session_id),
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


async def _agent_message(
    yard: SkillYard, adapter: ChatChannel, message: Inbound, ctx: SendContext, session_id: str
) -> str:
    """What the agent is told: the message's text and a note for each file that could not be fetched; the files
    that could are attachments of the session (§4.7) by then."""
    if not message.files:
        return message.text
    workspace = Path(yard.workspace(session_id))
    fetched = await fetch_inbound_files(adapter, message, ctx, workspace, yard.settings.max_download_bytes)
    if fetched.paths:
        await yard.attach(session_id, fetched.paths)
    return "\n\n".join(part for part in (message.text, "\n".join(fetched.notes)) if part) or "(files)"


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


async def _mentions_bot(adapter: ChatChannel, message: Inbound, ctx: SendContext) -> bool:
    """A group message counts when it mentions the bot, as the channel's adapter tells; when it cannot tell (the
    bot's own id could not be fetched), the message is dropped with a log line."""
    try:
        return await adapter.mentions_bot(list(message.extra.get("mentions") or []), ctx)
    except ChannelError as exc:
        log.warning("a %s group message was dropped: whether it mentions the bot is unknown (%s)", ctx.channel, exc)
        return False
