"""Field types of the datatable skill: the logical types and their aliases, identifier rules and field definitions
(spec §7.1).

Pure Python, no database; the value converters are in values.py / numbers.py and a table's validator in validator.py.

Decisions (the reasons are next to the code):

* 日期时间 is ``timestamptz`` (:meth:`FieldDef.pg_type`).
* 多选 is ``text[]``.
* JSON is ``text`` holding JSON (the SQL channel refuses jsonb).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from ..store.names import MAX_NAME_BYTES
from .errors import FieldError
from .numbers import MAX_NUMERIC_PRECISION
from .values import to_bool

__all__ = [
    "CANONICAL_TYPES",
    "DEFAULT_NUMERIC",
    "IDENTIFIER_RE",
    "MAX_IDENTIFIER_CHARS",
    "PRESETS",
    "SELECT_TYPES",
    "SYSTEM_COLUMNS",
    "TYPES",
    "FieldDef",
    "check_identifier",
    "parse_field",
]


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


#: The columns the platform gives every table (never business fields, never written by a row).
SYSTEM_COLUMNS: frozenset[str] = frozenset({"id", "created_at"})


#: The types whose values are chosen from the field's options.
SELECT_TYPES: frozenset[str] = frozenset({"单选", "多选"})


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


MAX_IDENTIFIER_CHARS = 50


_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"


#: §7.1: Chinese characters, ASCII letters, digits and underscore, not starting with a digit (the SQL channel's guard
#: holds the names it creates to the same rule).
IDENTIFIER_RE = re.compile(f"[A-Za-z_{_CJK}][A-Za-z0-9_{_CJK}]*")


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
    if not IDENTIFIER_RE.fullmatch(stripped):
        if "0" <= stripped[0] <= "9":
            reason = "must not start with a digit"
        else:
            bad = sorted({c for c in stripped if not IDENTIFIER_RE.fullmatch("a" + c)})
            reason = f"contains {' '.join(repr(c) for c in bad)}"
        raise FieldError(
            f"the {what} name {stripped!r} {reason}; use only Chinese characters, letters, digits and underscore, "
            "not starting with a digit (e.g. 「容差%」→「容差百分比」)",
            stripped,
        )
    # a Chinese character is 3 bytes in UTF-8: a longer name would be silently cut and two long names could collide
    if len(stripped.encode()) > MAX_NAME_BYTES:
        raise FieldError(
            f"the {what} name {stripped!r} is {len(stripped.encode())} bytes in UTF-8; PostgreSQL keeps only "
            f"{MAX_NAME_BYTES} (about 21 Chinese characters); shorten it",
            stripped,
        )
    return stripped


_FIELD_KEYS = frozenset({"title", "name", "uidt", "type", "required", "unique", "options", "precision", "scale"})


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
        return to_bool(value)
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
    if uidt in SELECT_TYPES and not seen:
        raise FieldError(
            f'field {title!r}: a {uidt} field needs its options, e.g. "options": ["选项一", "选项二"]', title
        )
    if uidt not in SELECT_TYPES and seen:
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
