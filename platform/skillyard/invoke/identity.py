"""Identity helpers every skill would otherwise repeat: department paths (§4.5) and the pseudo-organisation (§4.6)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MAX_DEPARTMENT_DEPTH = 20


def department_path(value: str | Iterable[str] | None) -> str:
    """Normalize to ``/top/…/own/``: slashes at both ends, empty segments dropped, at most 20 levels.

    Deeper paths are cut from the top (dirty data that loops must not grow without bound); no segments → ``""``.
    """
    if value is None:
        return ""
    parts = value.split("/") if isinstance(value, str) else [str(v) for v in value]
    segments = [p.strip() for p in parts if p and p.strip()]
    if not segments:
        return ""
    return "/" + "/".join(segments[-MAX_DEPARTMENT_DEPTH:]) + "/"


def current_department(path: str) -> str:
    """The last segment of a department path (the person's own department)."""
    segments = [s for s in path.split("/") if s]
    return segments[-1] if segments else ""


def identity_org_id(ctx: Mapping[str, Any]) -> str:
    """The organisation id for identity lookups: ``org_id``, or ``r_<role_id>`` when it is empty (§4.6).

    Not for datatable: an empty org_id there is a configuration error, never a pseudo-organisation.
    """
    org = str(ctx.get("org_id") or "").strip()
    return org or f"r_{ctx.get('role_id') or ''}"
