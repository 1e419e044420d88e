"""send_message: a message to specific people on two-way channels (spec §9.2) — the entry point.

Recipients are ``"<channel>:<recipient id>"`` from business data. The whole input is checked before anything is sent
(message, format, every recipient's form, every file against the workspace and each channel's limits,
``expect_reply``); then every recipient is sent to at once through the channel registry's adapters. ``ok`` only when
every recipient got it; each failure names its recipient and its ``error_type``. With ``expect_reply`` a pending
record is stored per delivered recipient and the skill returns at once: it never waits for the reply.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from skillyard.channels import (
    AddressError,
    AttachError,
    ExpectReply,
    ExpectReplyError,
    OutgoingMessage,
    attach_files,
    parse_address,
)

FORMATS = ("text", "markdown", "html")
MAX_RECIPIENTS = 100


def _refused(error: str, field: str, error_type: str = "recoverable") -> dict[str, Any]:
    return {
        "ok": False,
        "success": False,
        "delivered": [],
        "failed": [],
        "error": f"{error}. Nothing was sent.",
        "need_param": field,
        "error_type": error_type,
        "non_retriable": error_type == "config",
    }


def _recipients(value: Any) -> list[str] | dict[str, Any]:
    if isinstance(value, str) and value.strip():
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        if len(value) > MAX_RECIPIENTS:
            return _refused(f"to has {len(value)} recipients; send to at most {MAX_RECIPIENTS} at once", "to")
        return list(dict.fromkeys(v.strip() for v in value))
    return _refused(
        "to is required: '<channel>:<recipient id>' (e.g. 'feishu:ou_…', 'telegram:12345') or a list of them, "
        "taken from business data (the order's origin channel and id), never from actor_*",
        "to",
    )


async def execute(input_data: dict[str, Any], runtime_context: Mapping[str, Any]) -> dict[str, Any]:
    """Check the whole input, then send to every recipient at once (see the module docstring)."""
    registry = runtime_context.get("channel_registry")
    if registry is None:
        return _refused(
            "no channel registry in runtime_context: send_message runs in-process through skillyard (yard.run, "
            "call_skill or a chain), not as a script of its own",
            "to",
            "config",
        )
    message = input_data.get("message")
    if not isinstance(message, str) or not message.strip():
        return _refused("message is required: the text to send", "message")
    format = input_data.get("format") or "text"
    if format not in FORMATS:
        return _refused(f"format must be one of {', '.join(FORMATS)}, not {format!r}", "format")
    to = _recipients(input_data.get("to"))
    if isinstance(to, dict):
        return to
    try:
        addresses = [parse_address(item, registry.names()) for item in to]
        files = attach_files(input_data.get("attach"), runtime_context["workspace_dir"])
        expect = ExpectReply.parse(input_data["expect_reply"]) if input_data.get("expect_reply") is not None else None
    except AddressError as exc:
        return _refused(str(exc), "to")
    except AttachError as exc:
        return _refused(str(exc), "attach")
    except ExpectReplyError as exc:
        return _refused(str(exc), "expect_reply")
    outgoing = OutgoingMessage(message, format, tuple(files))
    problems = registry.problems(addresses, outgoing)
    if problems:
        field, problem = problems[0]
        return _refused(problem, field)
    role_id, org_id = str(runtime_context.get("role_id") or ""), str(runtime_context.get("org_id") or "")
    outcomes = await registry.send(
        addresses, outgoing, role_id=role_id, org_id=org_id, configs=runtime_context.get("skill_args") or {}
    )
    envelope: dict[str, Any] = {
        "ok": all(o.ok for o in outcomes),
        "delivered": [str(o.address) for o in outcomes if o.ok],
        "failed": [
            {"to": str(o.address), "error": str(o.error), "error_type": o.error.error_type}
            for o in outcomes
            if o.error is not None
        ],
    }
    if expect is not None:
        envelope["pending"] = [await _pending(registry, o, expect, role_id, org_id) for o in outcomes if o.ok]
    if envelope["failed"]:
        errors = [o.error for o in outcomes if o.error is not None]
        envelope["error"] = (
            f"delivered to {len(envelope['delivered'])} of {len(outcomes)} recipients; failed: "
            + "; ".join(f"{f['to']}: {f['error']}" for f in envelope["failed"])
        )
        envelope["error_type"] = errors[0].error_type
        envelope["non_retriable"] = all(e.non_retriable for e in errors)
    return envelope


async def _pending(registry: Any, outcome: Any, expect: ExpectReply, role_id: str, org_id: str) -> dict[str, Any]:
    """Store the record a reply of this recipient will match; its key defaults to the channel's message id."""
    key = outcome.message_id or uuid.uuid4().hex
    record = await registry.pending.add(
        outcome.address.channel, outcome.address.recipient, expect, key, role_id=role_id, org_id=org_id
    )
    return {"to": str(outcome.address), "key": record["key"], "expires_at": record["expires_at"]}
