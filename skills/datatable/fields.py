"""Field types of the datatable skill: field definitions, identifier rules and write-value validation (spec §7.1, §7.5).

Pure Python, no database. A table's fields are compiled once into a :class:`RowValidator` (one converter per field);
validating a row is then a dictionary walk plus one small converter call per value, so that insert_from_file can check
100,000 rows in Python at a fraction of the cost of the COPY itself.

Decisions (the reasons are next to the code):

* 日期时间 is ``timestamptz``; naive input is read in ``naive_tz`` (UTC unless the caller passes the org's zone).
* 多选 is ``text[]``, stored de-duplicated in the order of the configured options.
* JSON is ``text`` holding JSON (the SQL channel refuses jsonb).
* 数字 rounds extra decimals half away from zero to the field's scale, which is what PostgreSQL does when it stores
  a value into ``numeric(p,s)``; too many digits before the decimal point are refused.
* Numbers never carry magnitude words (万 亿 千 k M bn …), percent signs or exponents in text: refused, not converted.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timezone, tzinfo
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

__all__ = [
    "CANONICAL_TYPES",
    "MAX_IDENTIFIER_BYTES",
    "MAX_IDENTIFIER_CHARS",
    "PRESETS",
    "SYSTEM_COLUMNS",
    "TYPES",
    "FieldDef",
    "FieldError",
    "RowValidator",
    "check_identifier",
    "parse_field",
]


class FieldError(ValueError):
    """A field definition or a value was refused; the message says what was wrong and how to fix it."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


# --------------------------------------------------------------------------------------------------------------------
# Types

CANONICAL_TYPES: tuple[str, ...] = (
    "文本",
    "长文本",
    "整数",
    "数字",
    "日期",
    "日期时间",
    "时间",
    "勾选",
    "单选",
    "多选",
    "邮箱",
    "电话",
    "链接",
    "JSON",
)

#: Every accepted type name → the canonical Chinese logical type. English names are matched case-insensitively
#: (keys are lower case; ``-`` and spaces read as ``_``). The NocoDB spellings are accepted because the skill was
#: registered as ``nocodb`` on older platforms.
TYPES: dict[str, str] = {name: name for name in CANONICAL_TYPES} | {
    "金额": "数字",
    "百分比": "数字",
    "高精度数字": "数字",
    "text": "文本",
    "long_text": "长文本",
    "integer": "整数",
    "number": "数字",
    "date": "日期",
    "datetime": "日期时间",
    "time": "时间",
    "checkbox": "勾选",
    "single_select": "单选",
    "multi_select": "多选",
    "email": "邮箱",
    "phone": "电话",
    "url": "链接",
    "json": "JSON",
    "currency": "数字",
    "percent": "数字",
    "decimal": "数字",
    # NocoDB uidt spellings (lower-cased)
    "singlelinetext": "文本",
    "longtext": "长文本",
    "singleselect": "单选",
    "multiselect": "多选",
    "phonenumber": "电话",
}

#: (precision, scale) preset by a numeric alias; plain 数字 defaults to (38, 2).
PRESETS: dict[str, tuple[int, int]] = {
    "金额": (18, 2),
    "currency": (18, 2),
    "百分比": (12, 4),
    "percent": (12, 4),
    "高精度数字": (38, 18),
    "decimal": (38, 18),
}
DEFAULT_NUMERIC: tuple[int, int] = (38, 2)
MAX_NUMERIC_PRECISION = 1000  # PostgreSQL's limit for numeric(p,s)

SYSTEM_COLUMNS: frozenset[str] = frozenset({"id", "created_at"})

_SELECT_TYPES = frozenset({"单选", "多选"})
_PG_TYPES = {
    "文本": "text",
    "长文本": "text",
    "整数": "bigint",
    "日期": "date",
    "日期时间": "timestamptz",
    "时间": "time",
    "勾选": "boolean",
    "单选": "text",
    "多选": "text[]",
    "邮箱": "text",
    "电话": "text",
    "链接": "text",
    "JSON": "text",
}


def _type_key(name: str) -> str:
    key = name.strip()
    if key in TYPES:
        return key
    key = key.lower().replace("-", "_").replace(" ", "_")
    if key in TYPES:
        return key
    raise FieldError(
        f"unknown field type {name!r}; use one of {', '.join(CANONICAL_TYPES)} "
        "(or 金额 / 百分比 / 高精度数字, or the English names text, integer, number, date, datetime, …)"
    )


# --------------------------------------------------------------------------------------------------------------------
# Identifiers

MAX_IDENTIFIER_CHARS = 50
#: PostgreSQL cuts identifiers at 63 bytes (NAMEDATALEN - 1); a Chinese character is 3 bytes in UTF-8, so a name of
#: more than 21 Chinese characters would be silently truncated and two long names could collide. Refused instead.
MAX_IDENTIFIER_BYTES = 63
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_IDENTIFIER = re.compile(f"[A-Za-z_{_CJK}][A-Za-z0-9_{_CJK}]*")


def check_identifier(name: str, what: str = "field") -> str:
    """The stripped name when it is a valid table/field name (§7.1), else :class:`FieldError`.

    Chinese characters, ASCII letters, digits and underscore; 1–50 characters (and at most 63 bytes in UTF-8, the
    PostgreSQL limit); not starting with a digit.
    """
    if not isinstance(name, str):
        raise FieldError(f"the {what} name must be text, got {type(name).__name__}")
    stripped = name.strip()
    if not stripped:
        raise FieldError(f"the {what} name is empty; give 1–{MAX_IDENTIFIER_CHARS} characters")
    if len(stripped) > MAX_IDENTIFIER_CHARS:
        raise FieldError(
            f"the {what} name {stripped!r} has {len(stripped)} characters; at most {MAX_IDENTIFIER_CHARS} are allowed",
            stripped,
        )
    if not _IDENTIFIER.fullmatch(stripped):
        if "0" <= stripped[0] <= "9":
            reason = "must not start with a digit"
        else:
            bad = sorted({c for c in stripped if not _IDENTIFIER.fullmatch("a" + c)})
            reason = f"contains {' '.join(repr(c) for c in bad)}"
        raise FieldError(
            f"the {what} name {stripped!r} {reason}; use only Chinese characters, letters, digits and underscore, "
            "not starting with a digit (e.g. 「容差%」→「容差百分比」)",
            stripped,
        )
    if len(stripped.encode()) > MAX_IDENTIFIER_BYTES:
        raise FieldError(
            f"the {what} name {stripped!r} is {len(stripped.encode())} bytes in UTF-8; PostgreSQL keeps only "
            f"{MAX_IDENTIFIER_BYTES} (about 21 Chinese characters); shorten it",
            stripped,
        )
    return stripped


# --------------------------------------------------------------------------------------------------------------------
# Field definitions

_FIELD_KEYS = frozenset({"title", "name", "uidt", "type", "required", "unique", "options", "precision", "scale"})
_MULTI_SEPARATORS = (",", "，", "、", ";", "；")
_OPTION_FORBIDDEN = (",", "，")


@dataclass(frozen=True)
class FieldDef:
    """One business field of a table (the system columns id / created_at are not fields)."""

    title: str
    uidt: str
    required: bool = False
    unique: bool = False
    options: tuple[str, ...] = ()
    precision: int | None = None
    scale: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """The list_columns shape, which parse_field reads back unchanged."""
        return {
            "title": self.title,
            "uidt": self.uidt,
            "required": self.required,
            "unique": self.unique,
            "options": list(self.options),
            "precision": self.precision,
            "scale": self.scale,
        }

    def pg_type(self) -> str:
        """The PostgreSQL column type.

        日期时间 → ``timestamptz``: the column holds an instant, so input with an offset (``…+08:00``) keeps its
        meaning, asyncpg encodes aware datetimes exactly, and reading back does not depend on the server's zone.
        多选 → ``text[]``: asyncpg sends ``list[str]`` natively, filters use ``@>`` / ``&&`` (indexable with GIN), and
        the SQL channel can write ``'研发' = ANY(col)`` without JSON parsing. JSON → ``text`` (jsonb is refused by the
        SQL channel, §7.6).
        """
        if self.uidt == "数字":
            precision, scale = (
                (self.precision, self.scale if self.scale is not None else 0)
                if self.precision is not None
                else DEFAULT_NUMERIC
            )
            return f"numeric({precision},{scale})"
        return _PG_TYPES[self.uidt]


def _flag(value: Any, key: str, title: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    try:
        return _to_bool(value)
    except FieldError:
        raise FieldError(f"field {title!r}: {key} must be true or false, got {value!r}", title) from None


def _small_int(value: Any, key: str, title: str) -> int:
    if isinstance(value, bool):
        raise FieldError(f"field {title!r}: {key} must be a whole number, got {value!r}", title)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        return int(value)
    raise FieldError(f"field {title!r}: {key} must be a whole number, got {value!r}", title)


def _options(raw: Any, uidt: str, title: str) -> tuple[str, ...]:
    if raw is None or raw == "":
        items: list[Any] = []
    elif isinstance(raw, str):
        items = raw.replace("，", ",").split(",")
    elif isinstance(raw, list | tuple):
        items = list(raw)
    else:
        raise FieldError(
            f"field {title!r}: options must be a list or a comma-separated text, got {type(raw).__name__}", title
        )
    seen: dict[str, None] = {}
    for item in items:
        if isinstance(item, Mapping):  # NocoDB-style {"title": "研发", "color": ...}
            item = item.get("title", item.get("value"))
        if isinstance(item, bool) or not isinstance(item, str | int | float | Decimal):
            raise FieldError(f"field {title!r}: every option must be text, got {item!r}", title)
        text = str(item).strip()
        if not text:
            if isinstance(raw, str):
                continue  # "a,,b" or a trailing comma
            raise FieldError(f"field {title!r}: an option is empty; remove it", title)
        if uidt == "多选" and any(sep in text for sep in _OPTION_FORBIDDEN):
            raise FieldError(
                f"field {title!r}: the 多选 option {text!r} contains a comma, which separates values; rename it", title
            )
        seen.setdefault(text, None)
    if uidt in _SELECT_TYPES and not seen:
        raise FieldError(
            f'field {title!r}: a {uidt} field needs its options, e.g. "options": ["选项一", "选项二"]', title
        )
    if uidt not in _SELECT_TYPES and seen:
        raise FieldError(f"field {title!r}: options apply only to 单选 / 多选 fields; drop them or change uidt", title)
    return tuple(seen)


def parse_field(spec: Mapping[str, Any]) -> FieldDef:
    """A field definition ``{title, uidt, required?, unique?, options?, precision?, scale?}`` → :class:`FieldDef`.

    ``type`` is accepted for ``uidt`` and ``name`` for ``title``; type names may be Chinese or English (金额 /
    百分比 / 高精度数字 become 数字 with their preset precision, explicit precision/scale win); options are a list or
    a comma-separated text. The system columns id / created_at cannot be defined.
    """
    if not isinstance(spec, Mapping):
        raise FieldError(
            'a field definition is an object like {"title": "姓名", "uidt": "文本"}, got ' + type(spec).__name__
        )
    unknown = sorted(str(k) for k in spec if k not in _FIELD_KEYS)
    if unknown:
        raise FieldError(
            f"unknown key(s) {', '.join(unknown)} in a field definition; "
            "use title, uidt, required, unique, options, precision, scale"
        )
    title_raw = _one_of(spec, "title", "name", None)
    if title_raw is None:
        raise FieldError('a field definition needs a title, e.g. {"title": "姓名", "uidt": "文本"}')
    title = check_identifier(title_raw, "field")
    if title.lower() in SYSTEM_COLUMNS:
        raise FieldError(
            f"{title!r} is a system column created by the platform (id, created_at); choose another name", title
        )
    type_raw = _one_of(spec, "uidt", "type", title)
    if type_raw is None or (isinstance(type_raw, str) and not type_raw.strip()):
        raise FieldError(f"field {title!r} needs a type: uidt (or type), e.g. 文本, 整数, 数字, 日期, 单选", title)
    if not isinstance(type_raw, str):
        raise FieldError(f"field {title!r}: uidt must be a type name, got {type_raw!r}", title)
    try:
        key = _type_key(type_raw)
    except FieldError as exc:
        raise FieldError(f"field {title!r}: {exc}", title) from None
    uidt = TYPES[key]

    precision_raw, scale_raw = spec.get("precision"), spec.get("scale")
    precision = scale = None
    if uidt == "数字":
        preset_precision, preset_scale = PRESETS.get(key, DEFAULT_NUMERIC)
        precision = preset_precision if precision_raw is None else _small_int(precision_raw, "precision", title)
        scale = preset_scale if scale_raw is None else _small_int(scale_raw, "scale", title)
        if not 1 <= precision <= MAX_NUMERIC_PRECISION:
            raise FieldError(f"field {title!r}: precision must be 1–{MAX_NUMERIC_PRECISION}, got {precision}", title)
        if not 0 <= scale <= precision:
            raise FieldError(
                f"field {title!r}: scale (decimal places) must be 0–{precision} (not more than precision), got {scale}",
                title,
            )
    elif precision_raw is not None or scale_raw is not None:
        raise FieldError(
            f"field {title!r}: precision / scale apply only to 数字 (金额, 百分比, 高精度数字); drop them for {uidt}",
            title,
        )
    return FieldDef(
        title=title,
        uidt=uidt,
        required=_flag(spec.get("required"), "required", title),
        unique=_flag(spec.get("unique"), "unique", title),
        options=_options(spec.get("options"), uidt, title),
        precision=precision,
        scale=scale,
    )


def _one_of(spec: Mapping[str, Any], key: str, alias: str, title: str | None) -> Any:
    value, other = spec.get(key), spec.get(alias)
    if value is not None and other is not None and value != other:
        raise FieldError(f"both {key}={value!r} and {alias}={other!r} given; keep only {key}", title)
    return value if value is not None else other


# --------------------------------------------------------------------------------------------------------------------
# Value converters: each takes a non-empty value and returns the database value or raises FieldError(reason).

_FULLWIDTH = str.maketrans(
    {
        **{chr(0xFF10 + i): str(i) for i in range(10)},
        "，": ",",
        "．": ".",
        "－": "-",
        "−": "-",
        "＋": "+",
        "\u3000": " ",
        "％": "%",
    }
)
_MAGNITUDE_WORDS = ("万", "亿", "千", "百", "十", "bn", "BN", "Bn", "k", "K", "m", "M", "b", "B", "w", "W")
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_FLOAT_EXACT = 2**53
_HAS_DECIMALS = "has decimals; an 整数 field takes whole numbers (use a 数字 field for decimals)"


def _number_text(raw: str) -> str:
    """Plain ASCII number text ``[-]digits[.digits]`` from user text, or FieldError.

    Full-width digits and signs become half-width; thousands separators are removed only when they group by three
    (``1,234,567``) so a decimal comma (``12,5``) is never misread; magnitude words, %, exponents are refused.
    """
    text = raw.strip()
    if not text.isascii():
        text = text.translate(_FULLWIDTH).strip()
    sign = ""
    if text[:1] in ("-", "+"):
        sign, text = ("-" if text[0] == "-" else ""), text[1:]
    whole, dot, frac = text.partition(".")
    if "," in whole:
        groups = whole.split(",")
        if not (1 <= len(groups[0]) <= 3 and all(len(g) == 3 for g in groups[1:])):
            raise FieldError(
                f"{raw!r}: commas are read only as thousands separators (1,234,567); write decimals with a point"
            )
        whole = "".join(groups)
    if text.isascii() and (whole or frac) and (not whole or whole.isdigit()) and (not frac or frac.isdigit()):
        return sign + (whole or "0") + (dot + frac if frac else "")
    raise FieldError(_number_problem(raw))


def _number_problem(raw: str) -> str:
    text = raw.strip().translate(_FULLWIDTH)
    has_digit = any(c.isdigit() for c in text)
    for word in _MAGNITUDE_WORDS:
        if has_digit and word in text:
            return (
                f"{raw!r} contains the magnitude word {word!r}, which is never converted; write the full number "
                "(e.g. 35000 for 3.5万, 1200 for 1.2k)"
            )
    if "%" in text:
        return f"{raw!r} has a percent sign; write the plain number (0.125 as a fraction, or 12.5 as points)"
    if "e" in text.lower() and has_digit:
        return f"{raw!r} is in exponent notation; write the number out in full"
    return f"{raw!r} is not a number; write digits, e.g. 12345 or 1,234.5"


def _to_int(value: Any) -> int:
    cls = value.__class__
    if cls is int:
        result = value
    elif cls is str:
        if len(value) < 19 and value.isdigit() and value.isascii():
            return int(value)  # the common case: plain digits, and fewer than 19 of them always fit a bigint
        text = _number_text(value)
        whole, _, frac = text.partition(".")
        if frac.strip("0"):
            raise FieldError(f"{value!r} {_HAS_DECIMALS}")
        result = int(whole)
    elif cls is float:
        if not math.isfinite(value):
            raise FieldError(f"{value!r} is not a number")
        if not value.is_integer():
            raise FieldError(f"{value!r} {_HAS_DECIMALS}")
        if abs(value) >= _FLOAT_EXACT:
            raise FieldError(f"{value!r} is too large to be exact as a floating-point number; pass it as text")
        result = int(value)
    elif cls is bool:
        raise FieldError(f"{value!r} is true/false, not a number")
    elif isinstance(value, int):
        result = int(value)
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise FieldError(f"{value!r} is not a number")
        if value != value.to_integral_value():
            raise FieldError(f"{value} {_HAS_DECIMALS}")
        result = int(value)
    else:
        raise FieldError(f"expected a whole number, got {type(value).__name__}")
    if not _INT_MIN <= result <= _INT_MAX:
        raise FieldError(f"{value!r} is outside the 整数 range (±9.2e18); use a 数字 field")
    return result


def _numeric_converter(precision: int, scale: int) -> Callable[[Any], Decimal]:
    quantum = Decimal(1).scaleb(-scale)
    limit = Decimal(10) ** (precision - scale)  # |value| must be < limit after rounding
    # rounding half away from zero, as PostgreSQL does when it stores into numeric(p,s); passed positionally
    # because keyword arguments make Decimal.quantize several times slower
    context = Context(
        prec=precision + 40,
        rounding=ROUND_HALF_UP,
        Emax=MAX_NUMERIC_PRECISION * 4,
        Emin=-MAX_NUMERIC_PRECISION * 4,
    )
    too_large = (
        f"is too large: numeric({precision},{scale}) holds at most {precision - scale} digits before the decimal "
        "point; widen the field's precision"
    )

    def convert(value: Any) -> Decimal:
        cls = value.__class__
        try:
            if cls is str:
                if value.isascii() and value.replace(".", "", 1).isdigit():
                    number = Decimal(value)  # the common case: plain digits with at most one point
                else:
                    number = Decimal(_number_text(value))
            elif cls is int:
                number = Decimal(value)
            elif cls is float:
                if not math.isfinite(value):
                    raise FieldError(f"{value!r} is not a number")
                number = Decimal(repr(value))  # shortest repr: 0.1 stays 0.1
            elif cls is bool:
                raise FieldError(f"{value!r} is true/false, not a number")
            elif isinstance(value, Decimal):
                if not value.is_finite():
                    raise FieldError(f"{value!r} is not a number")
                number = value
            elif isinstance(value, int):
                number = Decimal(int(value))
            else:
                raise FieldError(f"expected a number, got {type(value).__name__}")
            number = number.quantize(quantum, None, context)
        except InvalidOperation:
            raise FieldError(f"{value!r} {too_large}") from None
        if number.copy_abs() >= limit:  # copy_abs: abs() would round to the default 28 digits
            raise FieldError(f"{value!r} {too_large}")
        return number

    return convert


def _to_text(value: Any) -> str:
    cls = value.__class__
    if cls is str:
        if "\x00" in value:
            raise FieldError("contains a NUL character (\\x00), which PostgreSQL text cannot hold; remove it")
        return value
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


def _to_date(value: Any) -> date:
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
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None and value.time() == time(0):
            return value.date()
        raise FieldError(f"{value.isoformat()} has a time of day; a 日期 field takes a date (use 日期时间 for times)")
    if isinstance(value, date):
        return date(value.year, value.month, value.day)
    raise FieldError(f"expected an ISO date YYYY-MM-DD, got {type(value).__name__}")


def _datetime_converter(naive_tz: tzinfo) -> Callable[[Any], datetime]:
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


def _to_time(value: Any) -> time:
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
        if value.tzinfo is not None:
            raise FieldError(f"{value.isoformat()} carries a time zone; a 时间 field holds a plain time of day")
        return value
    raise FieldError(f"expected a time HH:MM[:SS], got {type(value).__name__}")


_TRUE = frozenset({"true", "t", "yes", "y", "1", "on", "checked", "是", "真", "对", "有", "√", "✓", "✔"})
_FALSE = frozenset({"false", "f", "no", "n", "0", "off", "unchecked", "否", "假", "错", "无", "×", "✗", "✘"})


def _to_bool(value: Any) -> bool:
    cls = value.__class__
    if cls is bool:
        return value
    if cls is str:
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    elif cls is int and value in (0, 1):
        return value == 1
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


def _single_converter(options: tuple[str, ...]) -> Callable[[Any], str]:
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


def _multi_converter(options: tuple[str, ...]) -> Callable[[Any], list[str] | None]:
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


def _to_email(value: Any) -> str:
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


def _to_phone(value: Any) -> str:
    cls = value.__class__
    if cls is int:
        text = str(value)
    elif cls is float and value.is_integer() and 0 <= value < 1e15:
        text = str(int(value))
    elif cls is str:
        text = value.strip()
        if not text.isascii():
            text = text.translate(_FULLWIDTH).replace("（", "(").replace("）", ")")
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


def _to_url(value: Any) -> str:
    if value.__class__ is not str:
        raise FieldError(f"expected a link as text, got {type(value).__name__}")
    text = value.strip()
    lower = text[:8].lower()
    start = 7 if lower.startswith("http://") else 8 if lower.startswith("https://") else 0
    if start and len(text) > start and text[start] not in "/?#:" and len(text.split()) == 1:
        return text
    if not start:
        raise FieldError(f"{value!r} is not an http(s) link; write the full address, e.g. https://example.com/page")
    raise FieldError(f"{value!r} is not a valid http(s) link (no host, or contains spaces)")


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, date | time):
        return value.isoformat()
    raise TypeError(type(value).__name__)


_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=_json_default)


def _to_json(value: Any) -> str:
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


# --------------------------------------------------------------------------------------------------------------------
# Row validation


def _converter(field: FieldDef, naive_tz: tzinfo) -> Callable[[Any], Any]:
    uidt = field.uidt
    if uidt in ("文本", "长文本"):
        return _to_text
    if uidt == "整数":
        return _to_int
    if uidt == "数字":
        precision, scale = (field.precision, field.scale or 0) if field.precision is not None else DEFAULT_NUMERIC
        return _numeric_converter(precision, scale)
    if uidt == "日期":
        return _to_date
    if uidt == "日期时间":
        return _datetime_converter(naive_tz)
    if uidt == "时间":
        return _to_time
    if uidt == "勾选":
        return _to_bool
    if uidt == "单选":
        return _single_converter(field.options)
    if uidt == "多选":
        return _multi_converter(field.options)
    if uidt == "邮箱":
        return _to_email
    if uidt == "电话":
        return _to_phone
    if uidt == "链接":
        return _to_url
    if uidt == "JSON":
        return _to_json
    raise FieldError(f"field {field.title!r} has an unknown type {uidt!r}", field.title)


class RowValidator:
    """A table's fields compiled once into per-field converters; :meth:`validate` checks one row at a time.

    ``naive_tz`` is the zone a 日期时间 without an offset is read in (UTC by default; pass the organisation's zone,
    e.g. ``ZoneInfo("Asia/Shanghai")``, when users type local times).
    """

    def __init__(self, fields: Sequence[FieldDef], *, naive_tz: tzinfo = UTC) -> None:
        self.fields: dict[str, FieldDef] = {}
        self._converters: dict[str, Callable[[Any], Any]] = {}
        for field in fields:
            if field.title in self.fields:
                raise FieldError(f"field {field.title!r} is defined twice", field.title)
            self.fields[field.title] = field
            self._converters[field.title] = _converter(field, naive_tz)
        self._required = tuple(f.title for f in fields if f.required)
        # the system columns can be filtered on (never written): id as 整数, created_at as 日期时间
        self._system: dict[str, Callable[[Any], Any]] = {"id": _to_int, "created_at": _datetime_converter(naive_tz)}

    def convert(self, title: str, value: Any) -> Any:
        """One value for one field (e.g. a filter value): the database value, None for empty, or FieldError.

        Also converts values for the system columns id and created_at, which rows cannot write."""
        converter = self._converters.get(title) or self._system.get(title)
        if converter is None:
            raise FieldError(f"unknown field {title!r}; fields are {', '.join(self.fields)}", title)
        if value is None or (value.__class__ is str and not value.strip()):
            return None
        try:
            return converter(value)
        except FieldError as exc:
            raise FieldError(f"{title}: {exc}", title) from None

    def validate(self, row: Mapping[str, Any], *, insert: bool) -> tuple[dict[str, Any], list[str], list[str]]:
        """(converted values keyed by field title, dropped unknown field names, errors as 'field: reason' strings).

        Only the fields present in ``row`` are returned; empty text (also whitespace only) becomes None. On insert a
        required field that is missing or empty is an error; on update it is not checked (§7.5).
        """
        if row.__class__ is not dict and not isinstance(row, Mapping):
            return {}, [], [f"(row): expected an object {{field: value}}, got {type(row).__name__}"]
        converters = self._converters
        values: dict[str, Any] = {}
        dropped: list[str] = []
        errors: list[str] = []
        for key, value in row.items():
            converter = converters.get(key)
            if converter is None:
                stripped = key.strip() if isinstance(key, str) else None
                converter = converters.get(stripped) if stripped else None
                if converter is None:
                    dropped.append(str(key))
                    continue
                if stripped in values or stripped in row:
                    errors.append(f"{stripped}: given twice (as {key!r} and {stripped!r}); keep one")
                    continue
                key = stripped
            if value is None or (value.__class__ is str and (not value or value.isspace())):
                values[key] = None
                continue
            try:
                values[key] = converter(value)
            except FieldError as exc:
                errors.append(f"{key}: {exc}")
            except (ValueError, TypeError, ArithmeticError) as exc:  # defensive: never crash a batch
                errors.append(f"{key}: {value!r} could not be read as {self.fields[key].uidt} ({exc})")
        if insert:
            for title in self._required:
                if values.get(title) is None and not any(e.startswith(title + ": ") for e in errors):
                    errors.append(f"{title}: required; give a value")
        return values, dropped, errors
