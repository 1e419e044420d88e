"""Write validation of the datatable skill (spec §7.5): a table's fields compiled into one :class:`RowValidator`.

Pure Python, no database. A table's fields are compiled once into a :class:`RowValidator` (one converter per field);
validating a row is then a dictionary walk plus one small converter call per value, so that insert_from_file can check
100,000 rows in Python at a fraction of the cost of the COPY itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, tzinfo
from typing import Any

from .errors import FieldError
from .numbers import INT_MAX, INT_MIN, numeric_converter, to_int
from .types import DEFAULT_NUMERIC, FieldDef
from .values import (
    datetime_converter,
    multi_converter,
    single_converter,
    to_bool,
    to_date,
    to_email,
    to_json,
    to_phone,
    to_text,
    to_time,
    to_url,
)

__all__ = ["RowValidator"]


def _converter(field: FieldDef, naive_tz: tzinfo) -> Callable[[Any], Any]:
    uidt = field.uidt
    if uidt in ("文本", "长文本"):
        return to_text
    if uidt == "整数":
        return to_int
    if uidt == "数字":
        precision, scale = (field.precision, field.scale or 0) if field.precision is not None else DEFAULT_NUMERIC
        return numeric_converter(precision, scale)
    if uidt == "日期":
        return to_date
    if uidt == "日期时间":
        return datetime_converter(naive_tz)
    if uidt == "时间":
        return to_time
    if uidt == "勾选":
        return to_bool
    if uidt == "单选":
        return single_converter(field.options)
    if uidt == "多选":
        return multi_converter(field.options)
    if uidt == "邮箱":
        return to_email
    if uidt == "电话":
        return to_phone
    if uidt == "链接":
        return to_url
    if uidt == "JSON":
        return to_json
    raise FieldError(f"field {field.title!r} has an unknown type {uidt!r}", field.title)


#: Fast paths of :meth:`RowValidator.validate` for values that already have the field's type: the value as given,
#: exactly what the field's converter returns for it (to_text: a str without NUL; to_int: an int in the bigint range;
#: single_converter: a str that is one of the options). Anything else goes through the converter.
_GENERIC, _TEXT, _INT, _SINGLE = 0, 1, 2, 3


def _kind(field: FieldDef) -> tuple[int, frozenset[str]]:
    if field.uidt in ("文本", "长文本"):
        return _TEXT, frozenset()
    if field.uidt == "整数":
        return _INT, frozenset()
    if field.uidt == "单选":
        return _SINGLE, frozenset(field.options)
    return _GENERIC, frozenset()


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
        #: per field: (converter, fast-path kind, options of a 单选)
        self._specs: dict[str, tuple[Callable[[Any], Any], int, frozenset[str]]] = {
            title: (self._converters[title], *_kind(field)) for title, field in self.fields.items()
        }
        # the system columns can be filtered on (never written): id as 整数, created_at as 日期时间
        self._system: dict[str, Callable[[Any], Any]] = {"id": to_int, "created_at": datetime_converter(naive_tz)}

    def converters(self) -> dict[str, Callable[[Any], Any]]:
        """Each field's converter (a copy: change one with :meth:`set_converter`)."""
        return dict(self._converters)

    def set_converter(self, title: str, convert: Callable[[Any], Any]) -> None:
        """Replace a field's converter (e.g. a memoizing wrapper for a bulk import) everywhere it is used."""
        self._converters[title] = convert
        _, kind, options = self._specs[title]
        self._specs[title] = (convert, kind, options)

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
        values, dropped, errors, _ = self.validate_row(row, insert=insert)
        return values, dropped, errors

    def validate_row(
        self, row: Mapping[str, Any], *, insert: bool
    ) -> tuple[dict[str, Any], list[str], list[str], bool]:
        """:meth:`validate` plus whether any field got a value (not None): a row without one may be empty."""
        if row.__class__ is not dict and not isinstance(row, Mapping):
            return {}, [], [f"(row): expected an object {{field: value}}, got {type(row).__name__}"], False
        specs = self._specs
        values: dict[str, Any] = {}
        dropped: list[str] = []
        errors: list[str] = []
        has_value = False
        for key, value in row.items():
            spec = specs.get(key)
            if spec is None:
                stripped = key.strip() if isinstance(key, str) else None
                spec = specs.get(stripped) if stripped else None
                if spec is None:
                    dropped.append(str(key))
                    continue
                if stripped in values or stripped in row:
                    errors.append(f"{stripped}: given twice (as {key!r} and {stripped!r}); keep one")
                    continue
                key = stripped
            cls = value.__class__
            if cls is str:
                if not value or value.isspace():
                    values[key] = None
                    continue
                kind = spec[1]
                if (kind == _TEXT and "\x00" not in value) or (kind == _SINGLE and value in spec[2]):
                    values[key] = value
                    has_value = True
                    continue
            elif cls is int:
                if spec[1] == _INT and INT_MIN <= value <= INT_MAX:
                    values[key] = value
                    has_value = True
                    continue
            elif value is None:
                values[key] = None
                continue
            try:
                converted = spec[0](value)
            except FieldError as exc:
                errors.append(f"{key}: {exc}")
                continue
            except (ValueError, TypeError, ArithmeticError) as exc:  # defensive: never crash a batch
                errors.append(f"{key}: {value!r} could not be read as {self.fields[key].uidt} ({exc})")
                continue
            values[key] = converted
            if converted is not None:
                has_value = True
        if insert:
            for title in self._required:
                if values.get(title) is None and not any(e.startswith(title + ": ") for e in errors):
                    errors.append(f"{title}: required; give a value")
        return values, dropped, errors, has_value
