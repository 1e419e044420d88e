"""The empty-result guard (skillyard.chains.guard.empty_reason): a chain stops before a step whose previous step
returned nothing but the platform's own fields, or whose referenced earlier value is null, "", [] or {}; 0 and
false are values; allow_empty opts out."""

from __future__ import annotations

from typing import Any

import pytest

from skillyard.chains.definition import Step
from skillyard.chains.guard import PLATFORM_FIELDS, empty_reason

FETCH = Step("fetch", "fetch_prices", {"symbol": "{{ trigger.symbol }}"})
SAVE = Step("save", "save_rows", {"title": "daily"})

#: Every field of the platform's envelope, each with a non-empty value.
PLATFORM_ONLY: dict[str, Any] = {
    "ok": True,
    "success": True,
    "display_md": "# Prices\n\nnothing today",
    "display_only": True,
    "action_note": "fetched",
    "user_message": "No prices today.",
    "message": "done",
    "async": False,
    "warnings": ["the market was closed"],
    "offloaded": {"path": "out.csv"},
}


def scope(**envelopes: dict[str, Any]) -> dict[str, Any]:
    return {
        "trigger": {"symbol": "X"},
        "steps": envelopes,
        "chain": {"name": "c"},
        "run": {"id": "r", "started_at": "2024-01-01T00:00:00+00:00"},
    }


def test_the_platform_fields_are_exactly_those_of_the_issue():
    assert {
        "ok",
        "success",
        "display_md",
        "display_only",
        "action_note",
        "user_message",
        "message",
        "async",
        "warnings",
        "offloaded",
    } == PLATFORM_FIELDS


def test_an_envelope_with_only_platform_fields_is_empty():
    reason = empty_reason(FETCH, PLATFORM_ONLY, SAVE, scope(fetch=PLATFORM_ONLY))
    assert reason == "step 'fetch' (fetch_prices) returned an empty result, so step 'save' did not start"


@pytest.mark.parametrize("field", sorted(PLATFORM_FIELDS))
def test_each_platform_field_alone_is_still_empty(field):
    envelope = {"ok": True, field: PLATFORM_ONLY[field]}
    assert empty_reason(FETCH, envelope, SAVE, scope(fetch=envelope)) is not None


def test_the_bare_ok_envelope_is_empty():
    envelope = {"ok": True}
    assert empty_reason(FETCH, envelope, SAVE, scope(fetch=envelope)) is not None


@pytest.mark.parametrize("value", [0, False, 0.0, "0", "false", " ", [None], [0], {"a": None}, [[]], -1])
def test_a_field_with_0_false_or_any_other_value_is_not_empty(value):
    envelope = {**PLATFORM_ONLY, "count": value}
    assert empty_reason(FETCH, envelope, SAVE, scope(fetch=envelope)) is None


@pytest.mark.parametrize("value", [None, "", [], {}])
def test_a_field_with_a_blank_value_is_empty(value):
    envelope = {"ok": True, "rows": value, "message": "nothing"}
    assert empty_reason(FETCH, envelope, SAVE, scope(fetch=envelope)) is not None


def test_several_blank_fields_are_empty_and_one_value_among_them_is_not():
    blank = {"ok": True, "rows": [], "total": None, "note": "", "meta": {}}
    assert empty_reason(FETCH, blank, SAVE, scope(fetch=blank)) is not None
    filled = {**blank, "total": 0}
    assert empty_reason(FETCH, filled, SAVE, scope(fetch=filled)) is None


def test_a_field_named_like_a_platform_field_with_different_case_is_a_value():
    envelope = {"ok": True, "Message": "hello"}
    assert empty_reason(FETCH, envelope, SAVE, scope(fetch=envelope)) is None


@pytest.mark.parametrize(("value", "shown"), [(None, "null"), ("", "''"), ([], "[]"), ({}, "{}")])
def test_a_blank_referenced_value_stops_naming_the_step_and_the_reference(value, shown):
    envelope = {"ok": True, "rows": value, "count": 3}  # not empty as a whole: count has a value
    step = Step("save", "save_rows", {"title": "daily", "data": {"rows": "{{ steps.fetch.rows }}"}})
    reason = empty_reason(FETCH, envelope, step, scope(fetch=envelope))
    assert (
        reason == f"step 'save' did not start: input.data.rows references {{{{ steps.fetch.rows }}}}, which is {shown}"
    )


def test_a_reference_to_a_missing_field_stops():
    envelope = {"ok": True, "count": 3}
    step = Step("save", "save_rows", {"rows": "{{ steps.fetch.rows.0 }}"})
    reason = empty_reason(FETCH, envelope, step, scope(fetch=envelope))
    assert reason is not None and "input.rows references {{ steps.fetch.rows.0 }}, which is null" in reason


@pytest.mark.parametrize("value", [0, False, "0", [0], {"a": 0}])
def test_a_referenced_0_or_false_is_a_value(value):
    envelope = {"ok": True, "n": value}
    step = Step("save", "save_rows", {"n": "{{ steps.fetch.n }}", "text": "n is {{ steps.fetch.n }}"})
    assert empty_reason(FETCH, envelope, step, scope(fetch=envelope)) is None


def test_a_blank_value_referenced_inside_a_longer_string_stops_too():
    envelope = {"ok": True, "count": 1, "name": ""}
    step = Step("save", "save_rows", {"title": "prices of {{ steps.fetch.name }}"})
    reason = empty_reason(FETCH, envelope, step, scope(fetch=envelope))
    assert reason == "step 'save' did not start: input.title references {{ steps.fetch.name }}, which is ''"


def test_a_blank_value_of_a_step_before_the_previous_one_stops():
    fetch = {"ok": True, "rows": []}
    enrich = {"ok": True, "rates": {"EUR": 1.1}}
    step = Step("save", "save_rows", {"rows": "{{ steps.fetch.rows }}", "rates": "{{ steps.enrich.rates }}"})
    previous = Step("enrich", "enrich", {})
    reason = empty_reason(previous, enrich, step, scope(fetch=fetch, enrich=enrich))
    assert reason is not None and "{{ steps.fetch.rows }}" in reason and "which is []" in reason


def test_only_references_to_earlier_steps_are_checked_not_trigger_or_run():
    envelope = {"ok": True, "rows": [1]}
    step = Step("save", "save_rows", {"rows": "{{ steps.fetch.rows }}", "blank": "{{ trigger.nothing }}"})
    assert empty_reason(FETCH, envelope, step, scope(fetch=envelope)) is None


def test_the_envelope_rule_is_checked_before_the_reference_rule():
    envelope = {"ok": True, "rows": []}
    step = Step("save", "save_rows", {"rows": "{{ steps.fetch.rows }}"})
    reason = empty_reason(FETCH, envelope, step, scope(fetch=envelope))
    assert reason == "step 'fetch' (fetch_prices) returned an empty result, so step 'save' did not start"


def test_allow_empty_opts_out_of_both_rules():
    envelope = {"ok": True, "rows": []}
    step = Step("save", "save_rows", {"rows": "{{ steps.fetch.rows }}"}, allow_empty=True)
    assert empty_reason(FETCH, envelope, step, scope(fetch=envelope)) is None
    assert empty_reason(FETCH, PLATFORM_ONLY, step, scope(fetch=PLATFORM_ONLY)) is None


def test_allow_empty_on_the_previous_step_does_not_let_the_next_one_through():
    """allow_empty is about the step that would start, not about the one that returned nothing."""
    previous = Step("fetch", "fetch_prices", {}, allow_empty=True)
    assert empty_reason(previous, {"ok": True}, SAVE, scope(fetch={"ok": True})) is not None


def test_the_first_step_is_never_stopped_by_the_envelope_rule():
    assert empty_reason(None, None, FETCH, scope()) is None
    assert empty_reason(None, {"ok": True}, FETCH, scope()) is None  # no previous step: the envelope is ignored
    blank_trigger = Step("fetch", "fetch_prices", {"symbol": "{{ trigger.missing }}"})
    assert empty_reason(None, None, blank_trigger, scope()) is None


def test_a_step_after_a_previous_step_without_an_envelope_is_not_stopped_by_the_envelope_rule():
    assert empty_reason(FETCH, None, SAVE, scope()) is None


def test_an_envelope_with_a_result_is_not_empty():
    envelope = {**PLATFORM_ONLY, "rows": [{"price": 1}]}
    step = Step("save", "save_rows", {"rows": "{{ steps.fetch.rows }}", "first": "{{ steps.fetch.rows.0.price }}"})
    assert empty_reason(FETCH, envelope, step, scope(fetch=envelope)) is None
