"""Scaffolding of the request tests (tests/datatable/request/): one request normalized."""

from __future__ import annotations

from typing import Any

from skillyard.builtin_skills.datatable.request.dispatch import normalize_request


def req(action: Any = None, **params: Any) -> Any:
    """The normalized request of ``action`` (left out when None) with ``params`` at the top level."""
    data = dict(params)
    if action is not None:
        data["action"] = action
    return normalize_request(data)
