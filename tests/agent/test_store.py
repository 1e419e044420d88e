"""PostgreSQL persistence of the agent state (store.py): what a new SkillYard on the same database sees."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.agent.store import AgentStore, SessionBusy
from support.agent import runtime as runtime_kit
from support.agent.memo import IDENTITY, EvModel, MemoAgent, changed
from support.agent.probes import call, needs_db, say
from support.agent.runtime import make_agent, script, tool

pytestmark = needs_db


async def test_evidence_of_the_open_node_is_visible_after_a_restart(memo_agent: MemoAgent):
    model = EvModel(
        memo_agent.script(
            call("findNotes", {"q": "a"}),
            say("找到了两篇"),
            call("builtin_evidence_get", {"evidenceId": "$EV"}),
            call("pickTool", {"a": "n-2"}),
            say("stop"),
        )
    )
    memo_agent.contract(changed(lambda c: c["tools"]["pickTool"]["args"].update(a={"sources": ["EVIDENCE"]})))
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        await agent.send(memo_agent.sid("evr"), "找", identity=IDENTITY)
    async with SkillYard() as yard:
        agent = await yard.agent(memo_agent.dir, model=model)
        later = await agent.send(memo_agent.sid("evr"), "用第二篇", identity=IDENTITY)
    got, picked = later.observations
    assert got.ok and got.content["tool"] == "findNotes"
    assert picked.ok and picked.sources["a"] == "EVIDENCE"


async def test_a_nul_in_the_model_arguments_does_not_break_saving(tmp_path: Path) -> None:
    agent_dir = make_agent(tmp_path, tmp_path / "calls.jsonl")
    model = script(tmp_path / "turns.yaml", tool("findNote", title="周\x00报"), {"text": "没有找到"})
    async with SkillYard() as yard:
        agent = await yard.agent(agent_dir, model=model)
        turn = await agent.send("s-nul", "找周报", identity=runtime_kit.IDENTITY)
        assert turn.status == "RUNNING" and turn.reply == "没有找到"
        stored = await AgentStore(yard.database).load_session("s-nul")
    assert stored is not None and stored.node_id == turn.node_id


async def test_the_session_lock_is_reentrant_in_its_task_only_and_waits_as_told():
    session = "lock-" + uuid.uuid4().hex[:8]
    async with SkillYard() as yard:
        store, other = AgentStore(yard.database), AgentStore(yard.database)
        async with store.lock(session):
            async with other.lock(session, wait=False):  # the same task: re-entrant (the service runs send inside)
                pass

            async def elsewhere(wait: bool | float) -> None:
                async with other.lock(session, wait=wait):
                    pass

            with pytest.raises(SessionBusy, match="has a turn running"):
                await asyncio.create_task(elsewhere(False))  # another task never borrows the lock
            with pytest.raises(SessionBusy, match=r"for over 0\.3 s"):
                await asyncio.create_task(elsewhere(0.3))
        await asyncio.create_task(elsewhere(False))  # released
