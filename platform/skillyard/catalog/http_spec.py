"""The TOML file of an HTTP skill (docs/http-skills.md): read and checked when the skill loads, so ``skillyard
validate`` and ``list`` report a broken one, and again by the HTTP executor when it runs."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

__all__ = ["BODY_KINDS", "HttpSpecError", "load_spec"]

BODY_KINDS = ("json", "form", "none")


class HttpSpecError(ValueError):
    """The TOML file of an HTTP skill is malformed."""


def load_spec(path: Path) -> dict[str, Any]:
    """Read and check the TOML spec; errors say which key to fix."""
    try:
        spec = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise HttpSpecError(f"cannot read {path.name}: {exc}") from None
    request = spec.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("url"), str):
        raise HttpSpecError(f'{path.name} needs a [request] table with url = "https://…"')
    body = request.get("body", "none" if str(request.get("method", "GET")).upper() in ("GET", "HEAD") else "json")
    if body not in BODY_KINDS:
        raise HttpSpecError(f"{path.name}: request.body must be one of {', '.join(BODY_KINDS)}, not {body!r}")
    request["body"] = body
    if not isinstance(request.get("headers", {}), dict):
        raise HttpSpecError(f'{path.name}: request.headers must be a table, e.g. headers = {{ Accept = "text/csv" }}')
    query = request.get("query", [])
    if not isinstance(query, list) or not all(isinstance(q, str) for q in query):
        raise HttpSpecError(f"{path.name}: request.query must be a list of input field names, not {query!r}")
    timeout = request.get("timeout", 30)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise HttpSpecError(f"{path.name}: request.timeout must be a positive number of seconds, not {timeout!r}")
    return spec
