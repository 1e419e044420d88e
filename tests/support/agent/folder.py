"""The agent folder the runner probes build in tmp_path: AGENT.md, one contract skill ``skills/keeper`` and business
skills whose handlers append every real execution to ``calls.jsonl`` (support.agent.notes, agent_keeper, agent_memo,
agent_docs and agent_desk each fill it with their own contract and tools)."""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any, ClassVar

import yaml

from skillyard import SkillYard
from skillyard.agent.store import AgentStore
from support.agent.probes import write_files


class AgentFolder:
    """A subclass names the folder, AGENT.md, the keeper's SKILL.md (``{tools}`` is the tool list), the handler
    template (formatted with ``log``, ``name``, ``result`` and :meth:`handler_values`), the results, the input schemas
    and the contract of its business tools."""

    FOLDER: ClassVar[str]
    AGENT_MD: ClassVar[str]
    KEEPER_MD: ClassVar[str]
    HANDLER: ClassVar[str]
    RESULTS: ClassVar[dict[str, str]]
    SCHEMAS: ClassVar[dict[str, dict[str, Any]]]
    CONTRACT: ClassVar[dict[str, Any]]
    TOOLS: ClassVar[list[str]]
    TOOL_FRONT: ClassVar[str] = "exec: {timeout: 0.5}\n"  # the business skills' frontmatter after the description
    UID_LENGTH: ClassVar[int] = 10
    ENSURE_ASCII: ClassVar[bool] = False  # how contract.json is written

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "calls.jsonl"
        self.dir = root / self.FOLDER
        self.scripts = 0
        self.uid = uuid.uuid4().hex[: self.UID_LENGTH]
        skills = self.dir / "skills"
        self.keeper = skills / "keeper"
        keeper_md = self.KEEPER_MD.format(tools=", ".join(self.TOOLS))
        files = {self.dir / "AGENT.md": self.AGENT_MD, self.keeper / "SKILL.md": keeper_md}
        for name, result in self.RESULTS.items():
            folder = skills / name
            files[folder / "SKILL.md"] = f"---\nname: {name}\ndescription: tool {name}\n{self.TOOL_FRONT}---\n"
            handler = textwrap.dedent(self.HANDLER).format(name=name, result=result, **self.handler_values())
            files[folder / "handler.py"] = handler
            files[folder / "schema.json"] = json.dumps(self.schema(name))
        write_files(files)
        self.contract(self.CONTRACT)

    def handler_values(self) -> dict[str, str]:
        return {"log": str(self.log)}

    def schema(self, name: str) -> dict[str, Any]:
        return self.SCHEMAS[name]

    def sid(self, name: str) -> str:
        """A session id unique to this test (the database outlives the test)."""
        return f"{name}-{self.uid}"

    def contract(self, contract: dict[str, Any] | str) -> None:
        text = contract if isinstance(contract, str) else json.dumps(contract, ensure_ascii=self.ENSURE_ASCII)
        (self.keeper / "contract.json").write_text(text, encoding="utf-8")

    def script(self, *turns: dict[str, Any]) -> str:
        self.scripts += 1
        path = self.root / f"turns{self.scripts}.yaml"
        path.write_text(yaml.safe_dump({"turns": list(turns)}, allow_unicode=True), encoding="utf-8")
        return f"script:{path}"

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """The real executions, in order (of one tool, or all)."""
        if not self.log.exists():
            return []
        rows = [json.loads(x) for x in self.log.read_text(encoding="utf-8").splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]


async def age_checkpoint(
    session_id: str, seconds: float, *, yard: SkillYard | None = None, gated: bool = False
) -> None:
    """Move the checkpoint of the session's open node ``seconds`` into the past (with ``gated``, the gated write's
    approval time too), in ``yard`` or in a SkillYard of its own."""
    if yard is None:
        async with SkillYard() as own:
            return await age_checkpoint(session_id, seconds, yard=own, gated=gated)
    store = AgentStore(yard.database)
    session = await store.load_session(session_id)
    assert session is not None and session.node_id and session.task_id
    node = await store.load_node(session.node_id)
    task = await store.load_task(session.task_id)
    assert node is not None and task is not None and node.checkpoint is not None
    node.checkpoint.created_at -= seconds
    if gated and node.gated is not None:
        node.gated.gated_at -= seconds
    await store.save_turn(node, task, session)
