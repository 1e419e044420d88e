"""An MCP tool's result as a skill envelope, keeping both views, and every way a call can fail as one.

The envelope is ``{ok, text, data, structured, content}``: ``text`` the joined text blocks, ``data`` the JSON parsed
from them (absent when they are not JSON), ``structured`` the ``structuredContent`` (absent when the tool sent
none), ``content`` a summary of every other block. Images, audio and embedded resources are written to the run's
workspace and declared in ``images`` / ``audios`` / ``files``, so the platform registers them as artifacts.

Failures carry ``mcp_error`` (the agent runtime maps it to its §17 code, chain/invoke.py) and an ``error_type``:

=================  ==========================================  ===============
``mcp_error``      case                                        ``error_type``
=================  ==========================================  ===============
``tool_error``     the result has ``isError``                  recoverable
``invalid_params`` JSON-RPC -32602                             recoverable
``rpc_error``      any other JSON-RPC error                    recoverable
``timeout``        no answer within the server's ``timeout``   transient
``io``             the connection broke during the call        transient
``unreachable``    the server cannot be started or reached     transient
``error``          anything else                               recoverable
=================  ==========================================  ===============
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import os
import uuid
from pathlib import Path
from typing import Any

from ..envelope import failure
from .cache import safe_stem

#: JSON-RPC's "invalid params" error code.
INVALID_PARAMS = -32602
_MEDIA = {"image": ("images", "image"), "audio": ("audios", "audio")}


def _write(workspace: str, data: bytes, mime: str | None, stem: str) -> str:
    folder = Path(workspace) / "mcp"
    folder.mkdir(parents=True, exist_ok=True)
    suffix = mimetypes.guess_extension(mime or "") or ".bin"
    path = folder / f"{safe_stem(stem)}-{uuid.uuid4().hex[:8]}{suffix}"
    path.write_bytes(data)
    return str(path.relative_to(workspace))


def _blob(value: str) -> bytes | None:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def envelope(result: Any, workspace: str, skill: str) -> dict[str, Any]:
    """The envelope of a ``CallToolResult`` (see the module docstring)."""
    texts: list[str] = []
    content: list[dict[str, Any]] = []
    arrays: dict[str, list[dict[str, Any]]] = {}
    for index, block in enumerate(result.content or []):
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind in _MEDIA and workspace:
            array, media = _MEDIA[kind]
            data = _blob(block.data)
            if data is None:
                content.append({"type": kind, "error": "the block's data is not base64"})
                continue
            path = _write(workspace, data, block.mime_type, f"{skill}-{index}")
            arrays.setdefault(array, []).append({"local_path": path, "media": media})
            content.append({"type": kind, "mime_type": block.mime_type, "local_path": path})
        elif kind == "resource" and workspace:
            resource = block.resource
            text = getattr(resource, "text", None)
            data = text.encode("utf-8") if isinstance(text, str) else _blob(getattr(resource, "blob", "") or "")
            if data is None:
                content.append({"type": kind, "uri": str(resource.uri), "error": "the blob is not base64"})
                continue
            path = _write(workspace, data, getattr(resource, "mime_type", None), f"{skill}-{index}")
            arrays.setdefault("files", []).append({"local_path": path})
            content.append({"type": kind, "uri": str(resource.uri), "local_path": path})
        elif kind == "resource_link":
            content.append({"type": kind, "uri": str(block.uri), "name": getattr(block, "name", None)})
        else:
            content.append({"type": kind or type(block).__name__})
    text = "\n".join(texts)
    env: dict[str, Any] = {"ok": not result.is_error, "text": text, **arrays}
    try:
        env["data"] = json.loads(text) if text.strip() else None
    except (ValueError, RecursionError):  # not JSON, or nested past json's depth: the text stays
        env.pop("data", None)
    if env.get("data") is None:
        env.pop("data", None)
    if result.structured_content is not None:
        env["structured"] = result.structured_content
    if content:
        env["content"] = content
    if result.is_error:
        env.update(
            success=False,
            error=text.strip() or f"MCP tool {skill!r} reported an error without a message",
            error_type="recoverable",
            mcp_error="tool_error",
            skill=skill,
        )
    return env


def rpc_failure(skill: str, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error answer: invalid params, or another protocol error."""
    if code == INVALID_PARAMS:
        return failure(
            skill,
            f"MCP tool {skill!r} refused the arguments: {message}",
            error_type="recoverable",
            mcp_error="invalid_params",
            invalid_input=True,
        )
    return failure(
        skill,
        f"MCP tool {skill!r} answered JSON-RPC error {code}: {message}",
        error_type="recoverable",
        mcp_error="rpc_error",
    )


def timed_out(skill: str, seconds: float) -> dict[str, Any]:
    return failure(
        skill,
        f"MCP tool {skill!r} did not answer within {seconds:g} s (the server's timeout in settings.toml)",
        error_type="transient",
        mcp_error="timeout",
        timed_out=True,
    )


def broken(skill: str, reason: str) -> dict[str, Any]:
    return failure(
        skill,
        f"the connection to the MCP server broke during the call of {skill!r} ({reason}); it is restarted on the "
        "next call",
        error_type="transient",
        mcp_error="io",
    )


def unreachable(skill: str, reason: str) -> dict[str, Any]:
    return failure(skill, reason, error_type="transient", mcp_error="unreachable")


def unknown_failure(skill: str, reason: str) -> dict[str, Any]:
    return failure(skill, f"calling MCP tool {skill!r} failed: {reason}", error_type="recoverable", mcp_error="error")


def workspace_of(ctx: dict[str, Any]) -> str:
    folder = ctx.get("workspace_dir")
    return folder if isinstance(folder, str) and folder and os.path.isdir(folder) else ""
