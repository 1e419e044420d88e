"""read_skill_file (builtins/skill_file.py): the rest of a long manual."""

from __future__ import annotations

import json

from skillyard import SkillYard
from support.agent.memo import ARG_REJECTED, IDENTITY, TOOLS, MemoAgent, Recorder
from support.agent.probes import call, needs_db, say

pytestmark = needs_db


async def test_a_long_contract_manual_is_cut_with_a_notice_and_read_skill_file_reads_the_rest(memo_agent: MemoAgent):
    manual = "开头。" + "规则" * 4100 + "结尾的秘密规则"
    memo_agent.tools(TOOLS, manual)
    (memo_agent.keeper / "extra").mkdir()
    (memo_agent.keeper / "extra" / "notes.md").write_text("附加说明", encoding="utf-8")
    outside = memo_agent.root / "outside.txt"
    outside.write_text("不该读到", encoding="utf-8")
    (memo_agent.keeper / "link.txt").symlink_to(outside)
    model = Recorder(
        memo_agent.script(
            call("read_skill_file", {"offset": 8000}),
            call("read_skill_file", {"path": "extra/notes.md"}),
            call("read_skill_file", {"path": "../../../outside.txt"}),
            call("read_skill_file", {"path": str(outside)}),
            call("read_skill_file", {"path": "link.txt"}),
            call("read_skill_file", {"path": "SKILL.md", "offset": -1}),
            call("read_skill_file", {"path": "nothing.md"}),
            say("stop"),
        )
    )
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        turn = await agent.send(memo_agent.sid("long"), "你好", identity=IDENTITY)
    system = model.system(0)
    assert "开头。" in system and "结尾的秘密规则" not in system and "read_skill_file" in system
    assert "read_skill_file" in model.offered(0)
    rest, extra, *refused = turn.observations
    assert rest.ok and "结尾的秘密规则" in rest.content["content"]
    assert extra.ok and extra.content["content"] == "附加说明"
    assert [o.code for o in refused] == [ARG_REJECTED] * 5, refused
    assert all("不该读到" not in json.dumps(o.content, ensure_ascii=False) for o in refused)
