"""Plan validation (agent part 2, contract spec §3, §10.1): ``validate_plan`` checks a ``builtin_plan`` call before
it is stored — candidates, unique ids, ``dependsOn`` shape and names, self-dependencies, cycles, the node limit,
non-object nodes, invalid JSON text — and drops a ``target`` that is not a WRITE tool in the node's ``toolNames``.
Every node-level problem names its place (``nodes[1].skillKey …``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillyard.agent.contract_parse import parse_contract
from skillyard.agent.loader import ContractSkill
from skillyard.agent.planner import MAX_PLAN_NODES, PlannedNode, plan_tool, planning_prompt, validate_plan, write_target
from skillyard.agent.state import Join
from support.agent.crm import CONTRACTS, SKILLS, node

MESSAGE = "Acme 的订单"


def skill(folder: str, tools: tuple[str, ...] | None = None, contract: dict[str, Any] | None = None) -> ContractSkill:
    key, description, names = SKILLS[folder]
    parsed, _ = parse_contract(json.dumps(contract or CONTRACTS[folder]), skill_key=key)
    return ContractSkill(key, folder, description, f"The {key} manual.", tools or tuple(names), parsed, None)


@pytest.fixture
def candidates() -> dict[str, ContractSkill]:
    return {s.skill_key: s for s in (skill("customer"), skill("order"), skill("report"))}


def nodes_of(*raw: Any) -> dict[str, Any]:
    return {"nodes": list(raw)}


def test_a_valid_plan_is_returned_in_dependency_order(candidates):
    plan = nodes_of(
        node("n3", "crm.report", "report", ["n2", "n1"]),
        node("n1", "crm.customer", "find Acme"),
        node("n2", "crm.order", "order", ["n1"]),
    )
    nodes, problems, notes = validate_plan(plan, candidates, MESSAGE)
    assert problems == [] and notes == []
    assert [n.plan_id for n in nodes] == ["n1", "n2", "n3"]
    assert nodes[2] == PlannedNode("n3", "crm.report", "report", None, ("n2", "n1"))


def test_independent_nodes_keep_the_plan_order(candidates):
    nodes, problems, _ = validate_plan(
        nodes_of(node("b", "crm.report"), node("a", "crm.customer"), node("c", "crm.order")), candidates, MESSAGE
    )
    assert problems == [] and [n.plan_id for n in nodes] == ["b", "a", "c"]


def test_json_text_arguments_are_accepted(candidates):
    text = json.dumps(nodes_of(node("n1", "crm.customer", "find")))
    nodes, problems, _ = validate_plan(text, candidates, MESSAGE)
    assert problems == [] and [(n.plan_id, n.skill_key, n.goal) for n in nodes] == [("n1", "crm.customer", "find")]


def test_ids_and_dependencies_are_stripped_and_repeated_dependencies_merged(candidates):
    plan = nodes_of(node(" n1 ", "crm.customer"), node("n2", "crm.report", depends=[" n1", "n1 "]))
    nodes, problems, _ = validate_plan(plan, candidates, MESSAGE)
    assert problems == []
    assert [n.plan_id for n in nodes] == ["n1", "n2"] and nodes[1].depends_on == ("n1",)


@pytest.mark.parametrize("goal", [None, "", "   "])
def test_a_missing_or_blank_goal_is_the_message(candidates, goal):
    raw = {"id": "n1", "skillKey": "crm.customer"}
    if goal is not None:
        raw["goal"] = goal
    nodes, problems, _ = validate_plan(nodes_of(raw), candidates, MESSAGE)
    assert problems == [] and nodes[0].goal == MESSAGE


def test_a_null_depends_on_is_no_dependency(candidates):
    raw = {**node("n1", "crm.customer"), "dependsOn": None}
    nodes, problems, _ = validate_plan(nodes_of(raw), candidates, MESSAGE)
    assert problems == [] and nodes[0].depends_on == ()


def test_an_unknown_skill_key_names_its_node_and_the_candidates(candidates):
    nodes, problems, notes = validate_plan(
        nodes_of(node("n1", "crm.customer"), node("n2", "crm.nope")), candidates, MESSAGE
    )
    assert nodes == [] and notes == []
    assert len(problems) == 1
    assert problems[0].startswith("nodes[1].skillKey 'crm.nope'")
    assert all(key in problems[0] for key in candidates)


@pytest.mark.parametrize("key", [None, 7, ""])
def test_a_missing_or_non_text_skill_key_is_a_problem(candidates, key):
    raw: dict[str, Any] = {"id": "n1", "goal": "x"}
    if key is not None:
        raw["skillKey"] = key
    _, problems, _ = validate_plan(nodes_of(raw), candidates, MESSAGE)
    assert len(problems) == 1 and problems[0].startswith("nodes[0].skillKey")


def test_a_duplicate_id_names_the_second_node(candidates):
    nodes, problems, _ = validate_plan(
        nodes_of(node("n1", "crm.customer"), node("n1", "crm.report")), candidates, MESSAGE
    )
    assert nodes == []
    assert len(problems) == 1 and problems[0].startswith("nodes[1].id 'n1'") and "twice" in problems[0]


@pytest.mark.parametrize("plan_id", [None, "", "  ", 3])
def test_a_missing_or_blank_id_is_a_problem(candidates, plan_id):
    raw: dict[str, Any] = {"skillKey": "crm.customer", "goal": "x"}
    if plan_id is not None:
        raw["id"] = plan_id
    _, problems, _ = validate_plan(nodes_of(node("n1", "crm.report"), raw), candidates, MESSAGE)
    assert len(problems) == 1 and problems[0].startswith("nodes[1].id") and "'n2'" in problems[0]


@pytest.mark.parametrize("depends", ["n1", {"n1": True}, [1], ["n1", None]])
def test_depends_on_that_is_not_a_list_of_ids_is_a_problem(candidates, depends):
    raw = {**node("n2", "crm.report"), "dependsOn": depends}
    nodes, problems, _ = validate_plan(nodes_of(node("n1", "crm.customer"), raw), candidates, MESSAGE)
    assert nodes == []
    assert len(problems) == 1 and problems[0].startswith("nodes[1].dependsOn must be a list")


def test_depends_on_an_unknown_id_names_it_and_the_plan_ids(candidates):
    _, problems, _ = validate_plan(
        nodes_of(node("n1", "crm.customer"), node("n2", "crm.report", depends=["n1", "n9"])), candidates, MESSAGE
    )
    assert len(problems) == 1
    assert problems[0].startswith("nodes[1].dependsOn") and "n9" in problems[0] and "n1, n2" in problems[0]


def test_a_later_node_may_be_depended_on(candidates):
    nodes, problems, _ = validate_plan(
        nodes_of(node("n1", "crm.report", depends=["n2"]), node("n2", "crm.customer")), candidates, MESSAGE
    )
    assert problems == [] and [n.plan_id for n in nodes] == ["n2", "n1"]


def test_a_self_dependency_names_the_node(candidates):
    _, problems, _ = validate_plan(nodes_of(node("n1", "crm.customer", depends=["n1"])), candidates, MESSAGE)
    assert len(problems) == 1 and problems[0].startswith("nodes[0] (n1) depends on itself")


@pytest.mark.parametrize(
    "raw",
    [
        [node("a", "crm.customer", depends=["b"]), node("b", "crm.report", depends=["a"])],
        [
            node("a", "crm.customer", depends=["c"]),
            node("b", "crm.report", depends=["a"]),
            node("c", "crm.order", depends=["b"]),
        ],
    ],
)
def test_a_cycle_is_a_problem_naming_the_nodes_on_it(candidates, raw):
    nodes, problems, notes = validate_plan(nodes_of(*raw), candidates, MESSAGE)
    assert nodes == [] and notes == [] and len(problems) == 1
    assert "cycle" in problems[0]
    assert all(n["id"] in problems[0] for n in raw)


def test_a_cycle_behind_a_valid_start_is_found(candidates):
    raw = [
        node("root", "crm.customer"),
        node("a", "crm.report", depends=["root", "b"]),
        node("b", "crm.order", depends=["a"]),
    ]
    _, problems, _ = validate_plan(nodes_of(*raw), candidates, MESSAGE)
    assert len(problems) == 1 and "cycle" in problems[0] and "a" in problems[0] and "b" in problems[0]


def test_too_many_nodes_is_a_problem(candidates):
    raw = [node(f"n{i}", "crm.customer") for i in range(MAX_PLAN_NODES + 1)]
    nodes, problems, _ = validate_plan(nodes_of(*raw), candidates, MESSAGE)
    assert nodes == [] and len(problems) == 1
    assert str(MAX_PLAN_NODES) in problems[0] and str(MAX_PLAN_NODES + 1) in problems[0]
    nodes, problems, _ = validate_plan(nodes_of(*raw[:MAX_PLAN_NODES]), candidates, MESSAGE)
    assert problems == [] and len(nodes) == MAX_PLAN_NODES


@pytest.mark.parametrize("bad", ["crm.customer", 3, None, ["n1"]])
def test_a_node_that_is_not_an_object_names_its_place(candidates, bad):
    nodes, problems, _ = validate_plan(nodes_of(node("n1", "crm.customer"), bad), candidates, MESSAGE)
    assert nodes == [] and len(problems) == 1
    assert problems[0].startswith("nodes[1] must be an object")


@pytest.mark.parametrize("text", ["{nodes: [", '{"nodes": [}', "[1, 2"])
def test_invalid_json_text_is_a_problem_that_says_what_to_send(candidates, text):
    nodes, problems, notes = validate_plan(text, candidates, MESSAGE)
    assert nodes == [] and notes == [] and len(problems) == 1
    assert "not valid JSON" in problems[0] and '{"nodes": [...]}' in problems[0]


@pytest.mark.parametrize("arguments", ["", "  ", {}, {"nodes": []}, {"nodes": {"n1": {}}}, [], '"nodes"', 5])
def test_arguments_without_a_node_list_are_a_problem(candidates, arguments):
    nodes, problems, _ = validate_plan(arguments, candidates, MESSAGE)
    assert nodes == [] and len(problems) == 1 and "'nodes' must be a non-empty list" in problems[0]


def test_every_problem_of_a_plan_is_reported_each_naming_its_node(candidates):
    raw = [
        node("n1", "crm.customer"),
        node("n1", "crm.report"),
        node("n3", "crm.x"),
        {**node("n4", "crm.report"), "dependsOn": "n1"},
        node("n5", "crm.order", depends=["n5"]),
        node("n6", "crm.order", depends=["zz"]),
        "n7",
        {**node("n8", "crm.order"), "goal": 8},
        {**node("n9", "crm.order"), "target": ["createOrder"]},
    ]
    nodes, problems, _ = validate_plan(nodes_of(*raw), candidates, MESSAGE)
    assert nodes == []
    assert [p.split(" ", 1)[0].split(".", 1)[0] for p in problems] == [f"nodes[{i}]" for i in range(1, 9)]
    assert problems[0].startswith("nodes[1].id") and problems[1].startswith("nodes[2].skillKey")
    assert problems[2].startswith("nodes[3].dependsOn") and problems[3].startswith("nodes[4] (n5)")
    assert problems[4].startswith("nodes[5].dependsOn") and problems[5].startswith("nodes[6] must be an object")
    assert problems[6].startswith("nodes[7].goal") and problems[7].startswith("nodes[8].target")


def test_a_target_that_is_a_write_tool_in_tool_names_is_kept(candidates):
    nodes, problems, notes = validate_plan(nodes_of(node("n1", "crm.order", target="createOrder")), candidates, MESSAGE)
    assert problems == [] and notes == [] and nodes[0].target == "createOrder"


@pytest.mark.parametrize(
    ("key", "target"),
    [
        ("crm.report", "listOrders"),  # a read tool of the skill
        ("crm.order", "listOrders"),  # another skill's tool
        ("crm.order", "deleteEverything"),  # no tool at all
    ],
)
def test_a_target_that_is_not_a_write_tool_of_the_skill_is_dropped_with_a_note(candidates, key, target):
    nodes, problems, notes = validate_plan(nodes_of(node("n1", key, target=target)), candidates, MESSAGE)
    assert problems == [] and nodes[0].target is None
    assert len(notes) == 1 and notes[0].startswith("n1: target") and target in notes[0] and "dropped" in notes[0]


def test_a_write_target_missing_from_tool_names_is_dropped(candidates):
    candidates["crm.order"] = skill("order", tools=("listOrders",))
    assert write_target(candidates["crm.order"], "createOrder") is None
    nodes, problems, notes = validate_plan(nodes_of(node("n1", "crm.order", target="createOrder")), candidates, MESSAGE)
    assert problems == [] and nodes[0].target is None and "createOrder" in notes[0]


def test_an_empty_target_is_no_target_and_no_note(candidates):
    nodes, problems, notes = validate_plan(nodes_of(node("n1", "crm.order", target="")), candidates, MESSAGE)
    assert problems == [] and notes == [] and nodes[0].target is None


def test_the_plan_tool_offers_only_the_candidates(candidates):
    tool = plan_tool(candidates)
    assert tool["function"]["name"] == "builtin_plan"
    item = tool["function"]["parameters"]["properties"]["nodes"]["items"]
    assert item["properties"]["skillKey"]["enum"] == list(candidates)
    assert item["required"] == ["id", "skillKey", "goal"]


# -- branches and joins (orchestration P2) ---------------------------------------------------------------------

CUSTOMER_FOUND = {"node": "n1", "when": {"evidence": "customer", "op": "NOT_EMPTY"}}


def problems_of(*raw: Any, candidates: dict[str, ContractSkill]) -> list[str]:
    nodes, problems, _ = validate_plan(nodes_of(*raw), candidates, MESSAGE)
    assert nodes == [] or problems == []
    return problems


def test_branch_fields_are_validated_and_kept(candidates):
    plan = nodes_of(
        {**node("n3", "crm.report", "report"), "onFailure": "n4"},
        node("n4", "crm.customer", "tell someone"),
        node("n1", "crm.customer", "find Acme"),
        {
            **node("n2", "crm.order", "order", [CUSTOMER_FOUND, {"node": "n3"}]),
            "join": "ANY",
        },
        node("n5", "crm.report", "after", [{"node": "n1", "when": {"output": "customerId", "op": "EQ", "value": 7}}]),
    )
    nodes, problems, _ = validate_plan(plan, candidates, MESSAGE)
    assert problems == []
    assert [n.plan_id for n in nodes] == ["n3", "n4", "n1", "n2", "n5"]  # n4 after n3, which names it
    order = next(n for n in nodes if n.plan_id == "n2")
    assert order.depends_on == ("n1", "n3") and order.join is Join.ANY
    assert order.when == {"n1": {"evidence": "customer", "op": "NOT_EMPTY"}}
    assert nodes[0].on_failure == "n4" and nodes[1].on_failure is None and nodes[1].join is Join.ALL
    assert nodes[4].when == {"n1": {"output": "customerId", "op": "EQ", "value": 7}}


def test_an_on_failure_node_listed_first_still_runs_after_the_node_naming_it(candidates):
    nodes, problems, _ = validate_plan(
        nodes_of(node("alert", "crm.customer"), {**node("n1", "crm.order"), "onFailure": "alert"}),
        candidates,
        MESSAGE,
    )
    assert problems == [] and [n.plan_id for n in nodes] == ["n1", "alert"]


@pytest.mark.parametrize(
    ("when", "problem"),
    [
        (
            {"output": "inStock", "op": "TRUTHY"},
            "nodes[1].dependsOn[0].when.output 'inStock' is not an output of skill crm.customer (outputs: customerId)",
        ),
        (
            {"evidence": "orders.0.id", "op": "EXISTS"},
            "nodes[1].dependsOn[0].when.evidence 'orders.0.id': 'orders' is not an extract key of the tools of "
            "skill crm.customer (keys: customer)",
        ),
        ({"evidence": "customer..id", "op": "EXISTS"}, "nodes[1].dependsOn[0].when.evidence 'customer..id' must be"),
        ({"evidence": "", "op": "EXISTS"}, "nodes[1].dependsOn[0].when.evidence must be a non-empty string"),
        ({"op": "EXISTS"}, "nodes[1].dependsOn[0].when needs exactly one of output or evidence (given: neither)"),
        (
            {"output": "customerId", "evidence": "customer", "op": "EXISTS"},
            "nodes[1].dependsOn[0].when needs exactly one of output or evidence (given: output and evidence)",
        ),
        ({"output": "customerId", "op": "GT"}, "nodes[1].dependsOn[0].when.op 'GT' is not a condition op (ops: "),
        ({"output": "customerId", "op": "eq", "value": 1}, "nodes[1].dependsOn[0].when.op 'eq' is not a condition op"),
        ({"output": "customerId", "op": "EQ"}, "nodes[1].dependsOn[0].when.value is required for op EQ"),
        ({"output": "customerId", "op": "EXISTS", "value": 1}, "nodes[1].dependsOn[0].when.value is only read by EQ"),
        ({"output": "customerId", "op": "NE", "value": "x" * 600}, "nodes[1].dependsOn[0].when.value is longer than"),
        ("customerId", "nodes[1].dependsOn[0].when must be an object {output | evidence, op, value?}, not str"),
    ],
)
def test_a_condition_names_its_place_the_field_and_the_fix(candidates, when, problem):
    problems = problems_of(
        node("n1", "crm.customer"),
        node("n2", "crm.report", depends=[{"node": "n1", "when": when}]),
        candidates=candidates,
    )
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_evidence_paths_may_go_into_the_extract_and_through_lists(candidates):
    for ref in ("customer", "customer.id", "customer[].id", "customer.0.name"):
        depends = [{"node": "n1", "when": {"evidence": ref, "op": "EXISTS"}}]
        assert (
            problems_of(node("n1", "crm.customer"), node("n2", "crm.report", depends=depends), candidates=candidates)
            == []
        )


def test_a_condition_on_a_skill_without_outputs_lists_none(candidates):
    depends = [{"node": "n1", "when": {"output": "x", "op": "EXISTS"}}]
    problems = problems_of(node("n1", "crm.report"), node("n2", "crm.order", depends=depends), candidates=candidates)
    assert problems == ["nodes[1].dependsOn[0].when.output 'x' is not an output of skill crm.report (outputs: none)"]


@pytest.mark.parametrize(
    ("depends", "problem"),
    [
        ([{"when": {"output": "customerId", "op": "EXISTS"}}], "nodes[1].dependsOn[0].node must be the id of a node"),
        ([CUSTOMER_FOUND, "n1"], "nodes[1].dependsOn[1] names 'n1' again; give each upstream node one entry"),
        (["n1", CUSTOMER_FOUND], "nodes[1].dependsOn[1] names 'n1' again"),
        ([{"node": "n9", "when": {"output": "x", "op": "EXISTS"}}], "nodes[1].dependsOn names no node of the plan: n9"),
        ([{"node": "n2"}], "nodes[1] (n2) depends on itself"),
        ([3], "nodes[1].dependsOn must be a list of node ids such as ['n1'] (or {node, when} objects)"),
    ],
)
def test_depends_on_entries_with_conditions_are_checked(candidates, depends, problem):
    problems = problems_of(node("n1", "crm.customer"), node("n2", "crm.report", depends=depends), candidates=candidates)
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_a_plain_node_entry_and_a_null_condition_are_plain_edges(candidates):
    nodes, problems, _ = validate_plan(
        nodes_of(node("n1", "crm.customer"), node("n2", "crm.report", depends=[{"node": "n1", "when": None}])),
        candidates,
        MESSAGE,
    )
    assert problems == [] and nodes[1] == PlannedNode("n2", "crm.report", "do crm.report", None, ("n1",))


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ([{**node("n1", "crm.order"), "onFailure": "n1"}], "nodes[0].onFailure names the node itself"),
        (
            [{**node("n1", "crm.order"), "onFailure": "n9"}],
            "nodes[0].onFailure 'n9' names no node of the plan (ids: n1)",
        ),
        ([{**node("n1", "crm.order"), "onFailure": 3}], "nodes[0].onFailure must be the id of another node"),
        (
            [{**node("n1", "crm.order"), "onFailure": "n2"}, node("n2", "crm.customer", depends=["n1"])],
            "nodes[0].onFailure 'n2': n2 has dependsOn (n1); an onFailure node runs only when n1 fails, so it may "
            "have no other incoming edges — remove its dependsOn",
        ),
        (
            [
                {**node("n1", "crm.order"), "onFailure": "n3"},
                {**node("n2", "crm.report"), "onFailure": "n3"},
                node("n3", "crm.customer"),
            ],
            "nodes[1].onFailure 'n3' is already the onFailure node of n1",
        ),
        (
            [{**node("n1", "crm.order", depends=["n2"]), "onFailure": "n2"}, node("n2", "crm.customer")],
            "the dependencies form a cycle (",
        ),
        ([{**node("n1", "crm.order"), "join": "SOME"}], "nodes[0].join 'SOME' must be ALL or ANY"),
        ([{**node("n1", "crm.order"), "join": "any"}], "nodes[0].join 'any' must be ALL or ANY"),
        ([{**node("n1", "crm.order"), "join": "ANY"}], "nodes[0].join ANY needs dependsOn"),
    ],
)
def test_on_failure_and_join_are_checked(candidates, raw, problem):
    problems = problems_of(*raw, candidates=candidates)
    assert len(problems) == 1 and problems[0].startswith(problem), problems


def test_a_cycle_through_an_on_failure_edge_says_so(candidates):
    raw = [{**node("n1", "crm.order", depends=["n2"]), "onFailure": "n2"}, node("n2", "crm.customer")]
    problems = problems_of(*raw, candidates=candidates)
    assert "an onFailure node comes after the node that names it" in problems[0]


def test_the_plan_tool_and_prompt_describe_the_branch_fields(candidates):
    item = plan_tool(candidates)["function"]["parameters"]["properties"]["nodes"]["items"]
    assert item["properties"]["join"]["enum"] == ["ALL", "ANY"] and item["properties"]["onFailure"]["type"] == "string"
    edge = item["properties"]["dependsOn"]["items"]["anyOf"]
    assert edge[0] == {"type": "string"} and edge[1]["properties"]["when"]["properties"]["op"]["enum"] == [
        "EXISTS",
        "EMPTY",
        "NOT_EMPTY",
        "EQ",
        "NE",
        "TRUTHY",
    ]
    from skillyard.agent.profile import AgentProfile

    prompt = planning_prompt(AgentProfile("crm", "CRM clerk", Path("AGENT.md")), candidates)
    assert (
        "- crm.customer: Finds a customer by name; not for orders. (read only) [conditions may read outputs: " in prompt
    )
    assert "customerId; evidence: customer]" in prompt and "onFailure" in prompt and "join ANY" in prompt
    assert "- crm.report: Reports a customer's orders. (read only)\n" in prompt
