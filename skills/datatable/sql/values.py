"""Result values of the SQL channel (spec §7.6): what asyncpg returns → JSON-serialisable values.

Rows are dicts of JSON-serialisable values: numeric (Decimal) becomes a *string* so no digit is lost (``"12.50"``;
floats would round money), date/time values ISO 8601 strings, intervals ISO 8601 durations, UUIDs strings,
NaN/Infinity strings; integers, floats, booleans, text and None stay as they are. Duplicate column names get a
suffix (``a``, ``a_2``).

Built-in skills use only their own folder and public libraries: nothing here imports SkillYard.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import uuid
from collections.abc import Mapping
from typing import Any

import asyncpg

__all__ = ["column_names", "json_value"]


def _iso_duration(value: dt.timedelta) -> str:
    sign = "-" if value < dt.timedelta(0) else ""
    value = abs(value)
    days, seconds, micro = value.days, value.seconds, value.microseconds
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    time = ""
    if hours:
        time += f"{hours}H"
    if minutes:
        time += f"{minutes}M"
    if secs or micro:
        time += f"{secs}.{micro:06d}".rstrip("0").rstrip(".") + "S"
    if not days and not time:
        return "PT0S"
    return f"{sign}P{f'{days}D' if days else ''}{'T' + time if time else ''}"


def json_value(value: Any) -> Any:
    """A JSON-serialisable form of one value asyncpg returned (see the module docstring)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return (
            value
            if math.isfinite(value)
            else ("NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity"))
        )
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return _iso_duration(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, asyncpg.Record):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, Mapping):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return str(value)


def column_names(names: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        candidate, n = name, 1
        while candidate in seen:
            n += 1
            candidate = f"{name}_{n}"
        seen.add(candidate)
        out.append(candidate)
    return out
