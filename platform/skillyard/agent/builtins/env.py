"""The environment helpers of §12 (``builtin_env_*``): time, ids, random numbers and hashes, from the stdlib.

Date patterns are **Java style** (``yyyy-MM-dd HH:mm:ss``), because contracts and manuals come from a Java
platform: ``yyyy``/``yy`` year, ``MMMM``/``MMM``/``MM``/``M`` month (name, short name, 2 digits, digits),
``dd``/``d`` day, ``HH``/``H`` hour 0–23, ``hh``/``h`` hour 1–12, ``mm``/``m`` minute, ``ss``/``s`` second,
``SSS`` milliseconds, ``a`` AM/PM, ``EEEE``/``EEE`` weekday (name, short name), ``Z`` ``+0800``, three ``X``
letters (Java's ISO offset pattern) ``+08:00``; text in single quotes is literal (``''`` is a quote). A pattern
containing ``%`` is taken as a Python strftime pattern instead. Without an input pattern a value is read as
ISO 8601 (``2024-05-01``, ``2024-05-01T08:30:00+08:00``, ``…Z``), ``yyyy/MM/dd[ HH:mm:ss]``, ``yyyyMMdd``, epoch
seconds (10 digits) or milliseconds (13 digits), or the words ``now`` / ``today``. Times without a zone are local
time. The default output pattern is ``yyyy-MM-dd HH:mm:ss`` (``yyyy-MM-dd`` for a date-only input moved by whole
days or more).
"""

from __future__ import annotations

import calendar
import hashlib
import re
import secrets
import uuid
from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any

from ..codes import ErrorCode
from ..context import NodeContext
from ..state import Observation
from .tool import Builtin, Call, JsonObject, params, text_arg

DATETIME_PATTERN = "yyyy-MM-dd HH:mm:ss"
DATE_PATTERN = "yyyy-MM-dd"
WEEKDAYS_ZH = ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日")
HASH_ALGORITHMS = ("md5", "sha1", "sha256", "sha512")
#: unit word (lower case, singular or plural, Java ChronoUnit names too) → canonical unit
UNITS = {
    **{w: "years" for w in ("year", "years", "y")},
    **{w: "months" for w in ("month", "months")},
    **{w: "weeks" for w in ("week", "weeks", "w")},
    **{w: "days" for w in ("day", "days", "d")},
    **{w: "hours" for w in ("hour", "hours", "h")},
    **{w: "minutes" for w in ("minute", "minutes", "min")},
    **{w: "seconds" for w in ("second", "seconds", "s")},
}
_DAY_UNITS = frozenset({"years", "months", "weeks", "days"})
_TOKEN = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|.", re.S)
_FIELDS: dict[str, Callable[[datetime, int], str]] = {
    "y": lambda d, n: f"{d.year % 100:02d}" if n == 2 else f"{d.year:0{max(n, 4)}d}",
    "M": lambda d, n: d.strftime("%B") if n >= 4 else d.strftime("%b") if n == 3 else f"{d.month:0{n}d}",
    "d": lambda d, n: f"{d.day:0{n}d}",
    "H": lambda d, n: f"{d.hour:0{n}d}",
    "h": lambda d, n: f"{(d.hour % 12) or 12:0{n}d}",
    "m": lambda d, n: f"{d.minute:0{n}d}",
    "s": lambda d, n: f"{d.second:0{n}d}",
    "S": lambda d, n: f"{d.microsecond:06d}"[:n] if n <= 6 else f"{d.microsecond:06d}".ljust(n, "0"),
    "a": lambda d, n: d.strftime("%p"),
    "E": lambda d, n: d.strftime("%A") if n >= 4 else d.strftime("%a"),
    "Z": lambda d, n: d.strftime("%z"),
    "X": lambda d, n: _colon_zone(d),
}
_PARSE = {"y": "%Y", "M": "%m", "d": "%d", "H": "%H", "h": "%I", "m": "%M", "s": "%S", "S": "%f", "a": "%p"}


class EnvError(ValueError):
    """A value or pattern an env helper cannot use; the message says what to pass instead."""


def _colon_zone(d: datetime) -> str:
    zone = d.strftime("%z")
    return f"{zone[:3]}:{zone[3:]}" if zone else ""


def _tokens(pattern: str) -> list[tuple[str, str]]:
    """``(letter, run)`` for pattern letters, ``("", text)`` for literals."""
    out = []
    for match in _TOKEN.finditer(pattern):
        text = match.group(0)
        if text.startswith("'"):
            out.append(("", text[1:-1].replace("''", "'") if len(text) > 2 else "'"))
        elif match.group(1):
            if text[0] not in _FIELDS:
                raise EnvError(f"pattern letter {text[0]!r} in {pattern!r} is not supported; use yyyy MM dd HH mm ss")
            out.append((text[0], text))
        else:
            out.append(("", text))
    return out


def format_with(value: datetime, pattern: str) -> str:
    """``value`` in a Java-style pattern (or a strftime pattern when it contains ``%``). A value without a zone is
    local time, so the zone fields (``Z``, ``%z`` and the colon form) print the local offset; the wall-clock fields
    do not change."""
    if value.tzinfo is None:
        value = value.astimezone()
    if "%" in pattern:
        return value.strftime(pattern)
    return "".join(_FIELDS[letter](value, len(run)) if letter else run for letter, run in _tokens(pattern))


def _strptime_pattern(pattern: str) -> str:
    parts = []
    for letter, run in _tokens(pattern):
        if not letter:
            parts.append(run.replace("%", "%%"))
        elif letter == "y":
            parts.append("%y" if len(run) == 2 else "%Y")
        elif letter == "M" and len(run) >= 3:
            parts.append("%B" if len(run) >= 4 else "%b")
        elif letter == "E":
            parts.append("%A" if len(run) >= 4 else "%a")
        elif letter in ("Z", "X"):
            parts.append("%z")
        else:
            parts.append(_PARSE[letter])
    return "".join(parts)


def parse_datetime(text: str, pattern: str | None = None) -> tuple[datetime, bool]:
    """``(value, date_only)`` read from ``text`` (see the module docstring); raises EnvError."""
    raw = text.strip()
    if pattern:
        try:
            found = datetime.strptime(raw, pattern if "%" in pattern else _strptime_pattern(pattern))
        except ValueError as exc:
            raise EnvError(f"{raw!r} does not match pattern {pattern!r}: {exc}") from None
        if "%" in pattern:
            return found, not any(f in pattern for f in ("%H", "%I", "%M", "%S", "%X", "%c", "%T"))
        return found, not any(letter in "HhmsSa" for letter, _ in _tokens(pattern) if letter)
    if raw.lower() == "now":
        return datetime.now(), False
    if raw.lower() == "today":
        return datetime.combine(date.today(), datetime.min.time()), True
    if raw.isdigit() and len(raw) in (10, 13):
        seconds = int(raw) / (1000 if len(raw) == 13 else 1)
        return datetime.fromtimestamp(seconds).astimezone(), False
    for fmt, date_only in (("%Y/%m/%d %H:%M:%S", False), ("%Y/%m/%d", True), ("%Y%m%d", True)):
        try:
            return datetime.strptime(raw, fmt), date_only
        except ValueError:
            pass
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00") if raw.endswith("Z") else raw)
    except ValueError:
        raise EnvError(
            f"cannot read {raw!r} as a date; use ISO 8601 (2024-05-01 or 2024-05-01T08:30:00) or pass inputPattern"
        ) from None
    return value, len(raw) == 10


def _unit(value: str) -> str:
    unit = UNITS.get((value or "days").strip().lower())
    if unit is None:
        raise EnvError(f"unit {value!r} is not known; use years, months, weeks, days, hours, minutes or seconds")
    return unit


def _add_months(value: datetime, months: int) -> datetime:
    total = value.year * 12 + value.month - 1 + months
    year, month = divmod(total, 12)
    day = min(value.day, calendar.monthrange(year, month + 1)[1])
    return value.replace(year=year, month=month + 1, day=day)


def add(value: datetime, amount: int, unit: str) -> datetime:
    if unit == "years":
        return _add_months(value, 12 * amount)
    if unit == "months":
        return _add_months(value, amount)
    return value + timedelta(**{unit: amount})


def _same_zone(a: datetime, b: datetime) -> tuple[datetime, datetime]:
    if (a.tzinfo is None) != (b.tzinfo is None):
        return a.astimezone(), b.astimezone()
    return a, b


def diff(start: datetime, end: datetime, unit: str) -> int:
    """Whole ``unit`` from ``start`` to ``end`` (negative when ``end`` is earlier), truncated toward zero."""
    start, end = _same_zone(start, end)
    if unit in ("years", "months"):
        months = (end.year - start.year) * 12 + end.month - start.month
        rest_end, rest_start = (end.day, end.time()), (start.day, start.time())
        if months > 0 and rest_end < rest_start:  # as Java's LocalDateTime.until: an unfinished month is dropped
            months -= 1
        elif months < 0 and rest_end > rest_start:
            months += 1
        return int(months / 12) if unit == "years" else months
    seconds = (end - start).total_seconds()
    size = {"weeks": 604800, "days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}[unit]
    return int(seconds / size)


# handlers ------------------------------------------------------------------------------------------------------
def _refuse(call: Call, exc: EnvError) -> Observation:
    return call.refuse(ErrorCode.ARG_REJECTED, str(exc), f"call {call.name} again with the corrected argument")


async def current_datetime(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    now = datetime.now().astimezone()
    return call.ok(
        {
            "datetime": format_with(now, DATETIME_PATTERN),
            "date": format_with(now, DATE_PATTERN),
            "iso": now.isoformat(timespec="seconds"),
            "weekday": now.strftime("%A"),
            "timezone": now.strftime("%z"),
            "timestamp": int(now.timestamp() * 1000),
        }
    )


async def generate_uuid(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    length = args.get("length")
    value = uuid.uuid4()
    if length is None:
        return call.ok({"uuid": str(value)})
    if not 1 <= length <= 32:
        return _refuse(call, EnvError(f"length must be between 1 and 32, not {length}"))
    return call.ok({"uuid": value.hex[:length]})


async def format_datetime(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    try:
        value, _ = parse_datetime(text_arg(args, "input"), text_arg(args, "inputPattern") or None)
        return call.ok({"result": format_with(value, text_arg(args, "outputPattern") or DATETIME_PATTERN)})
    except EnvError as exc:
        return _refuse(call, exc)


async def add_datetime(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    try:
        unit = _unit(text_arg(args, "unit"))
        value, date_only = parse_datetime(text_arg(args, "base"))
        moved = add(value, int(args["amount"]), unit)
    except EnvError as exc:
        return _refuse(call, exc)
    except (OverflowError, ValueError) as exc:
        return _refuse(call, EnvError(f"the result is out of range: {exc}"))
    pattern = DATE_PATTERN if date_only and unit in _DAY_UNITS else DATETIME_PATTERN
    return call.ok({"result": format_with(moved, pattern), "unit": unit})


async def diff_datetime(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    try:
        unit = _unit(text_arg(args, "unit"))
        start, _ = parse_datetime(text_arg(args, "from"))
        end, _ = parse_datetime(text_arg(args, "to"))
    except EnvError as exc:
        return _refuse(call, exc)
    return call.ok({"result": diff(start, end, unit), "unit": unit})


async def get_weekday(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    try:
        value, _ = parse_datetime(text_arg(args, "date"))
    except EnvError as exc:
        return _refuse(call, exc)
    number = value.isoweekday()
    weekday = {"weekday": value.strftime("%A"), "number": number, "weekdayZh": WEEKDAYS_ZH[number - 1]}
    return call.ok({"date": format_with(value, DATE_PATTERN), **weekday})


async def random_int(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    low, high = args["min"], args["max"]
    if low > high:
        return _refuse(call, EnvError(f"min ({low}) is greater than max ({high})"))
    return call.ok({"result": low + secrets.randbelow(high - low + 1)})


async def hash_text(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    algorithm = (text_arg(args, "algorithm") or "sha256").lower().replace("-", "")
    if algorithm not in HASH_ALGORITHMS:
        return _refuse(call, EnvError(f"algorithm {algorithm!r} is not supported; use {', '.join(HASH_ALGORITHMS)}"))
    digest = hashlib.new(algorithm, str(args["input"]).encode("utf-8")).hexdigest()
    length = args.get("length")
    if length is not None and not 1 <= length <= len(digest):
        return _refuse(call, EnvError(f"length must be between 1 and {len(digest)} for {algorithm}"))
    return call.ok({"hash": digest[:length] if length else digest, "algorithm": algorithm})


_UNIT_SCHEMA: dict[str, Any] = {"type": "string", "description": "years, months, weeks, days (default), hours, …"}
_DATE = {"type": "string", "description": "ISO 8601 date or date-time, 'now' or 'today'"}

ENV_TOOLS = (
    Builtin("builtin_env_current_datetime", "The current local date and time.", params(), current_datetime),
    Builtin(
        "builtin_env_generate_uuid",
        "A random UUID; with length, the first characters of its hex form.",
        params({"length": {"type": "integer", "description": "1–32"}}),
        generate_uuid,
    ),
    Builtin(
        "builtin_env_format_datetime",
        "Reformat a date. Patterns are Java style, e.g. yyyy-MM-dd HH:mm:ss.",
        params(
            {"input": {"type": "string"}, "inputPattern": {"type": "string"}, "outputPattern": {"type": "string"}},
            ("input",),
        ),
        format_datetime,
    ),
    Builtin(
        "builtin_env_add_datetime",
        "Add (or, with a negative amount, subtract) time to a date.",
        params({"base": _DATE, "amount": {"type": "integer"}, "unit": _UNIT_SCHEMA}, ("base", "amount")),
        add_datetime,
    ),
    Builtin(
        "builtin_env_diff_datetime",
        "Whole units from one date to another (negative when 'to' is earlier).",
        params({"from": _DATE, "to": _DATE, "unit": _UNIT_SCHEMA}, ("from", "to")),
        diff_datetime,
    ),
    Builtin("builtin_env_get_weekday", "The weekday of a date.", params({"date": _DATE}, ("date",)), get_weekday),
    Builtin(
        "builtin_env_random_int",
        "A random integer between min and max, both included.",
        params({"min": {"type": "integer"}, "max": {"type": "integer"}}, ("min", "max")),
        random_int,
    ),
    Builtin(
        "builtin_env_hash",
        "The hex digest of a text (md5, sha1, sha256 (default), sha512); with length, its first characters.",
        params(
            {"input": {"type": "string"}, "algorithm": {"type": "string"}, "length": {"type": "integer"}},
            ("input",),
        ),
        hash_text,
    ),
)
