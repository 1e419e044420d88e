"""References in a chain step's input (skillyard.chains.references): a whole-string ``{{ ref }}`` becomes the
referenced JSON value, one inside a longer string is rendered as text; dot paths with numeric list indexes, nothing
evaluated."""

from __future__ import annotations

from typing import Any

import pytest

from skillyard.chains.references import BadReference, parse, referenced_values, references, render

SCOPE: dict[str, Any] = {
    "trigger": {
        "zero": 0,
        "no": False,
        "nothing": None,
        "empty": "",
        "items": [10, 20, 30],
        "nested": {"a": {"b": "deep"}},
        "symbol": "股票",
        "float": 1.5,
        "code": "{{ run.id }}",
        "digits": {"0": "zero-key"},
    },
    "steps": {
        "fetch": {"ok": True, "rows": [{"v": 1}, {"v": 2}], "count": 2, "empty_list": [], "empty_map": {}},
    },
    "chain": {"name": "digest"},
    "run": {"id": "run-1234", "started_at": "2024-05-01T08:00:00+00:00"},
}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{ trigger.zero }}", 0),
        ("{{ trigger.no }}", False),
        ("{{ trigger.nothing }}", None),
        ("{{ trigger.empty }}", ""),
        ("{{ trigger.items }}", [10, 20, 30]),
        ("{{ trigger.nested }}", {"a": {"b": "deep"}}),
        ("{{ trigger.float }}", 1.5),
        ("{{ steps.fetch.rows }}", [{"v": 1}, {"v": 2}]),
        ("{{ steps.fetch.count }}", 2),
        ("{{ steps.fetch.empty_list }}", []),
        ("{{ steps.fetch.empty_map }}", {}),
        ("{{trigger.zero}}", 0),  # spaces inside the braces are optional
        ("{{   trigger.nested.a.b   }}", "deep"),
    ],
)
def test_a_whole_string_reference_becomes_the_json_value_of_any_type(text, expected):
    value = render(text, SCOPE)
    assert value == expected
    assert type(value) is type(expected)  # 0 stays an int, not False; False stays a bool, not "false"


def test_a_whole_string_reference_to_a_whole_step_envelope():
    assert render("{{ steps.fetch }}", SCOPE) == SCOPE["steps"]["fetch"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("n={{ trigger.zero }}", "n=0"),
        ("b={{ trigger.no }}", "b=false"),
        ("x={{ trigger.nothing }}", "x=null"),
        ("[{{ trigger.empty }}]", "[]"),
        ("items {{ trigger.items }}", "items [10, 20, 30]"),
        ("map {{ trigger.nested }}", 'map {"a": {"b": "deep"}}'),
        ("price of {{ trigger.symbol }} today", "price of 股票 today"),  # strings as they are, not JSON-quoted
        ("{{ chain.name }}/{{ run.id }}", "digest/run-1234"),
        ("{{ trigger.zero }}{{ trigger.no }}", "0false"),
        (" {{ trigger.zero }}", " 0"),  # not exactly one reference: text
        ("{{ trigger.zero }} ", "0 "),
    ],
)
def test_a_reference_inside_a_longer_string_is_rendered_as_text(text, expected):
    assert render(text, SCOPE) == expected


def test_non_ascii_values_are_rendered_as_themselves_not_escaped():
    scope = {"trigger": {"m": {"城市": "上海"}}}
    assert render("m: {{ trigger.m }}", scope) == 'm: {"城市": "上海"}'
    assert render("{{ trigger.m }}", scope) == {"城市": "上海"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{ trigger.items.0 }}", 10),
        ("{{ trigger.items.2 }}", 30),
        ("{{ trigger.items.-1 }}", 30),
        ("{{ trigger.items.-3 }}", 10),
        ("{{ trigger.items.3 }}", None),  # out of range: None, no IndexError
        ("{{ trigger.items.-4 }}", None),
        ("{{ trigger.items.999999999999 }}", None),
        ("{{ steps.fetch.rows.1.v }}", 2),
        ("{{ steps.fetch.rows.-1.v }}", 2),
        ("{{ steps.fetch.rows.5.v }}", None),
        ("{{ trigger.items.x }}", None),  # a name on a list
        ("{{ trigger.items.1e0 }}", None),
        ("{{ trigger.digits.0 }}", "zero-key"),  # a digit on a mapping is a key
    ],
)
def test_numeric_list_indexes(text, expected):
    assert render(text, SCOPE) == expected


def test_a_non_ascii_digit_is_no_list_index_and_does_not_raise():
    """``'²'.isdigit()`` is true yet ``int('²')`` raises: such a segment reads nothing rather than failing the step."""
    assert render("{{ trigger.items.² }}", SCOPE) is None
    assert render("{{ trigger.items.١ }}", SCOPE) is None  # an Arabic-Indic one: ASCII digits only


@pytest.mark.parametrize(
    "text",
    [
        "{{ trigger.missing }}",
        "{{ trigger.nested.a.b.c }}",  # below a string
        "{{ trigger.zero.x }}",  # below a number
        "{{ trigger.nothing.x }}",  # below null
        "{{ steps.absent.rows }}",  # a step that has not run (or did not succeed)
        "{{ steps.fetch.rows.0.v.w }}",
    ],
)
def test_a_missing_path_is_none(text):
    assert render(text, SCOPE) is None
    assert render(f"v={text}", SCOPE) == "v=null"


def test_missing_roots_in_the_scope_read_as_none():
    assert render("{{ trigger.a }}", {}) is None
    assert render("{{ steps.a.b }}", {"steps": {}}) is None


def test_run_and_chain_fields():
    assert render("{{ run.id }}", SCOPE) == "run-1234"
    assert render("{{ run.started_at }}", SCOPE) == "2024-05-01T08:00:00+00:00"
    assert render("{{ chain.name }}", SCOPE) == "digest"
    assert render("run {{ run.id }} of {{ chain.name }} at {{ run.started_at }}", SCOPE) == (
        "run run-1234 of digest at 2024-05-01T08:00:00+00:00"
    )


def test_render_walks_mappings_and_lists_and_leaves_other_values_alone():
    value = {
        "a": "{{ trigger.zero }}",
        "b": ["{{ trigger.items.1 }}", "x {{ chain.name }}", 5, None, True],
        "c": {"d": "{{ steps.fetch.rows.0 }}"},
        "plain": "no braces here",
        "n": 3.25,
        "{{ trigger.zero }}": "keys are not rendered",
    }
    assert render(value, SCOPE) == {
        "a": 0,
        "b": [20, "x digest", 5, None, True],
        "c": {"d": {"v": 1}},
        "plain": "no braces here",
        "n": 3.25,
        "{{ trigger.zero }}": "keys are not rendered",
    }
    assert value["a"] == "{{ trigger.zero }}"  # the input itself is not changed


def test_a_referenced_value_that_looks_like_a_reference_is_not_rendered_again():
    """No second pass: a trigger value of ``{{ run.id }}`` arrives as that text, in both forms."""
    assert render("{{ trigger.code }}", SCOPE) == "{{ run.id }}"
    assert render("x {{ trigger.code }}", SCOPE) == "x {{ run.id }}"


def test_two_adjacent_references_are_text_not_one_bad_reference():
    """``{{ a }}{{ b }}`` is two references in a text; the whole-string rule must not read it as one reference
    ``a }}{{ b`` (chain add accepts it, so a failure here would only show when the step runs)."""
    assert render("{{ chain.name }}{{ run.id }}", SCOPE) == "digestrun-1234"
    assert render("{{ trigger.items.0 }}{{ trigger.items.1 }}", SCOPE) == "1020"
    assert [r.text for _, r in references({"x": "{{ chain.name }}{{ run.id }}"})] == ["chain.name", "run.id"]


@pytest.mark.parametrize(
    "inner",
    [
        "steps.fetch.rows | upper",
        "steps.fetch.count + 1",
        "1+1",
        "__import__('os').system('true')",
        "trigger['x']",
        "trigger.a b",
        "trigger..a",
        "trigger.",
        "",
        "   ",
        "lambda: 1",
        "os.environ",
        "env.HOME",
        "run.foo",
        "run",
        "chain",
        "chain.name.x",
        "steps",
    ],
)
def test_anything_but_a_root_and_a_dot_path_is_refused(inner):
    with pytest.raises(BadReference):
        parse(inner)
    with pytest.raises(BadReference):
        list(references({"x": "{{" + inner + "}}"}))


def test_no_code_is_evaluated_and_attribute_names_read_nothing():
    """A path segment is a key or an index, never an attribute: ``__class__`` of a mapping is just a missing key."""
    assert render("{{ trigger.__class__ }}", SCOPE) is None
    assert render("{{ trigger.nested.__dict__ }}", SCOPE) is None
    assert render("{{ trigger.items.__len__ }}", SCOPE) is None


@pytest.mark.parametrize("text", ["trigger.symbol|upper", "trigger.items[0]", "trigger.items.+1", "trigger.a(b)"])
def test_a_filter_or_subscript_written_without_spaces_is_refused_too(text):
    """A segment is a name (any script), digits, ``_`` or ``-``: ``x|upper`` or ``items[0]`` is no key anybody
    meant, so it is refused when the chain is added instead of reading null at run time."""
    with pytest.raises(BadReference, match="is not a reference"):
        parse(text)
    assert parse("trigger.价格.close_1.-1").path == ("价格", "close_1", "-1")
    assert render("{{ trigger.items.0 }}", SCOPE) == 10


def test_references_name_their_places():
    found = list(
        references(
            {"a": "{{ trigger.x }}", "b": ["plain", {"c": "x {{ steps.fetch.rows }} {{ run.id }}"}]},
        )
    )
    assert [(place, ref.root, ref.path) for place, ref in found] == [
        ("input.a", "trigger", ("x",)),
        ("input.b.1.c", "steps", ("fetch", "rows")),
        ("input.b.1.c", "run", ("id",)),
    ]
    assert found[1][1].step == "fetch" and found[0][1].step is None


@pytest.mark.parametrize(
    "text",
    ["{{ trigger.x", "a {{ trigger.x } b", "{{ trigger.x }} and {{ trigger.y", "}} {{ trigger.x"],
)
def test_an_opening_without_a_closing_is_refused_with_its_place(text):
    with pytest.raises(BadReference, match=r"input\.v: '\{\{' without a closing '\}\}'"):
        list(references({"v": text}))


def test_a_bad_reference_names_its_place():
    with pytest.raises(BadReference, match=r"^input\.list\.1: "):
        list(references({"list": ["{{ trigger.ok }}", "{{ nope.x }}"]}))


def test_referenced_values_reads_only_earlier_steps():
    step_input = {"a": "{{ trigger.x }}", "b": "{{ steps.fetch.count }}", "c": "n {{ steps.fetch.missing }}"}
    found = [(place, ref.text, value) for place, ref, value in referenced_values(step_input, SCOPE)]
    assert found == [("input.b", "steps.fetch.count", 2), ("input.c", "steps.fetch.missing", None)]
