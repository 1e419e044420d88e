"""Parsing a contract directly: problems of a raw contract, a bare write tool."""

from __future__ import annotations

OK_SUCCESS = {"path": "code", "op": "EQ", "value": 200}


def write_tool(**extra: object) -> dict[str, object]:
    return {"sideEffect": "WRITE", "success": OK_SUCCESS, **extra}
