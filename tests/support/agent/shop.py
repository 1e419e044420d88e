"""A shop agent for the branch-and-join tests (tests/agent/test_branches.py): five contract skills over logging
business tools, for the plan "check stock; if any, create the order, else notify restock; then a summary".

* ``shop.stock`` — ``checkStock(sku)`` reads ``stock.json`` (sku → lots) and answers ``{data: {sku, lots, total}}``;
  extracts ``lots`` (``data.lots``, counted) and ``stock`` (``data``); output ``available`` (EVIDENCE);
* ``shop.order`` — ``createOrder(sku, mode?)``, a WRITE (approval first) and the target; ``mode: business`` makes the
  backend refuse (a business failure);
* ``shop.restock`` — ``notifyRestock(sku)``, a WRITE and the target;
* ``shop.alert`` — ``alertSales(sku)``, a read whose ``sku`` the user may give (a grounded follow-up): the node to
  run when the order fails;
* ``shop.summary`` — no business tools: it finishes with a summary.

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
STOCK = pathlib.Path({stock!r})
NAME = {name!r}


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input}}, ensure_ascii=False) + "\\n")
    if input.get("mode") == "business":
        return {{"code": 500, "msg": "the warehouse is locked"}}
    if NAME == "checkStock":
        lots = json.loads(STOCK.read_text(encoding="utf-8")).get(input.get("sku"), [])
        total = sum(lot["qty"] for lot in lots)
        return {{"code": 200, "data": {{"sku": input.get("sku"), "lots": lots, "total": total}}}}
    return {{"code": 200, "data": {{"id": NAME + "-1", "sku": input.get("sku")}}}}
"""

SKU = {"type": "object", "properties": {"sku": {"type": "string"}, "mode": {}}}
FREE = {"sources": ["MODEL"], "required": False}
OK_200 = {"path": "code", "op": "EQ", "value": 200}


def _write(label: str) -> dict[str, Any]:
    return {"label": label, "sideEffect": "WRITE", "args": {"sku": FREE, "mode": FREE}, "success": OK_200}


CONTRACTS: dict[str, dict[str, Any]] = {
    "stock": {
        "outputs": {"available": {"sources": ["EVIDENCE"], "required": False}},
        "tools": {
            "checkStock": {
                "label": "Checking stock",
                "args": {"sku": FREE},
                "success": OK_200,
                "extracts": [{"key": "lots", "path": "data.lots"}, {"key": "stock", "path": "data"}],
            }
        },
    },
    "order": {"target": "createOrder", "tools": {"createOrder": _write("Creating the order")}},
    "restock": {"target": "notifyRestock", "tools": {"notifyRestock": _write("Asking for a restock")}},
    "alert": {
        "tools": {
            "alertSales": {
                "label": "Alerting sales",
                "args": {"sku": {"sources": ["USER", "MODEL"], "required": False}},
                "success": OK_200,
            }
        }
    },
    "summary": {},
}

SKILLS = {
    "stock": ("shop.stock", "Checks the stock of a product.", ["checkStock"]),
    "order": ("shop.order", "Creates an order.", ["createOrder"]),
    "restock": ("shop.restock", "Asks the warehouse to restock a product.", ["notifyRestock"]),
    "alert": ("shop.alert", "Tells sales that something went wrong.", ["alertSales"]),
    "summary": ("shop.summary", "Sums up what was done.", []),
}

AGENT_MD = (
    "---\nagent_code: shop\nagent_name: Shop clerk\n"
    "skills: [shop.stock, shop.order, shop.restock, shop.alert, shop.summary]\n---\n"
    "# Identity\nA shop clerk.\n# Mission\nCheck stock, take orders, ask for restocks.\n"
)


class ShopAgent:
    """The shop agent folder in ``root`` (see the module docstring); ``stock`` is what checkStock reads."""

    def __init__(self, root: Path, stock: dict[str, list[dict[str, Any]]] | None = None) -> None:
        self.root = root
        self.dir = root / "shop"
        self.log = root / "calls.jsonl"
        self.stock_file = root / "stock.json"
        self.uid = uuid.uuid4().hex[:10]
        self.scripts = 0
        self.stock(stock if stock is not None else {"A": [{"lot": "L1", "qty": 2}, {"lot": "L2", "qty": 3}]})
        files: dict[Path, str] = {self.dir / "AGENT.md": AGENT_MD}
        for folder, (key, description, tools) in SKILLS.items():
            front = f"name: {folder}\nskill_key: {key}\ndescription: {description}\ntools: [{', '.join(tools)}]"
            files[self.dir / "skills" / folder / "SKILL.md"] = f"---\n{front}\n---\nThe {key} manual.\n"
            files[self.dir / "skills" / folder / "contract.json"] = json.dumps(CONTRACTS[folder])
        for name in ("checkStock", "createOrder", "notifyRestock", "alertSales"):
            tool = self.dir / "skills" / "tools" / name
            handler = textwrap.dedent(HANDLER).format(log=str(self.log), stock=str(self.stock_file), name=name)
            files[tool / "SKILL.md"] = f"---\nname: {name}\ndescription: tool {name}\n---\n"
            files[tool / "handler.py"] = handler
            files[tool / "schema.json"] = json.dumps(SKU)
        write_files(files)

    def stock(self, stock: dict[str, list[dict[str, Any]]]) -> None:
        """(Re)write what checkStock answers: sku → its lots ``[{lot, qty}]``."""
        self.stock_file.write_text(json.dumps(stock), encoding="utf-8")

    def sid(self, name: str) -> str:
        return f"{name}-{self.uid}"

    def script(self, *turns: dict[str, Any]) -> str:
        self.scripts += 1
        path = self.root / f"shop-turns{self.scripts}.yaml"
        path.write_text(yaml.safe_dump({"turns": list(turns)}, allow_unicode=True), encoding="utf-8")
        return f"script:{path}"

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text(encoding="utf-8").splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]


def when(upstream: str, **condition: Any) -> dict[str, Any]:
    """A ``dependsOn`` entry with a condition: ``when("n1", evidence="lots", op="NOT_EMPTY")``."""
    return {"node": upstream, "when": condition}
