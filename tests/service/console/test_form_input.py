"""A run form's submitted fields typed by the skill's schema (service/console/render.py): each field a value of its
type, or a FormError naming the field, whatever text a browser sends."""

from __future__ import annotations

import pytest

from skillyard.service.console.render import FormError, form_fields, input_from_form

SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer", "title": "Count"},
        "ratio": {"type": "number"},
        "filters": {"type": "object", "title": "Filters"},
        "loud": {"type": "boolean"},
        "name": {"type": "string"},
    },
}


def test_fields_are_typed_by_the_schema():
    fields = form_fields(SCHEMA)
    form = {"count": "3", "ratio": "0.5", "filters": '{"a": [1]}', "loud": "on", "name": "Ada"}
    assert input_from_form(fields, form) == {
        "count": 3,
        "ratio": 0.5,
        "filters": {"a": [1]},
        "loud": True,
        "name": "Ada",
    }
    assert input_from_form(fields, {"count": "", "name": ""}) == {}


@pytest.mark.parametrize(
    ("form", "named"),
    [
        ({"count": "three"}, "Count: 'three' is not a number"),
        ({"count": "9" * 5000}, "Count:"),  # past Python's digit limit for int()
        ({"filters": "{not json"}, "Filters: not JSON"),
        ({"filters": "[" * 5000}, "Filters: JSON nested too deeply"),  # json's RecursionError
    ],
)
def test_bad_values_are_form_errors_naming_the_field(form, named):
    with pytest.raises(FormError) as refused:
        input_from_form(form_fields(SCHEMA), form)
    assert str(refused.value).startswith(named)
