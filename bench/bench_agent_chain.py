"""The agent's tool-call chain (§13) per business-tool call, against calling the same skill through yard.run.

    python bench/bench_agent_chain.py

A trivial read tool (an in-process async ``execute`` returning a small dict) is called N times per round through
``skillyard.agent.chain.call_tool`` — every stage doing real work: the arg policy (JSON copy, catalog lookup,
required check), binding, the param contract (provenance of an arg with ``sources: ["MODEL"]``), the fingerprint,
the call, the response contract (a ``success`` EQ spec), evidence (one extract with ``fields``, saved to a
MemoryEvidenceStore) and the fingerprint count — and N times through ``yard.run`` with the same arguments and
the same runtime_context the chain passes (identity + session id). The arguments differ on every call, so the
fingerprint fuse never trips. Each round starts a fresh NodeContext (a node with no evidence yet), so a round is
a node making N calls.

Target: chain time / yard.run time <= 1.5 (best rounds).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
import time
from pathlib import Path

from _common import isolate, us, verdict

TMP, BASE = isolate("agent-chain")

from skillyard.agent.chain import call_tool  # noqa: E402  (after isolate(): the host reads the environment)
from skillyard.agent.context import MemoryEvidenceStore, NodeContext  # noqa: E402
from skillyard.agent.loader import ContractSkill, load_contract_skill  # noqa: E402
from skillyard.agent.settings import AgentSettings  # noqa: E402
from skillyard.agent.state import NodeState, SessionState, TaskState  # noqa: E402
from skillyard.yard import SkillYard  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "30"))  # best of 30: steadier on a shared VM than 15
N = int(os.environ.get("BENCH_CALLS", "100"))  # calls per round = tool calls of one node
TARGET = 1.5
TOOL = "lookupItems"
HANDLER = textwrap.dedent(
    """\
    async def execute(input, ctx):
        return {"code": 200, "data": {"items": [{"id": input["q"], "name": "item"}]}}
    """
)
SCHEMA = {
    "type": "object",
    "properties": {"q": {"type": "string", "description": "what to look up"}},
    "required": ["q"],
}
CONTRACT = {
    "tools": {
        TOOL: {
            "label": "Looking up items",
            "args": {"q": {"sources": ["MODEL"], "label": "查询"}},
            "success": {"path": "code", "op": "EQ", "value": 200},
            "extracts": [{"key": "items", "path": "data.items", "fields": ["id", "name"]}],
        }
    }
}
IDENTITY = {"user_id": "u-7", "org_id": "o-1"}
SESSION_ID = "sess-1"


def make_skills(root: Path) -> None:
    tool = root / TOOL
    tool.mkdir(parents=True)
    (tool / "SKILL.md").write_text(f"---\nname: {TOOL}\ndescription: Look items up.\n---\n\n# Lookup\n")
    (tool / "handler.py").write_text(HANDLER)
    (tool / "schema.json").write_text(json.dumps(SCHEMA))
    contract = root / "items_skill"
    contract.mkdir()
    front = f"name: items_skill\nskill_key: bench.items\ndescription: Items.\ntools: [{TOOL}]\n"
    (contract / "SKILL.md").write_text(f"---\n{front}---\nManual.\n")
    (contract / "contract.json").write_text(json.dumps(CONTRACT))


def node_context(yard: SkillYard, skill: ContractSkill) -> NodeContext:
    """A fresh node (no evidence, no fingerprint) of a fresh task, as tests/agent/conftest.py builds one."""
    return NodeContext(
        yard=yard,
        skill=skill,
        session=SessionState(id=SESSION_ID, agent_code="bench", identity=dict(IDENTITY)),
        task=TaskState(id="task-1", session_id=SESSION_ID),
        node=NodeState(id="node-1", task_id="task-1", skill_key="bench.items", goal="look items up"),
        store=MemoryEvidenceStore(),
        settings=AgentSettings(),
    )


async def chain_round(yard: SkillYard, skill: ContractSkill, n: int) -> float:
    ctx = node_context(yard, skill)
    start = time.perf_counter()
    for i in range(n):
        obs = await call_tool(ctx, TOOL, {"q": f"q{i}"})
        if not obs.ok:
            sys.exit(f"unexpected chain observation at call {i}: {obs!r}")
    elapsed = time.perf_counter() - start
    last = ctx.evidence[-1]
    if len(ctx.evidence) != n or last.extracts != {"items": [{"id": f"q{n - 1}", "name": "item"}]} or last.empty:
        sys.exit(f"unexpected evidence: {len(ctx.evidence)} records, last {last!r}")
    return elapsed


async def yard_round(yard: SkillYard, n: int) -> float:
    context = {**IDENTITY, "session_id": SESSION_ID}  # what the chain passes (chain/invoke.py runtime_context)
    start = time.perf_counter()
    for i in range(n):
        result = await yard.run(TOOL, {"q": f"q{i}"}, context=context)
        if result.get("code") != 200:
            sys.exit(f"unexpected envelope from yard.run at call {i}: {result!r}")
    return time.perf_counter() - start


async def main() -> None:
    root = BASE / "skills"
    make_skills(root)
    async with SkillYard(skills_dirs=[root], include_builtin=False) as yard:
        if yard.database.exists:  # no run log on either side: both contenders go through the same yard.run
            sys.exit("a database exists: the run log would be timed too (see bench/_common.py)")
        skill, issues = load_contract_skill("bench.items", yard.skill("items_skill"))
        if skill is None:
            sys.exit(f"the contract skill did not load: {issues}")
        expected = {"code": 200, "data": {"items": [{"id": "q0", "name": "item"}]}, "ok": True, "success": True}
        if (result := await yard.run(TOOL, {"q": "q0"})) != expected:
            sys.exit(f"unexpected envelope from yard.run: {result!r}")
        for _ in range(5):  # warm up: module import, validator, config cache, workspace folder
            await chain_round(yard, skill, N)
            await yard_round(yard, N)

        best = {"chain": float("inf"), "yard": float("inf")}
        for _ in range(ROUNDS):  # contenders interleaved round by round
            best["chain"] = min(best["chain"], await chain_round(yard, skill, N) / N)
            best["yard"] = min(best["yard"], await yard_round(yard, N) / N)

    chain, plain = best["chain"], best["yard"]
    ratio = chain / plain
    print(f"python {sys.version.split()[0]}; best of {ROUNDS} rounds of {N} calls each (contenders interleaved)")
    print(f"chain   call_tool(ctx, {TOOL!r}, {{'q': …}}):  {us(chain)}/call  {1 / chain:,.0f} calls/s")
    print(f"base    yard.run({TOOL!r}, {{'q': …}}, context):  {us(plain)}/call  {1 / plain:,.0f} calls/s")
    print(f"chain/yard.run = {ratio:.2f}x (chain overhead {us(chain - plain)}/call)")
    met = ratio <= TARGET
    print(f"target: chain/yard.run <= {TARGET:g}x: {verdict(met)}")


if __name__ == "__main__":
    asyncio.run(main())
