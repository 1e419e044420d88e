"""Plan validation (agent part 2, contract spec §3, §10.1): ``validate_plan`` checks a ``builtin_plan`` call before
it is stored — candidates, unique ids, ``dependsOn`` shape and names, self-dependencies, cycles, the node limit,
non-object nodes, invalid JSON text — and drops a ``target`` that is not a WRITE tool in the node's ``toolNames``.
Every node-level problem names its place (``nodes[1].skillKey …``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from skillyard.agent.contract_parse import parse_contract
from skillyard.agent.loader import ContractSkill
from skillyard.agent.planner import MAX_PLAN_NODES, PlannedNode, plan_tool, validate_plan, write_target
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
