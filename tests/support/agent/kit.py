"""The probe kit (skill probe.kit over two logging business skills, lookup and record), for binding, expressions,
evidence/entities, outputs and the data builtins; EvScript copies evidence ids from observations as a real
model would."""

from __future__ import annotations

import json
import re
import textwrap
import uuid
from pathlib import Path
from typing import Any

import yaml

from skillyard import SkillYard
from skillyard.agent.models import ModelReply, ScriptedModel, ToolCall
from skillyard.agent.store import AgentStore
from skillyard.agent.turn import TurnResult
from support.agent.probes import call, write_files

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}


REJECTED = "agent_runtime.40025"


ASK_USER = "agent_runtime.40024"


EVIDENCE_PATH_INVALID = "agent_runtime.42235"


FINISH_OUTPUT_MISSING = "agent_runtime.42252"


BUSINESS = "agent_runtime.40004"  # TOOL_BUSINESS_FAILED: lookup has no error spec


HANDLER = """
import json, pathlib

LOG = pathlib.Path({log!r})
NAME = {name!r}


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input}}, ensure_ascii=False) + "\\n")
    mode = input.get("mode", "ok")
    if mode == "io":
        raise OSError("disk gone")
    if mode == "business":
        return {{"ok": False, "code": "E1", "data": input.get("respond", {{"records": [{{"id": "bad-1"}}]}})}}
    if mode == "empty":
        return {{"code": 200, "data": {{"records": []}}}}
    if "respond" in input:
        return {{"code": 200, "data": input["respond"]}}
    return {default}
"""


RECORDS = [{"id": "n-1", "title": "季度总结", "tag": "x"}, {"id": "n-2", "title": "周报", "tag": "y"}]


DEFAULTS = {
    "lookup": '{"code": 200, "data": {"records": ' + json.dumps(RECORDS, ensure_ascii=False) + "}}",
    "probe": '{"code": 200, "echo": input}',
}


SCHEMAS = {
    "lookup": {"type": "object", "properties": {"q": {}, "mode": {}, "respond": {}}},
    "probe": {"type": "object"},
}


FREE = {"sources": ["MODEL"], "required": False}


OK200 = {"path": "code", "op": "EQ", "value": 200}


def base_contract() -> dict[str, Any]:
    return {
        "tools": {
            "lookup": {
                "label": "正在查找",
                "args": {"q": FREE, "mode": FREE, "respond": FREE},
                "success": OK200,
                "extracts": [{"key": "notes", "path": "data.records", "fields": ["id", "title"]}],
            },
            "probe": {"label": "正在探测", "args": {"mode": FREE}, "success": OK200},
        }
    }


class Kit:
    """An agent folder with one contract skill (``probe.kit``) over two logging business skills: ``lookup`` (a
    query whose result the model may choose with ``respond``) and ``probe`` (echoes its bound input)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "calls.jsonl"
        self.dir = root / "kit_agent"
        self.uid = uuid.uuid4().hex[:10]
        self.scripts = 0
        skills = self.dir / "skills"
        self.skill = skills / "kit"
        files = {
            self.dir / "AGENT.md": "---\nagent_code: kit\nagent_name: Probe kit\nskills: [probe.kit]\n---\n"
            "# Identity\nA probe agent.\n# Mission\nProbe the runtime.\n",
            self.skill / "SKILL.md": "---\nname: kit\nskill_key: probe.kit\ndescription: Probes.\n"
            "tools: [lookup, probe]\n---\nThe kit manual.\n",
        }
        for name, default in DEFAULTS.items():
            folder = skills / name
            files[folder / "SKILL.md"] = f"---\nname: {name}\ndescription: tool {name}\nexec: {{timeout: 20}}\n---\n"
            files[folder / "handler.py"] = textwrap.dedent(HANDLER).format(
                log=str(self.log), name=name, default=default
            )
            files[folder / "schema.json"] = json.dumps(SCHEMAS[name])
        write_files(files)
        self.contract(base_contract())

    def contract(self, contract: dict[str, Any]) -> None:
        (self.skill / "contract.json").write_text(json.dumps(contract, ensure_ascii=False), encoding="utf-8")

    def with_args(self, outputs: dict[str, Any] | None = None, **args: Any) -> dict[str, Any]:
        """The base contract with these ``probe`` argument contracts (and outputs); written and returned."""
        contract = base_contract()
        contract["tools"]["probe"]["args"].update(args)
        if outputs is not None:
            contract["outputs"] = outputs
        self.contract(contract)
        return contract

    def sid(self, name: str) -> str:
        return f"{name}-{self.uid}"

    def model(self, *turns: dict[str, Any]) -> EvScript:
        self.scripts += 1
        path = self.root / f"turns{self.scripts}.yaml"
        path.write_text(yaml.safe_dump({"turns": list(turns)}, allow_unicode=True), encoding="utf-8")
        return EvScript(path)

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(x) for x in self.log.read_text(encoding="utf-8").splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]

    def probed(self, index: int = 0) -> dict[str, Any]:
        return self.calls("probe")[index]["input"]

    async def talk(
        self, messages: list[str], *turns: dict[str, Any], session: str = "s", identity: dict | None = None
    ) -> list[TurnResult]:
        """One agent; each message is one ``send`` in the same session; the turns are one script."""
        model = self.model(*turns)
        out = []
        async with SkillYard() as yard:
            agent = await yard.agent(self.dir, model=model)
            for message in messages:
                out.append(await agent.send(self.sid(session), message, identity=identity or IDENTITY))
        return out

    async def send(self, message: str, *turns: dict[str, Any], session: str = "s") -> TurnResult:
        return (await self.talk([message], *turns, session=session))[0]

    async def session(self, session: str = "s") -> Any:
        async with SkillYard() as yard:
            return await AgentStore(yard.database).load_session(self.sid(session))


class EvScript:
    """The scripted model; ``$EV`` in a call's arguments becomes the newest evidence id the model has seen in a tool
    message (a result, or the list of visible ids in a refusal), ``$EV1`` the first one ever seen (kept across
    tasks: the model remembers what it read)."""

    def __init__(self, path: Path) -> None:
        self.inner = ScriptedModel(str(path))
        self.ids: list[str] = []

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: dict[str, Any]):
        reply = await self.inner.complete(messages, tools, state)
        for m in messages:
            if m.get("role") == "tool":
                for ev in re.findall(r"\bev_[0-9a-f]+", str(m.get("content", ""))):
                    if ev not in self.ids:
                        self.ids.append(ev)
        if not self.ids:
            return reply

        def fix(text: str) -> str:
            return text.replace("$EV1", self.ids[0]).replace("$EV", self.ids[-1])

        return ModelReply(reply.text, tuple(ToolCall(c.id, c.name, fix(c.arguments)) for c in reply.tool_calls))


def finish(text: str = "好了") -> dict[str, Any]:
    return call("builtin_node_finish", {"output": text})


def put(key: str, value: Any, source: str = "USER", ref: str = "msg", path: str | None = None) -> dict[str, Any]:
    arguments = {"key": key, "value": value, "sourceType": source, "sourceRef": ref}
    if path is not None:
        arguments["sourcePath"] = path
    return call("builtin_output_set", arguments)


SHARE = {"required": False, "share": "SESSION"}


def lookup(respond: Any = None, mode: str | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"q": "a"}
    if respond is not None:
        args["respond"] = respond
    if mode:
        args["mode"] = mode
    return call("lookup", args)


def entity_contract(kit: Kit, entity: dict[str, Any], path: str = "data.records", **args: Any) -> None:
    contract = kit.with_args(**args)
    contract["tools"]["lookup"]["extracts"] = [{"key": "things", "path": path, "entity": entity}]
    kit.contract(contract)


async def load(kit: Kit) -> Any:
    from skillyard.agent import load_agent

    async with SkillYard() as yard:
        return await load_agent(yard, kit.dir)


async def two_sessions(kit: Kit, first: list[dict[str, Any]], second: list[dict[str, Any]]) -> tuple[Any, Any]:
    """Session A runs ``first``; session B runs ``second`` with a model that has read A's tool messages too."""
    model_a, model_b = kit.model(*first), kit.model(*second)
    model_b.ids = model_a.ids  # one model that remembers what it read in the other session
    async with SkillYard() as yard:
        a = await (await yard.agent(kit.dir, model=model_a)).send(kit.sid("sa"), "找", identity=IDENTITY)
        b = await (await yard.agent(kit.dir, model=model_b)).send(kit.sid("sb"), "用", identity=IDENTITY)
    return a, b
