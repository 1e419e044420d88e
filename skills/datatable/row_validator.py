"""Write validation of the datatable skill (spec §7.5): a table's fields compiled into one :class:`RowValidator`.

Pure Python, no database. A table's fields are compiled once into a :class:`RowValidator` (one converter per field);
validating a row is then a dictionary walk plus one small converter call per value, so that insert_from_file can check
100,000 rows in Python at a fraction of the cost of the COPY itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, tzinfo
from typing import Any

from .field_errors import FieldError
from .field_numbers import numeric_converter, to_int
from .field_types import DEFAULT_NUMERIC, FieldDef
from .field_values import (
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
        self._system: dict[str, Callable[[Any], Any]] = {"id": to_int, "created_at": datetime_converter(naive_tz)}

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
