"""NodeContext (context.py): the caller's identity mapped onto the §11 platform fields."""

from __future__ import annotations

from skillyard import SkillYard
from support.agent.keeper import KeeperAgent
from support.agent.probes import call, needs_db, say

pytestmark = needs_db


async def test_platform_fields_map_from_runtime_context_and_ids_stay_strings(keeper_agent: KeeperAgent):
    identity = {
        "user_id": 42,
        "actor_id": 7001,
        "actor_name": "Ada",
        "org_id": 9,
        "org_name": "Acme",
        "org_type": "COMPANY",
        "actor_department_path": "/acme/rd",
        "passport_id": "pp-1",
    }
    async with SkillYard() as yard:
        agent = await yard.agent(keeper_agent.dir, model=keeper_agent.script(call("whoAmI", {}), say("ok")))
        result = await agent.send(keeper_agent.sid("pf"), "我是谁", identity=identity)
    assert result.observations[0].ok
    assert keeper_agent.calls("whoAmI")[0]["input"] == {
        "userId": "42",
        "memberId": "7001",
        "name": "Ada",
        "organId": "9",
        "organName": "Acme",
        "organType": "COMPANY",
        "deptPath": "/acme/rd",
    }
    assert set(result.observations[0].sources.values()) == {"PLATFORM"}
