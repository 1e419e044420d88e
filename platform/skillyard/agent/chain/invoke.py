"""The call itself and §14.4: how a failed envelope is classified.

The business skill runs through ``yard.run``'s pipeline with the caller's identity, the session id and, for writes, the
idempotency key in its runtime_context. The envelope says what went wrong (envelope.py, invoke/pipeline.py):

* ``timed_out`` (the wall clock, or an HTTP timeout) → ``TOOL_TIMEOUT``;
* ``exception_type`` ``ConnectionRefusedError`` or a subclass (in-process, or an HTTP skill's refused connection)
  → ``TOOL_UNREACHABLE``; any other ``OSError`` subclass → ``TOOL_IO_ERROR``; any other exception →
  ``TOOL_ERROR``. Classes the runtime cannot import (``URLError``, a skill's own ``OSError`` subclass) are judged
  by ``exception_family``, the nearest built-in class the envelope names;
* the platform's refusal of the input (``invalid_input: true``, envelope.input_rejected) → a params error
  (``MCP_INVALID_PARAMS``); a skill's own ``need_param`` failure is a business failure like any other;
* an MCP tool's failure names its case in ``mcp_error`` (mcp/results.py), mapped as §14.4 / §17 say:
  ``tool_error`` → ``MCP_TOOL_ERROR``, ``invalid_params`` → ``MCP_INVALID_PARAMS``, ``rpc_error`` →
  ``MCP_RPC_ERROR`` (a write's effect is then unknown), ``timeout`` / ``io`` / ``unreachable`` / ``error`` as above;
* any other failure envelope (``success``/``ok`` false) is a business failure, judged by the response contract.
"""

from __future__ import annotations

import asyncio
import builtins
import socket
import ssl
from collections.abc import Awaitable
from enum import Enum
from typing import TYPE_CHECKING, Any

from ...channels.artifacts import DEFER_KEY
from ...envelope import exception_family, is_failure
from ..codes import ErrorCode
from ..state import EvidenceStatus

if TYPE_CHECKING:
    from .base import ChainCall


class Failure(Enum):
    """What kind of failure an envelope reports (None of these: the call returned)."""

    TIMEOUT = ErrorCode.TOOL_TIMEOUT
    UNREACHABLE = ErrorCode.TOOL_UNREACHABLE
    IO = ErrorCode.TOOL_IO_ERROR
    PARAMS = ErrorCode.MCP_INVALID_PARAMS
    ERROR = ErrorCode.TOOL_ERROR
    MCP_TOOL = ErrorCode.MCP_TOOL_ERROR
    MCP_RPC = ErrorCode.MCP_RPC_ERROR

    @property
    def code(self) -> ErrorCode:
        return ErrorCode(self.value)

    def status(self, write: bool) -> EvidenceStatus:
        """§14.4: reads always FAILED; writes UNKNOWN unless the failure is certain (unreachable, params, a tool
        that answered with isError)."""
        if not write or self in (Failure.UNREACHABLE, Failure.PARAMS, Failure.MCP_TOOL):
            return EvidenceStatus.FAILED
        return EvidenceStatus.UNKNOWN


def _exception_class(name: str) -> type[BaseException] | None:
    for module in (builtins, socket, ssl, asyncio):
        found = getattr(module, name, None)
        if isinstance(found, type) and issubclass(found, BaseException):
            return found
    return None


def failed(envelope: Any) -> bool:
    """``success`` or ``ok`` says failure (:func:`is_failure`, asked only of a flag that is not True or missing)."""
    if not isinstance(envelope, dict):
        return False
    success, ok = envelope.get("success"), envelope.get("ok")
    return (success is not True and success is not None and is_failure(success)) or (
        ok is not True and ok is not None and is_failure(ok)
    )


def classify(envelope: dict[str, Any]) -> Failure | None:
    """The §14.4 class of a failed envelope, or None (success, or a business failure)."""
    if not failed(envelope):
        return None
    return failure_kind(envelope)


def failure_kind(envelope: dict[str, Any]) -> Failure | None:
    """:func:`classify` of an envelope already known to be failed (``failed(envelope)``): None is a business
    failure."""
    mcp = envelope.get("mcp_error")
    if mcp is not None:
        return MCP_FAILURES.get(mcp, Failure.ERROR)
    if envelope.get("timed_out"):
        return Failure.TIMEOUT
    kind = envelope.get("exception_type")
    if isinstance(kind, str) and kind:
        family = envelope.get("exception_family")  # the nearest built-in class: subclasses classify as it does
        cls = _exception_class(family if isinstance(family, str) and family else kind)
        if cls is not None and issubclass(cls, ConnectionRefusedError):
            return Failure.UNREACHABLE
        if cls is not None and issubclass(cls, OSError):
            return Failure.IO
        return Failure.ERROR
    if envelope.get("invalid_input") is True:  # the platform refused the input; a skill's own need_param is business
        return Failure.PARAMS
    return None


#: ``mcp_error`` of an MCP tool's failure envelope (mcp/results.py) → its class.
MCP_FAILURES = {
    "tool_error": Failure.MCP_TOOL,
    "invalid_params": Failure.PARAMS,
    "rpc_error": Failure.MCP_RPC,
    "timeout": Failure.TIMEOUT,
    "io": Failure.IO,
    "unreachable": Failure.UNREACHABLE,
    "error": Failure.ERROR,
}


def result_root(call: ChainCall, envelope: Any) -> Any:
    """What the response contract's paths read: an MCP tool's ``data`` (the JSON of its text, the TEXT view) or
    ``structured`` (``resultView: STRUCTURED``) — absent views read as an empty object; any other skill's whole
    envelope."""
    skill = call.catalog_skill
    if skill is None or skill.exec.type != "MCP" or not isinstance(envelope, dict):
        return envelope
    view = envelope.get("structured" if call.plan.structured else "data")
    return view if view is not None else {}


def runtime_context(call: ChainCall) -> dict[str, Any]:
    """The caller's identity, the session id and, for writes, the idempotency key."""
    ctx = call.ctx
    context: dict[str, Any] = {**ctx.session.identity, "session_id": ctx.session.id}
    context[DEFER_KEY] = ctx.node.id  # §6.3 step 3: the node's artifacts reach reply_to once, at the end of the turn
    if call.plan.write and call.idempotency_key:
        context["idempotency_key"] = call.idempotency_key
    return context


def start(call: ChainCall) -> Awaitable[dict[str, Any]]:
    """The business skill's run, to await once (never retried): a skill_md tool runs as a sub-agent, any other
    skill through ``yard.run`` (the public run API; its context is a fresh mapping, no turn).
    Await it under ``try`` and turn an exception into an envelope with :func:`crashed` (:func:`run` does both)."""
    skill = call.catalog_skill  # the arg policy resolved it (None: resolve it here)
    if skill is None:
        found = call.ctx.yard.resolve(call.tool)
        skill = found[0] if found is not None else None
    ctx = call.ctx
    if skill is not None and skill.skill_type == "skill_md" and ctx.model is not None and ctx.sub_agent is not None:
        return ctx.sub_agent(ctx, skill, call.args)
    return ctx.yard.run(call.tool, call.args, runtime_context(call))


def crashed(call: ChainCall, exc: Exception) -> dict[str, Any]:
    """The envelope of a call the platform itself failed (the §14.4 class comes from ``exception_type``)."""
    message = str(exc).strip() or exc.__class__.__name__
    return {
        "ok": False,
        "success": False,
        "error": f"calling {call.tool!r} failed: {message}",
        "exception_type": exc.__class__.__name__,
        "exception_family": exception_family(exc.__class__),
    }


async def run(call: ChainCall) -> dict[str, Any]:
    """Run the business skill once (never retried); an exception of the platform itself becomes an envelope."""
    try:
        return await start(call)
    except Exception as exc:
        return crashed(call, exc)
