"""Chain files (skillyard.chains.definition): read_chain_file / parse_chain check everything before a chain is
stored, and name every problem by its place, all at once."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from skillyard.chains.definition import (
    MAX_FILE_BYTES,
    MAX_STEPS,
    Chain,
    ChainInvalid,
    Retry,
    parse_chain,
    read_chain_file,
)

SKILLS = {"fetch", "save", "notify"}


def exists(name: str) -> bool:
    return name in SKILLS


def read(text: str) -> Chain:
    return read_chain_file(textwrap.dedent(text), "chain.yaml", exists)


def problems(text: str) -> list[str]:
    with pytest.raises(ChainInvalid) as caught:
        read(text)
    assert caught.value.problems, "a ChainInvalid lists its problems"
    return caught.value.problems


def data_problems(data: Any) -> list[str]:
    with pytest.raises(ChainInvalid) as caught:
        parse_chain(data, "chain.yaml", exists)
    return caught.value.problems


def one_problem(text: str) -> str:
    found = problems(text)
    assert len(found) == 1, found
    return found[0]


VALID = """
    name: price_digest
    description: Daily prices
    role_id: analyst
    identity: {org_id: acme, team_role: owner, actor_id: u1}
    timeout_s: 600
    steps:
      - id: fetch
        skill: fetch
        input: {symbol: "{{ trigger.symbol }}", at: "{{ run.started_at }}"}
        retry: {max: 2, backoff_s: 0.5}
        timeout_s: 30
      - id: save
        skill: save
        input:
          rows: "{{ steps.fetch.rows }}"
          first: "{{ steps.fetch.rows.0.price }}"
          title: "{{ chain.name }} run {{ run.id }}"
        allow_empty: true
"""


def test_a_valid_chain_is_read_with_every_field():
    chain = read(VALID)
    assert chain.name == "price_digest"
    assert chain.description == "Daily prices"
    assert chain.role_id == "analyst"
    assert chain.identity == {"org_id": "acme", "team_role": "owner", "actor_id": "u1"}
    assert chain.timeout_s == 600.0
    assert [s.id for s in chain.steps] == ["fetch", "save"]
    fetch, save = chain.steps
    assert fetch.skill == "fetch" and fetch.retry == Retry(2, 0.5) and fetch.timeout_s == 30.0
    assert fetch.input == {"symbol": "{{ trigger.symbol }}", "at": "{{ run.started_at }}"}
    assert save.allow_empty is True and save.retry == Retry() and save.timeout_s is None
    assert chain.after("fetch") is save and chain.after("save") is None and chain.step("save") is save


def test_defaults_of_a_minimal_chain():
    chain = read("name: a\nsteps:\n  - {id: s, skill: fetch}\n")
    assert chain.description == "" and chain.role_id == "" and chain.identity == {} and chain.timeout_s is None
    (step,) = chain.steps
    assert step.input == {} and step.retry == Retry(3, 2.0) and step.timeout_s is None and step.allow_empty is False


def test_an_empty_input_or_identity_is_none_at_all():
    chain = read("name: a\nidentity:\nsteps:\n  - id: s\n    skill: fetch\n    input:\n")
    assert chain.identity == {} and chain.steps[0].input == {}


def test_the_stored_form_reads_back_as_the_same_chain():
    """A run re-reads the stored definition (as_json) with parse_chain: the round trip must be exact."""
    chain = read(VALID)
    stored = json.loads(json.dumps(chain.as_json(), ensure_ascii=False))
    assert parse_chain(stored, "stored", lambda _: True) == chain
    minimal = read("name: a\nsteps:\n  - {id: s, skill: fetch}\n")
    assert parse_chain(json.loads(json.dumps(minimal.as_json())), "stored", lambda _: True) == minimal


def test_retry_delay_doubles():
    assert [Retry(3, 2.0).delay(n) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert Retry(1, 0).delay(1) == 0.0


def test_chinese_text_in_inputs_and_description_is_kept():
    chain = read(
        """
        name: hq
        description: 每日行情摘要
        steps:
          - id: fetch
            skill: fetch
            input: {query: "上证指数 {{ trigger.日期 }}", 城市: 上海, list: [北京, "{{ trigger.城市 }}"]}
        """
    )
    assert chain.description == "每日行情摘要"
    assert chain.steps[0].input == {
        "query": "上证指数 {{ trigger.日期 }}",
        "城市": "上海",
        "list": ["北京", "{{ trigger.城市 }}"],
    }
    assert "上证指数" in json.dumps(chain.as_json(), ensure_ascii=False)


def test_a_name_must_be_an_ascii_slug():
    """NAME allows letters, digits, '_', '-' and '.'; ``[A-Za-z0-9]`` is ASCII, so a Chinese name is refused."""
    found = problems("name: 行情\nsteps:\n  - {id: s, skill: fetch}\n")
    assert len(found) == 1 and found[0].startswith("name must be") and "'行情'" in found[0]


# The file as a whole ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "~\n", "null\n"])
def test_an_empty_file_is_one_problem(text):
    assert "this one is empty" in one_problem(text)


@pytest.mark.parametrize(
    ("text", "kind"), [("- a\n- b\n", "a list"), ("just text\n", "a str"), ("42\n", "a int"), ("true\n", "a bool")]
)
def test_a_file_that_is_no_mapping_is_one_problem(text, kind):
    problem = one_problem(text)
    assert "a chain file is a YAML mapping with name and steps" in problem and kind in problem


def test_parse_chain_of_no_mapping():
    assert data_problems(None) == ["a chain file is a YAML mapping with name and steps, this one is empty"]
    assert "a list" in data_problems([{"name": "a"}])[0]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("name: a\nsteps: [\n", 3),
        ("name: a\n  bad: : x\n", 2),
        ("name: a\nsteps:\n  - id: s\n    skill: fetch\n   input: {x: 1}\n", 5),
        ("name: a\nsteps:\n  - {id: s, skill: fetch\n", 4),
        ("name: 'a\n", 2),
        ("name: a\n\tsteps: []\n", 2),
    ],
)
def test_malformed_yaml_is_one_problem_with_its_line(text, line):
    problem = one_problem(text)
    assert problem.startswith("not valid YAML at line "), problem
    assert f"at line {line}," in problem, problem


def test_a_chain_invalid_message_names_the_source():
    with pytest.raises(ChainInvalid) as caught:
        read_chain_file("name: a\nsteps: [\n", "daily.yaml", exists)
    assert str(caught.value).startswith("daily.yaml: not valid YAML")
    with pytest.raises(ChainInvalid) as caught:
        read_chain_file("nope: 1\n", "daily.yaml", exists)
    assert str(caught.value).startswith("daily.yaml: 3 problems")


def test_a_file_over_the_size_limit_is_refused_before_parsing():
    assert "larger than 1,000,000 bytes" in one_problem("name: a\ndescription: " + "x" * MAX_FILE_BYTES + "\n")


def test_the_size_limit_counts_bytes_not_characters():
    text = "name: a\ndescription: " + "中" * (MAX_FILE_BYTES // 3 + 1) + "\nsteps:\n  - {id: s, skill: fetch}\n"
    assert len(text) < MAX_FILE_BYTES
    assert "larger than" in one_problem(text)


def test_a_file_just_under_the_limit_is_read():
    head = "name: a\nsteps:\n  - {id: s, skill: fetch}\ndescription: "
    chain = read_chain_file(head + "x" * (MAX_FILE_BYTES - len(head) - 1) + "\n", "big.yaml", exists)
    assert len(chain.description) == MAX_FILE_BYTES - len(head) - 1


def test_deeply_nested_brackets_are_refused():
    problem = one_problem("name: a\nsteps:\n  - {id: s, skill: fetch, input: {x: " + "[" * 1000 + "]" * 1000 + "}}\n")
    assert "nested too deeply" in problem and "chain file" in problem and "frontmatter" not in problem


def test_deeply_nested_block_yaml_does_not_crash():
    text = "name: a\nsteps:\n  - id: s\n    skill: fetch\n    input:\n      x:\n" + "".join(
        " " * (8 + 2 * i) + f"k{i}:\n" for i in range(400)
    )
    try:
        chain = read(text)
    except ChainInvalid as exc:  # too deep to read is a problem, never a RecursionError
        assert "nested too deeply" in exc.problems[0]
    else:
        assert chain.steps[0].input["x"]["k0"]["k1"] is not None


def test_an_alias_bomb_is_refused():
    text = "name: a\nsteps:\n  - {id: s, skill: fetch}\n" + "".join(
        f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 9) if i else '1, 2'}]\n" for i in range(8)
    )
    problem = one_problem(text)
    assert "aliases expand to too many values" in problem and "frontmatter" not in problem


def test_a_self_referencing_alias_is_refused():
    assert "too" in one_problem("name: a\nsteps: &s [*s]\n")


def test_plain_aliases_are_expanded():
    chain = read(
        """
        name: a
        steps:
          - {id: one, skill: fetch, input: &common {limit: 5, tags: [x]}}
          - {id: two, skill: save, input: *common}
        """
    )
    assert chain.steps[0].input == chain.steps[1].input == {"limit": 5, "tags": ["x"]}


def test_yaml_1_2_scalars():
    """The loader is the frontmatter's YAML 1.2 core schema: ``yes`` and ``12:30`` are text, ``010`` is ten."""
    chain = read("name: a\nsteps:\n  - {id: s, skill: fetch, input: {a: yes, b: 12:30, c: 010, d: 2024-01-02}}\n")
    assert chain.steps[0].input == {"a": "yes", "b": "12:30", "c": 10, "d": "2024-01-02"}


def test_a_top_level_key_written_twice_is_a_problem():
    """YAML keeps the last of two equal keys: a second ``steps:`` would silently drop the first list."""
    found = problems("name: a\nsteps:\n  - {id: one, skill: fetch}\nsteps:\n  - {id: two, skill: save}\n")
    assert found == ["the key 'steps' appears twice; keep one"]


def test_a_twice_written_key_is_reported_beside_the_other_problems():
    found = problems("name: a\nname: b\nbogus: 1\nsteps: []\n")
    assert found[0] == "the key 'name' appears twice; keep one"
    assert any("unknown key 'bogus'" in p for p in found) and any(p.startswith("steps must be") for p in found)


# Top-level keys --------------------------------------------------------------------------------------------------


def test_unknown_top_level_keys_are_named_with_the_known_ones():
    found = problems("name: a\nstep: []\nschedule: daily\nsteps:\n  - {id: s, skill: fetch}\n")
    assert found == [
        "unknown key 'schedule' (a chain has description, identity, name, role_id, steps, timeout_s)",
        "unknown key 'step' (a chain has description, identity, name, role_id, steps, timeout_s)",
    ]


@pytest.mark.parametrize("name", [None, "", "-a", ".a", "a b", "a/b", "a" * 129, "a\n", "é"])
def test_bad_names(name):
    found = data_problems({"name": name, "steps": [{"id": "s", "skill": "fetch"}]})
    assert len(found) == 1 and found[0].startswith("name must be 1-128 letters") and repr(name) in found[0]


@pytest.mark.parametrize("name", [123, 1.5, True, ["a"], {"a": 1}])
def test_a_name_that_is_not_a_string_is_refused(name):
    found = data_problems({"name": name, "steps": [{"id": "s", "skill": "fetch"}]})
    assert len(found) == 1 and found[0].startswith("name must be") and f"got {name!r}" in found[0]


def test_a_yaml_name_keeps_the_text_as_written():
    """name is one of the loader's text fields: ``name: 007`` is the chain ``007``, not the number 7;
    a name that is a YAML list is still refused."""
    assert read("name: 007\nsteps:\n  - {id: s, skill: fetch}\n").name == "007"
    assert one_problem("name: [a]\nsteps:\n  - {id: s, skill: fetch}\n").startswith("name must be")


@pytest.mark.parametrize("name", ["a", "A1", "price_digest", "daily.v2-x", "0", "a" * 128])
def test_good_names(name):
    assert parse_chain({"name": name, "steps": [{"id": "s", "skill": "fetch"}]}, "x", exists).name == name


@pytest.mark.parametrize(("key", "value"), [("description", 5), ("role_id", ["r"]), ("description", {"a": 1})])
def test_text_fields_must_be_text(key, value):
    found = data_problems({"name": "a", key: value, "steps": [{"id": "s", "skill": "fetch"}]})
    assert found == [f"{key} must be text, not {type(value).__name__}"]


@pytest.mark.parametrize("steps", [None, [], {}, "fetch", {"id": "s", "skill": "fetch"}])
def test_steps_must_be_a_non_empty_list(steps):
    assert data_problems({"name": "a", "steps": steps}) == ["steps must be a non-empty list of {id, skill, input}"]


def test_too_many_steps():
    steps = [{"id": f"s{i}", "skill": "fetch"} for i in range(MAX_STEPS + 1)]
    assert data_problems({"name": "a", "steps": steps}) == [f"a chain has at most {MAX_STEPS} steps, this one has 101"]
    assert len(parse_chain({"name": "a", "steps": steps[:MAX_STEPS]}, "x", exists).steps) == MAX_STEPS


@pytest.mark.parametrize("timeout", [0, -1, 604801, "10", True, float("inf"), float("nan"), [1]])
def test_bad_chain_timeout(timeout):
    found = data_problems({"name": "a", "timeout_s": timeout, "steps": [{"id": "s", "skill": "fetch"}]})
    assert len(found) == 1 and found[0].startswith("timeout_s must be a number of seconds above 0 and at most 604800")


@pytest.mark.parametrize("text", ["timeout_s: .inf", "timeout_s: .nan", "timeout_s: '30'", "timeout_s: 1e9"])
def test_bad_chain_timeout_in_yaml(text):
    assert one_problem(f"name: a\n{text}\nsteps:\n  - {{id: s, skill: fetch}}\n").startswith("timeout_s must be")


# Identity --------------------------------------------------------------------------------------------------------


def test_identity_unknown_keys_are_named():
    found = problems("name: a\nidentity: {org_id: acme, password: x, role_id: r}\nsteps:\n  - {id: s, skill: fetch}\n")
    assert len(found) == 2
    assert found[0].startswith("identity.password is not an identity field (use ")
    assert found[1].startswith("identity.role_id is not an identity field")
    assert "org_id" in found[0] and "team_role" in found[0] and "actor_id" in found[0]


@pytest.mark.parametrize("identity", [[1], [], "acme", 0, False, ""])
def test_identity_must_be_a_mapping(identity):
    found = data_problems({"name": "a", "identity": identity, "steps": [{"id": "s", "skill": "fetch"}]})
    assert len(found) == 1 and found[0].startswith("identity must be a mapping"), found


def test_identity_accepts_the_pass_through_fields():
    identity = {"org_id": "acme", "team_id": "t1", "team_role": "owner", "user_id": "u", "is_admin": False}
    chain = parse_chain({"name": "a", "identity": identity, "steps": [{"id": "s", "skill": "fetch"}]}, "x", exists)
    assert chain.identity == identity


# Steps -----------------------------------------------------------------------------------------------------------


def test_duplicate_step_ids_are_named():
    found = problems(
        """
        name: a
        steps:
          - {id: fetch, skill: fetch}
          - {id: save, skill: save}
          - {id: fetch, skill: notify}
        """
    )
    assert found == ["steps[2] fetch: the step id 'fetch' is used twice; give each step its own id"]


@pytest.mark.parametrize("step_id", ["1a", "a b", "a.b", "", "a" * 65, "é", "-a", None, 5, ["a"], "a\n"])
def test_bad_step_ids(step_id):
    found = data_problems({"name": "a", "steps": [{"id": step_id, "skill": "fetch"}]})
    assert found == [
        f"steps[0]: id must be 1-64 letters, digits, '_' or '-', starting with a letter or '_'; got {step_id!r}"
    ]


@pytest.mark.parametrize("step_id", ["a", "_a", "fetch-prices", "A_1", "a" * 64])
def test_good_step_ids(step_id):
    assert parse_chain({"name": "a", "steps": [{"id": step_id, "skill": "fetch"}]}, "x", exists).steps[0].id == step_id


def test_a_step_that_is_no_mapping():
    assert data_problems({"name": "a", "steps": ["fetch"]}) == ["steps[0] must be a mapping with id, skill and input"]


def test_unknown_step_keys_are_named():
    found = problems("name: a\nsteps:\n  - {id: s, skill: fetch, inputs: {}, retries: 3}\n")
    assert found == [
        "steps[0] s: unknown key 'inputs' (a step has allow_empty, id, input, retry, skill, timeout_s)",
        "steps[0] s: unknown key 'retries' (a step has allow_empty, id, input, retry, skill, timeout_s)",
    ]


def test_an_unknown_skill_is_named_with_the_fix():
    assert one_problem("name: a\nsteps:\n  - {id: s, skill: fecth}\n") == (
        "steps[0] s: no skill named 'fecth' (see `skillyard list`, or pass its --skills-dir)"
    )


@pytest.mark.parametrize("skill", [None, "", "  ", 5, ["fetch"]])
def test_a_missing_skill(skill):
    found = data_problems({"name": "a", "steps": [{"id": "s", "skill": skill}]})
    assert found == [f"steps[0] s: skill must name a skill, got {skill!r}"]


@pytest.mark.parametrize(("value", "kind"), [([1], "list"), ("x", "str"), (3, "int")])
def test_input_must_be_a_mapping(value, kind):
    found = data_problems({"name": "a", "steps": [{"id": "s", "skill": "fetch", "input": value}]})
    assert found == [f"steps[0] s: input must be a mapping of the skill's parameters, not {kind}"]


@pytest.mark.parametrize("value", ["yes", 1, 0, "true"])
def test_allow_empty_must_be_a_boolean(value):
    step = {"id": "s", "skill": "fetch", "allow_empty": value}
    assert data_problems({"name": "a", "steps": [step]}) == [
        f"steps[0] s: allow_empty must be true or false, got {value!r}"
    ]


def test_allow_empty_yes_in_yaml_is_text_and_refused():
    """YAML 1.2: only true/false are booleans, so ``allow_empty: yes`` is the text 'yes' and a problem."""
    assert one_problem("name: a\nsteps:\n  - {id: s, skill: fetch, allow_empty: yes}\n") == (
        "steps[0] s: allow_empty must be true or false, got 'yes'"
    )


@pytest.mark.parametrize(
    ("retry", "expected"),
    [
        (3, "steps[0] s: retry must be a mapping of max and backoff_s, such as {max: 3, backoff_s: 2}"),
        (
            {"max": 1, "delay": 2},
            "steps[0] s: retry must be a mapping of max and backoff_s, such as {max: 3, backoff_s: 2}",
        ),
        ({"max": 11}, "steps[0] s: retry.max must be a whole number from 0 to 10, got 11"),
        ({"max": -1}, "steps[0] s: retry.max must be a whole number from 0 to 10, got -1"),
        ({"max": 1.5}, "steps[0] s: retry.max must be a whole number from 0 to 10, got 1.5"),
        ({"max": True}, "steps[0] s: retry.max must be a whole number from 0 to 10, got True"),
        ({"max": "3"}, "steps[0] s: retry.max must be a whole number from 0 to 10, got '3'"),
        ({"backoff_s": -1}, "steps[0] s: retry.backoff_s must be seconds from 0 to 3600, got -1"),
        ({"backoff_s": 3601}, "steps[0] s: retry.backoff_s must be seconds from 0 to 3600, got 3601"),
        ({"backoff_s": "2"}, "steps[0] s: retry.backoff_s must be seconds from 0 to 3600, got '2'"),
        ({"backoff_s": float("nan")}, "steps[0] s: retry.backoff_s must be seconds from 0 to 3600, got nan"),
    ],
)
def test_bad_retry(retry, expected):
    assert data_problems({"name": "a", "steps": [{"id": "s", "skill": "fetch", "retry": retry}]}) == [expected]


def test_both_retry_fields_wrong_are_two_problems():
    found = data_problems(
        {"name": "a", "steps": [{"id": "s", "skill": "fetch", "retry": {"max": 99, "backoff_s": -5}}]}
    )
    assert len(found) == 2 and "retry.max" in found[0] and "retry.backoff_s" in found[1]


@pytest.mark.parametrize("retry", [{}, {"max": 0}, {"max": 10, "backoff_s": 0}, {"backoff_s": 3600}, {"backoff_s": 1}])
def test_good_retry(retry):
    step = parse_chain({"name": "a", "steps": [{"id": "s", "skill": "fetch", "retry": retry}]}, "x", exists).steps[0]
    assert step.retry == Retry(retry.get("max", 3), float(retry.get("backoff_s", 2.0)))


@pytest.mark.parametrize("timeout", [0, -0.5, 604801, "5", True, [5]])
def test_bad_step_timeout(timeout):
    found = data_problems({"name": "a", "steps": [{"id": "s", "skill": "fetch", "timeout_s": timeout}]})
    assert found == [f"steps[0] s: timeout_s must be a number of seconds above 0 and at most 604800, got {timeout!r}"]


def test_a_step_with_a_bad_id_is_still_checked_and_named_by_position():
    found = data_problems({"name": "a", "steps": [{"id": "1x", "skill": "nope", "retry": {"max": 50}}]})
    assert found == [
        "steps[0]: id must be 1-64 letters, digits, '_' or '-', starting with a letter or '_'; got '1x'",
        "steps[0]: no skill named 'nope' (see `skillyard list`, or pass its --skills-dir)",
        "steps[0]: retry.max must be a whole number from 0 to 10, got 50",
    ]


# References ------------------------------------------------------------------------------------------------------


def test_a_reference_to_a_later_step_is_named_with_the_earlier_ones():
    found = problems(
        """
        name: a
        steps:
          - {id: fetch, skill: fetch}
          - id: save
            skill: save
            input: {rows: "{{ steps.notify.sent }}"}
          - {id: notify, skill: notify}
        """
    )
    assert found == ["steps[1] save: input.rows: {{ steps.notify.sent }} names no earlier step (earlier steps: fetch)"]


def test_a_reference_to_an_unknown_step():
    found = problems(
        "name: a\nsteps:\n  - {id: a, skill: fetch}\n  - {id: b, skill: save, input: {x: '{{ steps.zz.q }}'}}\n"
    )
    assert found == ["steps[1] b: input.x: {{ steps.zz.q }} names no earlier step (earlier steps: a)"]


def test_a_step_cannot_reference_itself():
    found = problems(
        "name: a\nsteps:\n  - {id: a, skill: fetch, input: {x: '{{ steps.a.x }}'}}\n"
        "  - {id: b, skill: save, input: {deep: {list: [1, 'n={{ steps.b.y }}']}}}\n"
    )
    assert found == [
        "steps[0] a: input.x: {{ steps.a.x }} names no earlier step (it is the first step)",
        "steps[1] b: input.deep.list.1: {{ steps.b.y }} names no earlier step (earlier steps: a)",
    ]


def test_a_reference_to_a_step_with_an_invalid_id_is_still_refused():
    found = data_problems(
        {
            "name": "a",
            "steps": [
                {"id": "bad id", "skill": "fetch"},
                {"id": "b", "skill": "save", "input": {"x": "{{ steps.bad }}"}},
            ],
        }
    )
    assert any("{{ steps.bad }} names no earlier step" in p for p in found)


@pytest.mark.parametrize(
    ("ref", "needle"),
    [
        ("{{ foo.bar }}", "starts with 'foo': a reference starts with one of trigger, steps, chain, run"),
        ("{{ env.HOME }}", "starts with 'env'"),
        ("{{ input.x }}", "starts with 'input'"),
        ("{{ run.foo }}", "is not a field of run: use run.id, run.started_at"),
        ("{{ chain.version }}", "is not a field of chain: use chain.name"),
        ("{{ steps }}", "names no step"),
        ("{{ steps.a.x | upper }}", "is not a reference"),
        ("{{ 1+1 }}", "is not a reference"),
        ("{{ 1 + 1 }}", "is not a reference"),
        ("{{ }}", "is not a reference"),
        ("{{ steps.a..x }}", "is not a reference"),
        ("{{ trigger.x", "'{{' without a closing '}}'"),
        ("a {{ trigger.x }} b {{ trigger.y", "'{{' without a closing '}}'"),
    ],
)
def test_bad_references_are_named_by_step_and_place(ref, needle):
    text = (
        f"name: a\nsteps:\n  - {{id: a, skill: fetch}}\n  - {{id: b, skill: save, input: {{v: {json.dumps(ref)}}}}}\n"
    )
    problem = one_problem(text)
    assert problem.startswith("steps[1] b: input.v: "), problem
    assert needle in problem, problem


def test_every_bad_reference_of_a_step_is_named_not_only_the_first():
    found = problems(
        """
        name: a
        steps:
          - {id: a, skill: fetch}
          - id: b
            skill: save
            input:
              x: "{{ run.foo }}"
              y: "{{ chain.id }}"
              z: "{{ steps.later.q }}"
              w: "{{ unclosed"
        """
    )
    assert [p.split(": ")[1] for p in found] == ["input.x", "input.y", "input.z", "input.w"], found
    assert all(p.startswith("steps[1] b: ") for p in found)


def test_references_in_lists_and_nested_mappings_are_checked():
    found = problems(
        "name: a\nsteps:\n  - {id: a, skill: fetch}\n"
        "  - {id: b, skill: save, input: {rows: [{v: '{{ steps.a.rows }}'}, '{{ nope.x }}']}}\n"
    )
    assert len(found) == 1 and found[0].startswith("steps[1] b: input.rows.1: ")


def test_every_problem_of_the_file_at_once():
    found = problems(
        """
        name: "bad name"
        colour: blue
        identity: {org_id: acme, bogus: 1}
        timeout_s: -1
        steps:
          - id: fetch
            skill: missing_skill
            input: {a: "{{ steps.save.x }}"}
            retry: {max: 20}
          - id: fetch
            skill: save
            timeout_s: 0
            allow_empty: maybe
            extra: 1
          - id: "9"
            skill: notify
            input: {b: "{{ 1+1 }}"}
        """
    )
    assert len(found) == 13, found
    text = "\n".join(found)
    for needle in [
        "unknown key 'colour'",
        "name must be",
        "identity.bogus",
        "timeout_s must be a number",
        "steps[0] fetch: no skill named 'missing_skill'",
        "steps[0] fetch: input.a: {{ steps.save.x }} names no earlier step",
        "steps[0] fetch: retry.max",
        "steps[1] fetch: the step id 'fetch' is used twice",
        "steps[1] fetch: timeout_s must be",
        "steps[1] fetch: allow_empty must be true or false",
        "steps[1] fetch: unknown key 'extra'",
        "steps[2]: id must be",
        "steps[2]: input.b: '{{ 1+1 }}'",
    ]:
        assert needle in text, (needle, found)


def test_the_skill_check_is_asked_per_step():
    asked: list[str] = []

    def skill_exists(name: str) -> bool:
        asked.append(name)
        return True

    read_chain_file("name: a\nsteps:\n  - {id: x, skill: one}\n  - {id: y, skill: two}\n", "f", skill_exists)
    assert asked == ["one", "two"]
