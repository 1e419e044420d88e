"""Value converters for the text, date and time, 勾选, select, contact and JSON types (spec §7.5): each takes a
non-empty value and returns the database value or raises :class:`~.errors.FieldError` with the reason.

Decisions (the reasons are next to the code):

* 日期时间 is ``timestamptz``; naive input is read in ``naive_tz`` (UTC unless the caller passes the org's zone).
* 多选 is ``text[]``, stored de-duplicated in the order of the configured options.
* JSON is ``text`` holding JSON (the SQL channel refuses jsonb).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from datetime import date, datetime, time, timezone, tzinfo
from decimal import Decimal
from typing import Any

from .errors import FieldError
from .numbers import FULLWIDTH

__all__ = [
    "datetime_converter",
    "multi_converter",
    "single_converter",
    "to_bool",
    "to_date",
    "to_email",
    "to_json",
    "to_phone",
    "to_text",
    "to_time",
    "to_url",
]


_MULTI_SEPARATORS = (",", "，", "、", ";", "；")


def to_text(value: Any) -> str:
    cls = value.__class__
    if cls is str:
        text: str = value
        if "\x00" in text:
            raise FieldError("contains a NUL character (\\x00), which PostgreSQL text cannot hold; remove it")
        return text
    if cls is bool:
        raise FieldError(f"{value!r} is true/false; write it as text or use a 勾选 field")
    if isinstance(value, int | float | Decimal):
        if isinstance(value, float | Decimal) and not math.isfinite(value):
            raise FieldError(f"{value!r} is not a finite number")
        return str(value)
    if isinstance(value, date | time):
        return value.isoformat()
    raise FieldError(
        f"expected text, got {type(value).__name__}; join the items into one text or use a JSON / 多选 field"
    )


def _date_part(text: str) -> date:
    if len(text) < 10 or text[4] != "-" or text[7] != "-":
        raise ValueError
    return date.fromisoformat(text[:10])


def to_date(value: Any) -> date:
    cls = value.__class__
    if cls is str:
        text = value.strip()
        try:
            day = _date_part(text)
            if len(text) == 10:
                return day
            rest = text[10:]
            if rest[0] in "T " and time.fromisoformat(rest[1:]) == time(0) and rest[3:4] == ":":
                return day  # "2024-05-01 00:00[:00]" (a spreadsheet date at midnight) is the same date
        except ValueError:
            pass
        raise FieldError(f"{value!r} is not an ISO date; write YYYY-MM-DD, e.g. 2024-05-01")
    if cls is date:
        given: date = value
        return given
    if isinstance(value, datetime):
        if value.tzinfo is None and value.time() == time(0):
            return value.date()
        raise FieldError(f"{value.isoformat()} has a time of day; a 日期 field takes a date (use 日期时间 for times)")
    if isinstance(value, date):
        return date(value.year, value.month, value.day)
    raise FieldError(f"expected an ISO date YYYY-MM-DD, got {type(value).__name__}")


def datetime_converter(naive_tz: tzinfo) -> Callable[[Any], datetime]:
    # A fixed zone (UTC, +08:00) is applied by parsing the text with its offset appended: datetime.replace(tzinfo=)
    # costs about a microsecond, several times the parse itself.
    suffix = datetime(2000, 1, 1, tzinfo=naive_tz).isoformat()[19:] if isinstance(naive_tz, timezone) else ""

    def convert(value: Any) -> datetime:
        cls = value.__class__
        if cls is str:
            text = value.strip()
            try:
                if len(text) < 10 or text[4] != "-" or text[7] != "-" or (len(text) > 10 and text[10] not in "T "):
                    raise ValueError
                moment = datetime.fromisoformat(text)
                if moment.tzinfo is None and suffix:
                    return datetime.fromisoformat((text if len(text) > 10 else text + "T00:00") + suffix)
            except ValueError:
                raise FieldError(
                    f"{value!r} is not an ISO 8601 date-time; write YYYY-MM-DD HH:MM[:SS], optionally with an offset "
                    "such as +08:00 or Z"
                ) from None
        elif isinstance(value, datetime):
            moment = value
        elif isinstance(value, date):
            moment = datetime(value.year, value.month, value.day)
        else:
            raise FieldError(f"expected an ISO 8601 date-time, got {type(value).__name__}")
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=naive_tz)

    return convert


def to_time(value: Any) -> time:
    cls = value.__class__
    if cls is str:
        text = value.strip()
        if text[1:2] == ":":
            text = "0" + text  # 9:30
        if len(text) >= 5 and text[2] == ":" and (len(text) == 5 or (text[5] == ":" and len(text) >= 8)):
            try:
                moment = time.fromisoformat(text)
            except ValueError:
                pass
            else:
                if moment.tzinfo is None:
                    return moment
        raise FieldError(f"{value!r} is not a time of day; write HH:MM or HH:MM:SS (24-hour), e.g. 09:30")
    if cls is time:
        given: time = value
        if given.tzinfo is not None:
            raise FieldError(f"{given.isoformat()} carries a time zone; a 时间 field holds a plain time of day")
        return given
    raise FieldError(f"expected a time HH:MM[:SS], got {type(value).__name__}")


_TRUE = frozenset({"true", "t", "yes", "y", "1", "on", "checked", "是", "真", "对", "有", "√", "✓", "✔"})


_FALSE = frozenset({"false", "f", "no", "n", "0", "off", "unchecked", "否", "假", "错", "无", "×", "✗", "✘"})


def to_bool(value: Any) -> bool:
    cls = value.__class__
    if cls is bool:
        flag: bool = value
        return flag
    if cls is str:
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    elif cls is int and value in (0, 1):
        one: bool = value == 1
        return one
    raise FieldError(f"{value!r} is not a yes/no value; use true/false (also 是/否, yes/no, 1/0)")


def _show_options(options: Sequence[str]) -> str:
    shown = ", ".join(options[:20])
    return shown + (f", … ({len(options)} in all)" if len(options) > 20 else "")


def _option_text(value: Any) -> str:
    if value.__class__ is str:
        return value.strip()
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise FieldError(f"expected an option as text, got {type(value).__name__}")
    return str(value)


def single_converter(options: tuple[str, ...]) -> Callable[[Any], str]:
    allowed = frozenset(options)

    def convert(value: Any) -> str:
        text = value if value.__class__ is str and value in allowed else _option_text(value)
        if text in allowed:
            return text
        raise FieldError(
            f"{text!r} is not one of the options ({_show_options(options)}); "
            "use one of them or add it to the field's options with update_field"
        )

    return convert


def multi_converter(options: tuple[str, ...]) -> Callable[[Any], list[str] | None]:
    rank = {option: i for i, option in enumerate(options)}

    def convert(value: Any) -> list[str] | None:
        if value.__class__ is str:
            text = value.strip()
            if text in rank:
                return [text]
            if text.startswith("["):
                try:
                    items: Any = json.loads(text)
                except ValueError:
                    raise FieldError(f"{value!r} is not a valid JSON list; give a list of options") from None
                if not isinstance(items, list):
                    raise FieldError(f"{value!r} is not a list of options")
            else:
                for sep in _MULTI_SEPARATORS[1:]:
                    text = text.replace(sep, ",")
                items = text.split(",")
        elif isinstance(value, list | tuple):
            items = value
        else:
            items = [value]
        picked: set[str] = set()
        unknown: list[str] = []
        for item in items:
            text = _option_text(item)
            if not text:
                continue
            if text in rank:
                picked.add(text)
            else:
                unknown.append(text)
        if unknown:
            raise FieldError(
                f"{', '.join(repr(u) for u in unknown)} not among the options ({_show_options(options)}); "
                "use only configured options or add them with update_field"
            )
        return sorted(picked, key=rank.__getitem__) or None

    return convert


def to_email(value: Any) -> str:
    if value.__class__ is not str:
        raise FieldError(f"expected an email address as text, got {type(value).__name__}")
    text = value.strip()
    local, at, domain = text.partition("@")
    if (
        at
        and local
        and "@" not in domain
        and "." in domain
        and domain[0] not in ".-"
        and domain[-1] not in ".-"
        and ".." not in domain
        and len(text) <= 254
        and len(text.split()) == 1
    ):
        return text
    raise FieldError(f"{value!r} is not an email address; write name@example.com")


_DIGITS = str.maketrans("", "", "0123456789")


_PHONE_PUNCTUATION = str.maketrans("", "", "+-() ")


def to_phone(value: Any) -> str:
    cls = value.__class__
    if cls is int:
        text = str(value)
    elif cls is float and value.is_integer() and 0 <= value < 1e15:
        text = str(int(value))
    elif cls is str:
        text = value.strip()
        if not text.isascii():
            text = text.translate(FULLWIDTH).replace("（", "(").replace("）", ")")
    else:
        raise FieldError(f"expected a phone number as text, got {type(value).__name__}")
    punctuation = text.translate(_DIGITS)
    if (
        not punctuation.translate(_PHONE_PUNCTUATION)
        and 3 <= len(text) - len(punctuation) <= 20
        and "+" not in text[1:]
    ):
        return text
    raise FieldError(
        f"{value!r} is not a phone number; use digits with optional + (at the start), -, spaces and parentheses, "
        "e.g. +86 138-0000-0000"
    )


def to_url(value: Any) -> str:
    if value.__class__ is not str:
        raise FieldError(f"expected a link as text, got {type(value).__name__}")
    text = value.strip()
    lower = text[:8].lower()
    start = 7 if lower.startswith("http://") else 8 if lower.startswith("https://") else 0
    if start and len(text) > start and text[start] not in "/?#:" and len(text.split()) == 1:
        return text
    if not start:
        raise FieldError(
            f"{value!r} is not an http(s) link; write the full address including its scheme (https or http)"
        )
    raise FieldError(f"{value!r} is not a valid http(s) link (no host, or contains spaces)")


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, date | time):
        return value.isoformat()
    raise TypeError(type(value).__name__)


_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=_json_default)


def to_json(value: Any) -> str:
    if value.__class__ is str:
        try:
            value = json.loads(value)
        except ValueError:
            raise FieldError(
                "text given to a JSON field must be valid JSON (an object, list, number, or a quoted string)"
            ) from None
    try:
        return _JSON.encode(value)
    except (TypeError, ValueError) as exc:
        raise FieldError(f"cannot be stored as JSON ({exc})") from None
