"""Scaffolding of the field tests (tests/datatable/fields/): one value through a field's validator, the canonical
types."""

from __future__ import annotations

from typing import Any

import pytest
from skillyard.builtin_skills.datatable.fields.errors import FieldError
from skillyard.builtin_skills.datatable.fields.types import parse_field
from skillyard.builtin_skills.datatable.fields.validator import RowValidator


def validator(*specs: dict[str, Any], **kwargs: Any) -> Any:
    """The write validator of fields given as definitions."""
    return RowValidator([parse_field(s) for s in specs], **kwargs)


def one(uidt: str, value: Any, **spec: Any) -> Any:
    """The converted value of one field of type uidt, or raise FieldError with the row's error."""
    v = validator({"title": "f", "uidt": uidt, **spec})
    values, dropped, errors = v.validate({"f": value}, insert=False)
    assert dropped == []
    if errors:
        assert len(errors) == 1 and errors[0].startswith("f: ")
        raise FieldError(errors[0], "f")
    return values["f"]


def refused(uidt: str, value: Any, *fragments: str, **spec: Any) -> str:
    """The message :func:`one` refuses ``value`` with; each fragment must be in it."""
    with pytest.raises(FieldError) as info:
        one(uidt, value, **spec)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


#: The canonical logical types of §7.1, in the spec's order.
CANONICAL = [
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
]


def options_for(canonical: str) -> dict[str, Any]:
    """The options a field of that type needs to be defined (单选 / 多选), else nothing."""
    return {"options": ["a"]} if canonical in ("单选", "多选") else {}
