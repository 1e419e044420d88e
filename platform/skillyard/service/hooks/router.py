"""``/hooks/{channel}/{binding}``: the binding names the channel, the role whose ``send_message`` configs hold the
inbound secrets and the agent that answers. The request is verified and acknowledged at once; a message for the
bot is stored (de-duplicated by the channel's event id) and processed by a queued job."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ...channels.adapter import CREDENTIALS_SKILL
from ...storage.text import storable
from ..api.deps import service_of
from ..errors import ApiError, not_found
from . import dedup, dingtalk, feishu, slack, telegram, web, wecom
from .inbound import HookRefused, Inbound, Parsed

router = APIRouter(tags=["hooks"])
_CODES = {400: "bad_request", 422: "invalid_request"}
PARSERS: dict[str, Callable[[Request, bytes, dict[str, Any]], Awaitable[Parsed]]] = {
    "telegram": telegram.parse,
    "slack": slack.parse,
    "feishu": feishu.parse,
    "wecom": wecom.parse,
    "dingtalk": dingtalk.parse,
}


@router.get("/hooks/{channel}/{binding}", summary="A channel's URL check (WeCom)", operation_id="hook_check")
@router.post("/hooks/{channel}/{binding}", summary="A chat channel's webhook", operation_id="hook_event")
async def hook(request: Request, channel: str, binding: str) -> Response:
    service = service_of(request)
    bound = service.settings.bindings.get(binding)
    if bound is None or bound.channel != channel:
        raise not_found(
            f"no binding {binding!r} of channel {channel!r}", "add [service.bindings.NAME] to settings.toml"
        )
    body = await request.body()
    try:
        if channel == "web":
            principal = await service.auth.principal(request)
            await service.limiter.check(principal.name)
            if bound.org_id != principal.org_id:
                raise ApiError(403, "forbidden", "the token is of another organisation than this binding", "use yours")
            parsed = await _parsed(channel, web.parse(request, body, principal))
            session = parsed.message.chat if parsed.message is not None else ""
            known = await service.owners.owner(session)
            if known is not None and known[0] != principal.owner:  # the job would refuse it: say so now
                raise ApiError(403, "forbidden", f"session {session!r} belongs to another identity", "use yours")
        else:
            if request.method == "GET" and channel != "wecom":
                raise ApiError(405, "method_not_allowed", f"{channel} posts its events", "use POST")
            configs = await service.yard.configs.get(bound.role_id, CREDENTIALS_SKILL)
            parsed = await _parsed(channel, PARSERS[channel](request, body, dict(configs)))
    except HookRefused as exc:
        raise ApiError(exc.status, _CODES.get(exc.status, "refused"), exc.detail, exc.fix) from None
    message = scrubbed(parsed.message) if parsed.message is not None else None
    wanted = message is not None and message.mentioned and bool(message.text.strip() or message.files)
    if (
        message is not None
        and wanted
        and await dedup.first_time(service.yard.database, binding, message.event_id, message.as_json())
    ):
        await service.enqueue_inbound(binding, message.event_id)
    return parsed.response


async def _parsed(channel: str, parsing: Awaitable[Parsed]) -> Parsed:
    """The parser's result; a body of the wrong shape (a field of another type than the channel sends) is a 400
    naming what broke, not a crash: the parsers read what the channel's documentation promises (and Python's json
    raises RecursionError, not ValueError, for nesting past its depth)."""
    try:
        return await parsing
    except (AttributeError, KeyError, TypeError, ValueError, RecursionError) as exc:
        raise HookRefused(
            400,
            f"the body is not the shape {channel} sends ({type(exc).__name__}: {str(exc)[:200]})",
            f"send the {channel} platform's own request",
        ) from None


def scrubbed(message: Inbound) -> Inbound:
    """The message with the text PostgreSQL cannot store (NUL, half of a surrogate pair) replaced: a chat user may
    send it, and the platform would only retry a refusal."""
    return Inbound.from_json(storable(message.as_json()))
