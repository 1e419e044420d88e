"""§6.3 step 3 in an agent turn: the artifacts of a node's tool calls reach ``reply_to`` once, when the turn ends,
not after each tool call."""

from __future__ import annotations

import json

from skillyard import SkillYard
from support.agent.probes import call, say, write_files
from support.agent.runtime import script

DRAW = """from pathlib import Path

async def execute(input, ctx):
    out = Path(ctx["workspace_dir"]) / (input["name"] + ".png")
    out.write_bytes(b"\\x89PNG " + input["name"].encode())
    return {"ok": True, "images": [{"local_path": str(out)}]}
"""
CONTRACT = {
    "tools": {
        "drawChart": {
            "label": "Drawing the chart",
            "args": {"name": {"sources": ["USER", "MODEL"]}},
            "success": {"path": "ok", "op": "TRUTHY"},
        }
    }
}


def _agent(root):
    agent = root / "painter"
    skills = agent / "skills"
    write_files(
        {
            agent / "AGENT.md": "---\nagent_code: painter\nagent_name: Painter\nskills: [painter.charts]\n---\n"
            "# Identity\nDraws charts.\n\n# Mission\nDraw the charts asked for.\n",
            skills / "charts" / "SKILL.md": "---\nname: charts\nskill_key: painter.charts\n"
            "description: Draws charts.\ntools: [drawChart]\n---\n# Manual\nDraw what the user asks for.\n",
            skills / "charts" / "contract.json": json.dumps(CONTRACT),
            skills / "drawChart" / "SKILL.md": "---\nname: drawChart\ndescription: Draw a chart.\n---\n",
            skills / "drawChart" / "handler.py": DRAW,
            skills / "drawChart" / "schema.json": json.dumps(
                {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
            ),
        }
    )
    return agent


async def test_a_turns_artifacts_are_sent_once_at_its_end(db_env, tmp_path, telegram):
    agent_dir = _agent(tmp_path)
    model = script(
        tmp_path / "script.yaml",
        call("drawChart", {"name": "sales"}),
        call("drawChart", {"name": "costs"}),
        say("两张图都画好了"),
    )
    identity = {"user_id": "42", "org_id": "7", "role_id": "painter-r", "reply_to": "telegram:4242"}
    async with SkillYard() as yard:
        await yard.configs.set(
            "painter-r", "send_message", {"telegram_bot_token": telegram.TOKEN, "telegram_api_base": telegram.base}
        )
        agent = await yard.agent(agent_dir, model=model)
        result = await agent.send("painter-s1", "画销售和成本两张图", identity=identity)
    assert result.reply == "两张图都画好了", result
    assert len(result.observations) == 2
    contents = [json.dumps(o.content, default=str) for o in result.observations]
    assert all("images" in c and "delivery" not in c for c in contents)  # the envelopes: no delivery per call
    photos = telegram.sent("/sendPhoto")
    assert sorted(p.files["photo"][0] for p in photos) == ["costs.png", "sales.png"]  # each once, after the turn
