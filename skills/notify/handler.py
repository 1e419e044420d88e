"""notify: one-way pushes through Apprise (spec §9.2) — the entry point.

The input is checked whole before anything is sent (an empty message, a bad format, an attachment outside the
workspace, an unknown alias or scheme, a private host: a failure naming the field, nothing sent); then every target
is notified at once with Apprise's async notify, so a slow target never blocks the event loop. ``sent`` is the
success criterion: true only when every target was delivered (``ok`` equals it). No URL or token is ever returned:
targets are named by alias, raw URLs by Apprise's privacy form.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import apprise

from skillyard import mask_secrets, masked_logger, private_hosts_allowed
from skillyard.channels import AttachError, attach_files

from .targets import Target, TargetError, candidate_secrets, guard_hosts, resolve_targets, servers

FORMATS = {
    "text": apprise.NotifyFormat.TEXT,
    "markdown": apprise.NotifyFormat.MARKDOWN,
    "html": apprise.NotifyFormat.HTML,
}
MAX_MESSAGE = 100_000
# Apprise and urllib3 log targets' URLs: their credential parts are masked while a notify call runs.
masked_logger("apprise")
masked_logger("urllib3.connectionpool")
#: Seconds one notify call may take across all its targets (Apprise's own deadline).
NOTIFY_TIMEOUT_S = 60


def _refused(error: str, field: str, error_type: str = "recoverable") -> dict[str, Any]:
    return {
        "ok": False,
        "success": False,
        "sent": False,
        "sent_count": 0,
        "failed_count": 0,
        "targets": [],
        "error": f"{error}. Nothing was sent.",
        "need_param": field,
        "error_type": error_type,
        "non_retriable": error_type == "config",
    }


def _check_text(input_data: Mapping[str, Any]) -> tuple[str, str, str] | dict[str, Any]:
    message = input_data.get("message")
    if not isinstance(message, str) or not message.strip():
        return _refused('message is required: the text to send, e.g. "3号机维修完成"', "message")
    if len(message) > MAX_MESSAGE:
        return _refused(f"message has {len(message)} characters; send at most {MAX_MESSAGE} (attach a file)", "message")
    title = input_data.get("title")
    if title is not None and not isinstance(title, str):
        return _refused("title must be text", "title")
    format = input_data.get("format") or "text"
    if format not in FORMATS:
        return _refused(f"format must be one of text, markdown, html, not {format!r}", "format")
    return message, title or "", format


async def _notify(target: Target, message: str, title: str, format: str, attach: Any) -> dict[str, Any]:
    tag = list(target.tags) if target.tags else apprise.common.MATCH_ALL_TAG
    result = await target.notifier.async_notify(
        body=message, title=title, body_format=FORMATS[format], attach=attach, tag=tag, timeout=NOTIFY_TIMEOUT_S
    )
    if result.status == apprise.AppriseResultStatus.SUCCESS:
        return {"target": target.label, "sent": True}
    reasons = [
        entry.message
        for service in result.results
        if service.status != apprise.AppriseResultStatus.SUCCESS
        for entry in service.logs()
        if entry.level in ("WARNING", "ERROR")
    ]
    total = len(result.results)
    detail = reasons[-1] if reasons else f"Apprise answered {result.status.name.lower()}"
    failed = f"{result.failed_count} of {total} services failed: " if total > 1 else ""
    return {"target": target.label, "sent": False, "error": _hidden(failed + detail, target.secrets)}


def _hidden(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every credential part of the target's URLs (6 characters or more) replaced by ``***``."""
    for secret in sorted((s for s in secrets if len(s) >= 6), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


async def execute(input_data: dict[str, Any], runtime_context: Mapping[str, Any]) -> dict[str, Any]:
    """Check the whole input, then notify every target at once (see the module docstring)."""
    checked = _check_text(input_data)
    if isinstance(checked, dict):
        return checked
    message, title, format = checked
    configs = runtime_context.get("skill_args") or {}
    with mask_secrets(candidate_secrets(input_data.get("target"), configs)):  # Apprise logs URLs as it loads them
        try:
            files = attach_files(input_data.get("attach"), runtime_context["workspace_dir"])
            targets = resolve_targets(input_data.get("target"), configs)
            allow_private = private_hosts_allowed()
            for target in targets:
                if not servers(target):
                    raise TargetError(f"alias {target.label!r} has no URL with its tags {list(target.tags)}", "config")
                await guard_hosts(target, allow_private)
        except AttachError as exc:
            return _refused(str(exc), "attach")
        except TargetError as exc:
            return _refused(str(exc), "target", exc.error_type)
        attach = apprise.AppriseAttachment([str(f.path) for f in files]) if files else None
        outcomes = await asyncio.gather(*(_notify(t, message, title, format, attach) for t in targets))
    sent_count = sum(1 for o in outcomes if o["sent"])
    failed_count = len(outcomes) - sent_count
    envelope: dict[str, Any] = {
        "ok": failed_count == 0,
        "sent": failed_count == 0,
        "sent_count": sent_count,
        "failed_count": failed_count,
        "targets": list(outcomes),
    }
    if failed_count:
        failed = ", ".join(f"{o['target']} ({o['error']})" for o in outcomes if not o["sent"])
        envelope["error"] = f"sent to {sent_count} of {len(outcomes)} targets; not sent: {failed}"
        envelope["error_type"] = "transient"
    return envelope
