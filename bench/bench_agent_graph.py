"""The task graph's extra cost: a three-node planned task against three single-node tasks making the same calls.

    python bench/bench_agent_graph.py

Three contract skills each call one trivial read tool (an in-process async ``execute``) once and finish. The graph
side sends one message to a fresh session: the model plans three nodes (n2 after n1, n3 after n2), and the three
nodes run in one turn, with evidence, the pinned binding and the graph saved to PostgreSQL. The baseline sends three
messages, each a new task with ``skill_key=`` (part 1's one-node tasks: no planning call), making the same tool
calls. Both run on the embedded database, as users run agents, with an in-process model that answers instantly
(what is timed is the runtime, not a model).

Target: graph time / three single-node tasks <= 1.3 (best rounds).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from _common import isolate, us, verdict

TMP, BASE = isolate("agent-graph")

from skillyard.agent.models import ModelReply, ToolCall  # noqa: E402  (after isolate(): the host reads the env)
from skillyard.yard import SkillYard  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "15"))
TARGET = 1.3
SKILLS = ("bench.a", "bench.b", "bench.c")
HANDLER = "async def execute(input, ctx):\n    return {'code': 200, 'data': {'id': input.get('q', 'x')}}\n"


def make_agent(root: Path) -> Path:
    agent = root / "agent"
    for key in SKILLS:
        short = key.split(".")[1]
        tool = agent / "skills" / f"tool_{short}"
        tool.mkdir(parents=True)
        (tool / "SKILL.md").write_text(f"---\nname: tool_{short}\ndescription: Look {short} up.\n---\n")
        (tool / "handler.py").write_text(HANDLER)
        (tool / "schema.json").write_text(json.dumps({"type": "object", "properties": {"q": {"type": "string"}}}))
        skill = agent / "skills" / short
        skill.mkdir()
        front = f"name: {short}\nskill_key: {key}\ndescription: Reads {short}.\ntools: [tool_{short}]\n"
        (skill / "SKILL.md").write_text(f"---\n{front}---\nCall the tool, then finish.\n")
        contract = {
            "tools": {
                f"tool_{short}": {
                    "args": {"q": {"sources": ["MODEL"], "required": False}},
                    "success": {"path": "code", "op": "EQ", "value": 200},
                    "extracts": [{"key": short, "path": "data"}],
                }
            }
        }
        (skill / "contract.json").write_text(json.dumps(contract))
    skills = ", ".join(SKILLS)
    (agent / "AGENT.md").write_text(f"---\nagent_code: bench\nskills: [{skills}]\n---\n# Mission\nRead things.\n")
    return agent


class InstantModel:
    """Answers at once, from the conversation: plan three nodes, or call the node's tool, or finish."""

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: dict[str, Any]):
        names = [t["function"]["name"] for t in tools]
        if names == ["builtin_plan"]:
            nodes = [
                {"id": f"n{i}", "skillKey": key, "goal": f"read {key}", "dependsOn": [f"n{i - 1}"] if i > 1 else []}
                for i, key in enumerate(SKILLS, 1)
            ]
            return ModelReply(None, (ToolCall("p", "builtin_plan", json.dumps({"nodes": nodes})),))
        if messages[-1]["role"] == "tool":
            return ModelReply(None, (ToolCall("f", "builtin_node_finish", '{"output": "done"}'),))
        tool = next(n for n in names if n.startswith("tool_"))
        return ModelReply(None, (ToolCall("t", tool, '{"q": "x"}'),))


async def graph_round(agent: Any) -> float:
    session = f"g-{uuid.uuid4().hex[:12]}"
    start = time.perf_counter()
    turn = await agent.send(session, "read everything")
    elapsed = time.perf_counter() - start
    if turn.status != "DONE" or len(turn.graph["nodes"]) != 3 or len(turn.evidence) != 3:
        sys.exit(f"unexpected graph turn: {turn.as_dict()}")
    return elapsed


async def single_round(agent: Any) -> float:
    session = f"s-{uuid.uuid4().hex[:12]}"
    start = time.perf_counter()
    for key in SKILLS:
        turn = await agent.send(session, "read it", skill_key=key)
        if turn.status != "DONE" or len(turn.evidence) != 1:
            sys.exit(f"unexpected single-node turn: {turn.as_dict()}")
    return time.perf_counter() - start


async def main() -> None:
    folder = make_agent(BASE)
    async with SkillYard(include_builtin=False) as yard:
        agent = await yard.agent(folder, model=InstantModel())
        for _ in range(3):  # warm up: the database, module imports, validators
            await graph_round(agent)
            await single_round(agent)
        best = {"graph": float("inf"), "single": float("inf")}
        for _ in range(ROUNDS):  # contenders interleaved round by round
            best["graph"] = min(best["graph"], await graph_round(agent))
            best["single"] = min(best["single"], await single_round(agent))
    graph, single = best["graph"], best["single"]
    ratio = graph / single
    print(f"python {sys.version.split()[0]}; best of {ROUNDS} rounds, embedded PostgreSQL, an instant in-process model")
    print(f"graph   one task, 3 planned nodes (plan call + 3 tool calls + 3 finishes):  {us(graph)}")
    print(f"base    3 tasks of 1 node each, skill_key= (3 tool calls + 3 finishes):    {us(single)}")
    print(f"graph/3 single-node tasks = {ratio:.2f}x")
    print(f"target: <= {TARGET:g}x: {verdict(ratio <= TARGET)}")


if __name__ == "__main__":
    asyncio.run(main())
