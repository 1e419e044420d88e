"""The doc-ops agent (skill docs.ops) of the doc-runtime-contracts tests: business skills whose answers a test scripts
in ``answers.json`` (per tool, a queue: each call takes the first answer, the last one stays), so a write can answer
with any receipt, a listing with any page, a poll with any task state. Every real execution is logged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skillyard import SkillYard
from skillyard.agent.state import Evidence
from skillyard.agent.store import AgentStore
from skillyard.agent.turn import TurnResult
from support.agent.folder import AgentFolder

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}
#: The writes that run without approval in these tests (``confirm: false`` and listed, §14.1).
BYPASS = "saveDoc,appendDoc,importDoc"
V1 = "doc.operation.v1"

HANDLER = """
import asyncio, json, pathlib

LOG = pathlib.Path({log!r})
ANSWERS = pathlib.Path({answers!r})
NAME = {name!r}
ERRORS = {{"OSError": OSError, "TimeoutError": TimeoutError, "ValueError": ValueError}}


def take():
    plan = json.loads(ANSWERS.read_text(encoding="utf-8")) if ANSWERS.exists() else {{}}
    queue = plan.get(NAME) or [{{"ok": True}}]
    answer = queue.pop(0) if len(queue) > 1 else queue[0]
    plan[NAME] = queue
    ANSWERS.write_text(json.dumps(plan, ensure_ascii=False), encoding="utf-8")
    return answer


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input, "key": ctx.get("idempotency_key")}}, ensure_ascii=False)
                + "\\n")
    answer = take()
    if "$by" in answer:  # an answer per value of one argument (a listing's cursor)
        answer = answer["cases"].get(str(input.get(answer["$by"]) or ""), answer.get("default", {{}}))
    if "$sleep" in answer:
        await asyncio.sleep(answer["$sleep"])
    if "$raise" in answer:
        raise ERRORS[answer["$raise"]](answer.get("message", "boom"))
    if "$write" in answer:  # a file the tool itself writes into the workspace
        target = pathlib.Path(ctx["workspace_dir"]) / answer["$write"]["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(answer["$write"]["text"], encoding="utf-8")
    return {{k: v for k, v in answer.items() if not k.startswith("$")}}
"""

FREE = {"sources": ["MODEL"], "required": False}
OK = {"path": "ok", "op": "TRUTHY"}

SCHEMAS: dict[str, dict[str, Any]] = {
    "saveDoc": {"type": "object", "properties": {"title": {}, "body": {}}, "required": ["title"]},
    "appendDoc": {"type": "object", "properties": {"title": {}, "line": {}}, "required": ["title"]},
    "importDoc": {"type": "object", "properties": {"title": {}}, "required": ["title"]},
    "renameDoc": {"type": "object", "properties": {"docId": {}, "newTitle": {}}, "required": ["docId"]},
    "findDocs": {"type": "object", "properties": {"q": {}, "cursor": {}}},
    "getTask": {"type": "object", "properties": {"taskId": {}}, "required": ["taskId"]},
    "checkDoc": {"type": "object", "properties": {"title": {}}},
    "exportDoc": {"type": "object", "properties": {"docId": {}, "path": {}, "overwrite": {}}, "required": ["path"]},
}

TOOLS = list(SCHEMAS)

CONTRACT: dict[str, Any] = {
    "tools": {
        "saveDoc": {  # no receipt key: its results declare contractVersion themselves
            "label": "正在保存文档",
            "sideEffect": "WRITE",
            "confirm": False,
            "idempotencyKey": ["title"],
            "args": {"title": {"sources": ["USER"], "label": "标题"}, "body": FREE},
            "success": OK,
            "extracts": [{"key": "saved", "path": "data"}],
            "verify": {"tool": "checkDoc", "args": {"title": {"from": "call.title"}}},
        },
        "appendDoc": {  # a receipt by contract, no verify tool: an unknown append is asked about (VERIFY)
            "label": "正在追加内容",
            "sideEffect": "WRITE",
            "confirm": False,
            "receipt": V1,
            "args": {"title": {"sources": ["USER"], "label": "标题"}, "line": FREE},
            "success": OK,
        },
        "importDoc": {
            "label": "正在导入文档",
            "sideEffect": "WRITE",
            "confirm": False,
            "receipt": "doc.import",
            "idempotencyKey": ["title"],
            "args": {"title": {"sources": ["USER"], "label": "标题"}},
            "success": {"path": "success", "op": "TRUTHY"},
            "asyncTask": {
                "idPath": "taskId",
                "pollTool": "getTask",
                "doneWhen": {"path": "state", "op": "EQ", "value": "done"},
                "failedWhen": {"path": "state", "op": "EQ", "value": "failed"},
            },
        },
        "renameDoc": {
            "label": "正在重命名文档",
            "sideEffect": "WRITE",
            "targetArg": "docId",
            "idempotencyKey": ["docId"],
            "args": {"docId": {"sources": ["USER", "EVIDENCE"], "label": "文档"}, "newTitle": FREE},
            "success": OK,
        },
        "findDocs": {
            "label": "正在查找文档",
            "paging": {"cursorArg": "cursor"},
            "args": {"q": FREE, "cursor": FREE},
            "success": OK,
            "extracts": [{"key": "docs", "path": "data.items", "fields": ["id", "title"]}],
        },
        "getTask": {
            "label": "正在查询任务",
            "args": {"taskId": FREE},
            "success": {"path": "state", "op": "EXISTS"},
            "extracts": [{"key": "task", "path": "document"}],
        },
        "checkDoc": {
            "label": "正在核实文档",
            "args": {"title": FREE},
            "success": {"path": "found", "op": "TRUTHY"},
        },
        "exportDoc": {
            "label": "正在导出文档",
            "args": {"docId": FREE, "path": FREE, "overwrite": {"sources": ["USER"], "required": False}},
            "success": OK,
            "export": {
                "pathArg": "path",
                "contentPath": "data.content",
                "sizePath": "data.size",
                "sha256Path": "data.sha256",
                "overwriteArg": "overwrite",
            },
        },
    }
}


class DocOpsAgent(AgentFolder):
    """An agent folder in tmp_path whose business skills answer what the test scripted (:meth:`answers`)."""

    FOLDER = "docops_agent"
    AGENT_MD = (
        "---\nagent_code: docops\nagent_name: Doc ops\nskills: [docs.ops]\n---\n"
        "# Identity\nA careful document operator.\n# Mission\nChange and list the user's documents.\n"
    )
    KEEPER_MD = (
        "---\nname: ops\nskill_key: docs.ops\ndescription: Changes and lists docs.\n"
        "tools: [{tools}]\n---\nThe ops manual: do what the user asks, exactly.\n"
    )
    HANDLER, SCHEMAS, CONTRACT, TOOLS = HANDLER, SCHEMAS, CONTRACT, TOOLS
    RESULTS = dict.fromkeys(TOOLS, "None")

    def __init__(self, root: Path) -> None:
        self.answers_file = root / "answers.json"
        super().__init__(root)

    def handler_values(self) -> dict[str, str]:
        return {"log": str(self.log), "answers": str(self.answers_file)}

    def answers(self, **queues: list[dict[str, Any]]) -> None:
        """Script the answers of tools (each call takes the first; the last one stays)."""
        plan = json.loads(self.answers_file.read_text(encoding="utf-8")) if self.answers_file.exists() else {}
        plan.update(queues)
        self.answers_file.write_text(json.dumps(plan, ensure_ascii=False), encoding="utf-8")

    def changed(self, tool: str, **changes: Any) -> None:
        """Write the contract with one tool's entry changed (a key set to None is removed)."""
        contract = json.loads(json.dumps(self.CONTRACT))
        entry = contract["tools"][tool]
        for key, value in changes.items():
            if value is None:
                entry.pop(key, None)
            else:
                entry[key] = value
        self.contract(contract)


def receipt(status: str, **fields: Any) -> dict[str, Any]:
    """A doc.operation.v1 receipt (its fixed fields; ``ok`` follows the status unless given)."""
    body: dict[str, Any] = {
        "contractVersion": V1,
        "ok": status == "success",
        "status": status,
        "complete": status == "success",
        "operation": "doc.save",
        "steps": [],
        "data": {},
        "warnings": [],
        "compensation": None,
    }
    body.update(fields)
    return body


def page(items: list[dict[str, Any]], *, more: str | None = None, **fields: Any) -> dict[str, Any]:
    """One page of findDocs: ``more`` is the next cursor (the listing is then not complete)."""
    data: dict[str, Any] = {"items": items}
    top: dict[str, Any] = {"ok": True, "data": data, "hasMore": more is not None, **fields}
    if more is not None:
        top["nextCursor"] = more
    return top


def by_cursor(**pages: dict[str, Any]) -> dict[str, Any]:
    """findDocs answering per cursor (``first`` is the page without a cursor)."""
    cases = {("" if key == "first" else key): value for key, value in pages.items()}
    return {"$by": "cursor", "cases": cases}


async def stored_evidence(yard: SkillYard, turn: TurnResult, tool: str | None = None) -> list[Evidence]:
    """The task's evidence as the database holds it (of one tool), oldest first."""
    assert turn.task_id is not None
    found = await AgentStore(yard.database).load_evidence(turn.task_id)
    return [e for e in found if tool is None or e.tool == tool]
