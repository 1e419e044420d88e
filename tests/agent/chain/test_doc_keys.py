"""The optional tool keys of doc-runtime-contracts (contract_doc.py, preflight.py, chain/plan.py): ``receipt``,
``asyncTask``, ``targetArg``, ``paging``, ``export`` — read, checked at load and at publish time, and planned once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent import load_agent, preflight_agent
from skillyard.agent.chain.plan import plan
from skillyard.agent.contract import ReceiptKind
from skillyard.agent.contract_parse import ContractError, parse_contract
from support.agent.receipts import CONTRACT, DocOpsAgent

WRITE = {"sideEffect": "WRITE", "success": {"path": "ok", "op": "TRUTHY"}}


def parsed(tools: dict[str, Any]) -> Any:
    return parse_contract({"tools": tools}, skill_key="k")[0]


def test_the_keys_are_read_into_the_tool_contract():
    contract = parse_contract(json.dumps(CONTRACT), skill_key="docs.ops")[0]
    task = contract.tools["importDoc"].async_task
    assert task is not None and (task.id_path, task.poll_tool, task.id_arg, task.attempts) == (
        "taskId",
        "getTask",
        "taskId",
        1,
    )
    assert task.done_when.value == "done" and task.failed_when is not None
    assert contract.tools["importDoc"].receipt is ReceiptKind.IMPORT
    assert contract.tools["appendDoc"].receipt is ReceiptKind.OPERATION
    assert contract.tools["renameDoc"].target_arg == "docId"
    paging = contract.tools["findDocs"].paging
    assert paging is not None and paging.cursor_arg == "cursor" and paging.path is None
    export = contract.tools["exportDoc"].export
    assert export is not None and (export.path_arg, export.content_path, export.overwrite_arg) == (
        "path",
        "data.content",
        "overwrite",
    )
    assert contract.poll_tools == frozenset({"getTask"})


def test_a_contract_without_the_keys_plans_nothing_for_them():
    contract = parsed({"w": {**WRITE, "args": {"t": {"sources": ["USER"]}}}, "r": {}})
    assert plan(contract.tools["w"]).doc is None and plan(contract.tools["r"]).doc is None
    assert contract.poll_tools == frozenset()
    with_receipt = parsed({"w": {**WRITE, "receipt": "doc.operation.v1"}})
    doc = plan(with_receipt.tools["w"]).doc
    assert doc is not None and doc.receipt is ReceiptKind.OPERATION


@pytest.mark.parametrize(
    ("tools", "rule", "text"),
    [
        ({"w": {**WRITE, "receipt": "doc.operation.v2"}}, "§16.13", "is not one of"),
        (
            {"r": {"asyncTask": {"idPath": "id", "pollTool": "p", "doneWhen": {"path": "s"}}}, "p": {}},
            "doc.asyncTask",
            "only for WRITE",
        ),
        ({"w": {**WRITE, "asyncTask": {"idPath": "id"}}}, "doc.asyncTask", "needs"),
        (
            {"w": {**WRITE, "asyncTask": {"idPath": "id", "pollTool": "ghost", "doneWhen": {"path": "s"}}}},
            "doc.asyncTask",
            "not in contract.tools",
        ),
        (
            {"w": {**WRITE, "asyncTask": {"idPath": "id", "pollTool": "w2", "doneWhen": {"path": "s"}}}, "w2": WRITE},
            "doc.asyncTask",
            "read-only",
        ),
        (
            {
                "w": {
                    **WRITE,
                    "asyncTask": {"idPath": "id", "pollTool": "p", "doneWhen": {"path": "s"}, "attempts": 11},
                },
                "p": {},
            },
            "doc.asyncTask",
            "1 to 10",
        ),
        ({"w": {**WRITE, "paging": {}}}, "doc.paging", "only for read tools"),
        ({"w": {**WRITE, "export": {"pathArg": "p", "contentPath": "c"}}}, "doc.export", "for read tools"),
        ({"r": {"export": {"contentPath": "c"}}}, "doc.export", "pathArg"),
        ({"r": {"export": {"pathArg": "p"}}}, "doc.export", "exactly one"),
        ({"r": {"export": {"pathArg": "p", "contentPath": "c", "filePath": "f"}}}, "doc.export", "exactly one"),
        ({"r": {"export": {"pathArg": "p", "contentPath": "c", "encoding": "gbk"}}}, "doc.export", "utf-8 or base64"),
    ],
)
def test_load_time_checks(tools: dict[str, Any], rule: str, text: str):
    with pytest.raises(ContractError) as raised:
        parse_contract({"tools": tools}, skill_key="k")
    assert any(p.rule == rule and text in p.message for p in raised.value.problems), raised.value


@pytest.mark.usefixtures("db_env")
async def test_preflight_checks_the_named_arguments_and_the_poll_tool(tmp_path: Path):
    ops = DocOpsAgent(tmp_path)
    contract = json.loads(json.dumps(CONTRACT))
    contract["tools"]["importDoc"]["asyncTask"]["idArg"] = "task_id"  # not a parameter of getTask
    contract["tools"]["findDocs"]["paging"] = {"cursorArg": "pageToken"}
    contract["tools"]["exportDoc"]["args"]["overwrite"] = {"sources": ["MODEL"], "required": False}
    ops.contract(contract)
    async with SkillYard() as yard:
        loaded = await load_agent(yard, ops.dir)
        problems = preflight_agent(yard, loaded)
    found = {(p.tool, p.arg, p.rule, p.severity) for p in problems}
    assert ("importDoc", "task_id", "preflight.async_task", "error") in found, problems
    assert ("findDocs", "pageToken", "preflight.paging", "error") in found
    assert ("exportDoc", "overwrite", "preflight.export", "warning") in found
    keeper = ops.keeper / "SKILL.md"
    keeper.write_text(keeper.read_text(encoding="utf-8").replace("getTask, ", ""), encoding="utf-8")
    ops.contract(CONTRACT)
    async with SkillYard() as yard:
        loaded = await load_agent(yard, ops.dir)
        problems = preflight_agent(yard, loaded)
    assert any(p.rule == "P0.poll_tool_not_bound" and p.tool == "importDoc" for p in problems), problems
