"""A multi-skill agent for the task-graph tests (crm_agent): three contract skills over three logging business tools.

* ``crm.customer`` — finds a customer (``findCustomer``); ``delegatable: true``; writes ``customerId`` (shared
  with the session) and indexes ``customer`` entities from its extract;
* ``crm.order`` — creates an order (``createOrder``, a WRITE tool and the target); its input ``customer`` is
  provided by ``crm.customer`` (``inputs.customer.provider``), its argument ``customerId`` reads
  ``session.customerId``;
* ``crm.report`` — lists a customer's orders (``listOrders``); ``customerId`` reads ``evidence.customer.id``
  (upstream or delegated evidence), else a prior entity.

Every real execution of a business tool is appended to ``calls.jsonl``.
"""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import yaml

from support.agent.probes import write_files

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}

HANDLER = """
import json, pathlib

LOG = pathlib.Path({log!r})
NAME = {name!r}


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input}}, ensure_ascii=False) + "\\n")
    if input.get("mode") == "business":
        return {{"code": 500, "msg": "backend says no"}}
    return {result}
"""

RESULTS = {
    "findCustomer": '{"code": 200, "data": {"id": "c-7", "name": "Acme"}}',
    "createOrder": '{"code": 200, "data": {"orderId": "o-1", "customerId": input.get("customerId")}}',
    "listOrders": '{"code": 200, "data": {"orders": [{"id": "o-1"}], "customerId": input.get("customerId")}}',
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "findCustomer": {"type": "object", "properties": {"q": {"type": "string"}, "mode": {}}},
    "createOrder": {
        "type": "object",
        "properties": {"customerId": {"type": "string"}, "item": {"type": "string"}},
        "required": ["item"],
    },
    "listOrders": {"type": "object", "properties": {"customerId": {"type": "string"}}},
}

FREE = {"sources": ["MODEL"], "required": False}
OK_200 = {"path": "code", "op": "EQ", "value": 200}

CONTRACTS: dict[str, dict[str, Any]] = {
    "customer": {
        "delegatable": True,
        "outputs": {"customerId": {"sources": ["EVIDENCE"], "required": False, "share": "SESSION"}},
        "tools": {
            "findCustomer": {
                "label": "Finding the customer",
                "args": {"q": FREE, "mode": FREE},
                "success": OK_200,
                "extracts": [{"key": "customer", "path": "data", "entity": {"type": "customer", "name": "name"}}],
            }
        },
    },
    "order": {
        "target": "createOrder",
        "inputs": {"customer": {"from": "outputs.customerId", "provider": "crm.customer", "required": False}},
        "tools": {
            "createOrder": {
                "label": "Creating the order",
                "sideEffect": "WRITE",
                "args": {
                    "customerId": {"from": "session.customerId", "label": "客户"},
                    "item": {"sources": ["USER"], "label": "商品"},
                },
                "success": OK_200,
            }
        },
    },
    "report": {
        "tools": {
            "listOrders": {
                "label": "Listing orders",
                "args": {"customerId": {"from": "evidence.customer.id", "label": "客户", "required": False}},
                "success": OK_200,
            }
        },
    },
}

#: crm.order without its provider: the customer comes from the user (tests that need one node and one write).
ORDER = {
    "target": "createOrder",
    "tools": {
        "createOrder": {
            **CONTRACTS["order"]["tools"]["createOrder"],
            "args": {
                "customerId": {"sources": ["USER"], "label": "客户"},
                "item": {"sources": ["USER"], "label": "商品"},
            },
        }
    },
}

SKILLS = {
    "customer": ("crm.customer", "Finds a customer by name; not for orders.", ["findCustomer"]),
    "order": ("crm.order", "Creates an order for a customer.", ["createOrder"]),
    "report": ("crm.report", "Reports a customer's orders.", ["listOrders"]),
}

AGENT_MD = (
    "---\nagent_code: crm\nagent_name: CRM clerk\nskills: [crm.customer, crm.order, crm.report]\n---\n"
    "# Identity\nA CRM clerk.\n# Mission\nFind customers, take orders, report orders.\n"
)


class CrmAgent:
    """The crm agent folder in ``root`` (see the module docstring)."""

    def __init__(self, root: Path, folder: str = "crm", agent_md: str = AGENT_MD) -> None:
        self.root = root
        self.dir = root / folder
        self.log = root / "calls.jsonl"
        self.uid = uuid.uuid4().hex[:10]
        self.scripts = 0
        files: dict[Path, str] = {self.dir / "AGENT.md": agent_md}
        for folder_name, (key, description, tools) in SKILLS.items():
            front = f"name: {folder_name}\nskill_key: {key}\ndescription: {description}\ntools: [{', '.join(tools)}]"
            files[self.dir / "skills" / folder_name / "SKILL.md"] = f"---\n{front}\n---\nThe {key} manual.\n"
            files[self.dir / "skills" / folder_name / "contract.json"] = json.dumps(CONTRACTS[folder_name])
        for name, result in RESULTS.items():
            self.tool(name, result, SCHEMAS[name])
        write_files(files)

    def tool(self, name: str, result: str, schema: dict[str, Any], front: str = "") -> Path:
        """(Re)write the business skill ``name`` (its folder is ``tools/<name>``)."""
        folder = self.dir / "skills" / "tools" / name
        handler = textwrap.dedent(HANDLER).format(log=str(self.log), name=name, result=result)
        write_files(
            {
                folder / "SKILL.md": f"---\nname: {name}\ndescription: tool {name}\n{front}---\n",
                folder / "handler.py": handler,
                folder / "schema.json": json.dumps(schema),
            }
        )
        return folder

    def contract(self, folder: str, contract: dict[str, Any]) -> None:
        (self.dir / "skills" / folder / "contract.json").write_text(json.dumps(contract), encoding="utf-8")

    def sid(self, name: str) -> str:
        return f"{name}-{self.uid}"

    def script(self, *turns: dict[str, Any]) -> str:
        self.scripts += 1
        path = self.root / f"crm-turns{self.scripts}.yaml"
        path.write_text(yaml.safe_dump({"turns": list(turns)}, allow_unicode=True), encoding="utf-8")
        return f"script:{path}"

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]


def plan(*nodes: dict[str, Any]) -> dict[str, Any]:
    """A scripted model's ``builtin_plan`` reply."""
    return {"tool_calls": [{"name": "builtin_plan", "arguments": {"nodes": list(nodes)}}]}


def node(plan_id: str, skill: str, goal: str = "", depends: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"id": plan_id, "skillKey": skill, "goal": goal or f"do {skill}", **extra}
    if depends is not None:
        found["dependsOn"] = depends
    return found


class StoredCrm(CrmAgent):
    """The crm agent with an agent code and skill keys of its own (``crm_<uid>``, ``crm_<uid>.customer`` …), for
    tests that store agents in the shared database (``agent_code`` and ``skill_key`` are unique there)."""

    def __init__(self, root: Path, folder: str = "crm") -> None:
        super().__init__(root, folder)
        self.code = f"crm_{self.uid}"
        self.keys = {name: f"{self.code}.{name}" for name in SKILLS}
        self.agent_md(list(self.keys.values()))
        for name, (key, _description, _tools) in SKILLS.items():
            manifest = self.dir / "skills" / name / "SKILL.md"
            text = manifest.read_text(encoding="utf-8").replace(
                f"skill_key: {key}\n", f"skill_key: {self.keys[name]}\n"
            )
            manifest.write_text(text, encoding="utf-8")
        self.contract("order", CONTRACTS["order"])

    def agent_md(self, skills: list[str], body: str = "# Identity\nA CRM clerk.\n# Mission\nTake orders.\n") -> None:
        front = f"agent_code: {self.code}\nagent_name: CRM clerk\nskills: [{', '.join(skills)}]"
        (self.dir / "AGENT.md").write_text(f"---\n{front}\n---\n{body}", encoding="utf-8")

    def contract(self, folder: str, contract: dict[str, Any]) -> None:
        """Write the contract, with ``crm.<name>`` provider keys renamed to this agent's keys."""
        text = json.dumps(contract)
        for name, (key, _description, _tools) in SKILLS.items():
            text = text.replace(f'"{key}"', f'"{self.keys[name]}"')
        super().contract(folder, json.loads(text))

    def key(self, name: str) -> str:
        return self.keys[name]
