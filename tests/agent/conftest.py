"""Fixtures of the agent runtime tests: the agent folders of the runner probes, the NodeContext of the builtins, the
model servers, the CLI commands on the click group."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from skillyard import SkillYard
from skillyard.agent.context import MemoryEvidenceStore, NodeContext
from skillyard.agent.contract_parse import parse_contract
from skillyard.agent.loader import ContractSkill, load_contract_skill
from skillyard.agent.settings import AgentSettings
from skillyard.agent.state import NodeState, SessionState, TaskState
from support.agent.chain import (
    BASE_CONTRACT,
    FIND,
    SAVE,
    SCHEMA_ANY,
    SCHEMA_SAVE,
    Build,
    Harness,
    RecordingStore,
    contract_skill,
    tool_skill,
)
from support.agent.context import CONTRACT, TOOLS
from support.agent.desk import DeskAgent, Plan, make_handler
from support.agent.docs import DocsAgent
from support.agent.exec import ExecAgent, Server
from support.agent.keeper import KeeperAgent
from support.agent.kit import Kit
from support.agent.loader import FIXTURE
from support.agent.memo import MemoAgent
from support.agent.models import ChatServer
from support.agent.notes import NotesAgent
from support.local_http import serve


@pytest.fixture
def notes_agent(tmp_path: Path) -> NotesAgent:
    return NotesAgent(tmp_path)


@pytest.fixture
def keeper_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> KeeperAgent:
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", "riskyWrite,stampNote")
    return KeeperAgent(tmp_path)


@pytest.fixture
def memo_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MemoAgent:
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", "quickWrite")
    return MemoAgent(tmp_path)


@pytest.fixture
def docs_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DocsAgent:
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", "bumpDoc")
    return DocsAgent(tmp_path)


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    return Kit(tmp_path)


@pytest.fixture
def desk_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DeskAgent:
    for name in list(os.environ):
        if name.startswith(("SKILLYARD_AGENT_", "SKILLYARD_MODEL")) or name.startswith("OPENAI_"):
            monkeypatch.delenv(name)
    return DeskAgent(tmp_path)


@pytest.fixture
def chat() -> Iterator[tuple[Plan, str]]:
    plan = Plan()
    with serve(make_handler(plan)) as url:
        yield plan, f"{url}/v1"


@pytest.fixture
def server() -> Iterator[tuple[Server, str]]:
    from support.local_http import serve

    srv = Server()
    with serve(srv.handler()) as base:
        yield srv, base


@pytest.fixture
def exec_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ExecAgent:
    return ExecAgent(tmp_path, monkeypatch)


@pytest.fixture
def yard(skills_root: Path, make_skill) -> SkillYard:
    make_skill("article_lifecycle", "name: article_lifecycle\ndescription: Creates articles\nskill_key: cms.article")
    return SkillYard(skills_dirs=[skills_root], include_builtin=False)


@pytest.fixture
def make_ctx(yard: SkillYard):
    def make(contract: dict[str, Any] | None = None, tools: tuple[str, ...] = TOOLS, **node: Any) -> NodeContext:
        parsed, _ = parse_contract(json.dumps(CONTRACT if contract is None else contract), skill_key="cms.article")
        skill = ContractSkill(
            "cms.article",
            "article_lifecycle",
            "Creates articles",
            "Manual.",
            tools,
            parsed,
            yard.skill("article_lifecycle"),
        )
        session = SessionState("s1", "cms", identity={"user_id": 7, "actor_name": "Ann"})
        task = TaskState("t1", "s1", node_ids=["n1"])
        return NodeContext(
            yard=yard,
            skill=skill,
            session=session,
            task=task,
            node=NodeState("n1", "t1", "cms.article", "create an article", **node),
            store=MemoryEvidenceStore(),
            settings=AgentSettings(),
        )

    return make


@pytest.fixture
async def build(tmp_path: Path) -> AsyncIterator[Build]:
    yards: list[SkillYard] = []

    async def make(
        contract: dict[str, Any] | None = None,
        *,
        tools: list[str] | None = None,
        settings: AgentSettings | None = None,
        user_messages: list[str] | None = None,
        find_result: str = FIND,
        extra_skills: Callable[[Path, Path], None] | None = None,
    ) -> Harness:
        root = tmp_path / f"skills{len(yards)}"
        root.mkdir()
        log = tmp_path / f"calls{len(yards)}.log"
        tool_skill(root, log, "saveNote", SAVE, SCHEMA_SAVE, "exec: {timeout: 0.5}\n")
        tool_skill(root, log, "findNotes", find_result, SCHEMA_ANY, "exec: {timeout: 0.5}\n")
        tool_skill(root, log, "otherTool", SAVE, SCHEMA_ANY)
        if extra_skills is not None:
            extra_skills(root, log)
        contract_skill(root, contract or BASE_CONTRACT, tools or ["saveNote", "findNotes"])
        yard = SkillYard(skills_dirs=[root], include_builtin=False)
        yards.append(yard)
        loaded, issues = load_contract_skill("test.notes", yard.skill("notes_skill"))
        assert loaded is not None, issues
        session = SessionState(
            id="sess-1", agent_code="test", identity={"user_id": "u-7"}, user_messages=list(user_messages or [])
        )
        task = TaskState(id="task-1", session_id="sess-1")
        node = NodeState(id="node-1", task_id="task-1", skill_key="test.notes", goal="save a note")
        ctx = NodeContext(
            yard=yard,
            skill=loaded,
            session=session,
            task=task,
            node=node,
            store=RecordingStore(),
            settings=settings or AgentSettings(),
        )
        return Harness(root, log, yard, ctx)

    yield make
    for yard in yards:
        await yard.close()


@pytest.fixture
def cms(tmp_path: Path) -> Path:
    """A copy of the fixture agent ``cms`` (AGENT.md, skills/ with the contract skill and two real tools)."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "cms"))


@pytest.fixture(scope="module")
def chat_server() -> Iterator[str]:
    with serve(ChatServer) as url:  # one server for the module: shutting one down takes half a second
        yield f"{url}/v1"


@pytest.fixture
def chat_url(chat_server: str) -> str:
    ChatServer.requests.clear()
    return chat_server
