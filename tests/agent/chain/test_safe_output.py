"""Safe output of exports (``export`` on a read tool, chain/export.py): workspace-relative paths only, verified size
and hash, atomic publication, no clobber unless the user chose to overwrite, nothing final-looking on failure."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from skillyard import SkillYard
from support.agent.probes import call, codes, finish, needs_db, say
from support.agent.receipts import BYPASS, IDENTITY, DocOpsAgent, stored_evidence

PATH_INVALID = "agent_runtime.42243"
WRITE_FORBIDDEN = "agent_runtime.42244"
BUSINESS = "agent_runtime.40004"
TEXT = "# 季度总结\n第一季度……\n"
ASK = "把季度总结导出到 exports/q.md"


def content(text: str = TEXT, *, size: int | None = None, sha: str | None = None) -> dict[str, object]:
    raw = text.encode("utf-8")
    return {
        "ok": True,
        "data": {
            "content": text,
            "size": len(raw) if size is None else size,
            "sha256": hashlib.sha256(raw).hexdigest() if sha is None else sha,
        },
    }


@pytest.fixture
def ops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DocOpsAgent:
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", BYPASS)
    return DocOpsAgent(tmp_path)


async def workspace_of(yard: SkillYard, ops: DocOpsAgent, session: str) -> Path:
    return Path(yard.workspace(ops.sid(session)))


def leftovers(folder: Path) -> list[str]:
    """Hidden temp files (``.name.<hex>.part``) anywhere under ``folder``."""
    return [str(p) for p in folder.rglob("*.part")]


@needs_db
async def test_an_export_is_verified_and_published_in_the_workspace(ops: DocOpsAgent):
    ops.answers(exportDoc=[content()])
    script = ops.script(call("exportDoc", {"docId": "d-1", "path": "exports/q.md"}), finish("已导出"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.send(ops.sid("ok"), ASK, identity=IDENTITY)
        [record] = await stored_evidence(yard, done, "exportDoc")
        folder = await workspace_of(yard, ops, "ok")
    written = folder / "exports" / "q.md"
    assert written.read_text(encoding="utf-8") == TEXT and leftovers(folder) == []
    sha = hashlib.sha256(TEXT.encode()).hexdigest()
    assert record.export == {"path": "exports/q.md", "size": len(TEXT.encode()), "sha256": sha, "overwrote": False}
    seen = done.observations[0]
    assert "exports/q.md" in seen.next_step and "written to exports/q.md" in str(seen.content)
    assert record.response["data"]["content"] == TEXT  # the evidence keeps what the tool returned
    assert done.status == "DONE"


@needs_db
@pytest.mark.parametrize("path", ["/tmp/q.md", "../q.md", "exports/../../q.md", "exports/"])
async def test_paths_outside_the_workspace_are_refused_before_the_call(ops: DocOpsAgent, path: str):
    script = ops.script(call("exportDoc", {"docId": "d-1", "path": path}), say("路径不对"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        turn = await agent.send(ops.sid("bad"), ASK, identity=IDENTITY)
    [refused] = turn.observations
    assert refused.code == PATH_INVALID and "inside the workspace" in refused.next_step
    assert ops.calls("exportDoc") == []


@needs_db
async def test_a_symlink_out_of_the_workspace_is_refused(ops: DocOpsAgent, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    async with SkillYard() as yard:
        folder = await workspace_of(yard, ops, "link")
    os.symlink(outside, folder / "exports")
    script = ops.script(call("exportDoc", {"docId": "d-1", "path": "exports/q.md"}), say("不行"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        turn = await agent.send(ops.sid("link"), ASK, identity=IDENTITY)
    assert codes(turn) == [PATH_INVALID] and "symlink" in turn.observations[0].content
    assert list(outside.iterdir()) == []


@needs_db
async def test_an_existing_file_is_replaced_only_when_the_user_chose_to_overwrite(ops: DocOpsAgent):
    """No clobber: refused before the call; overwrite: true from the model is still refused; after the user answers
    the follow-up (in a new process) the export replaces the file."""
    ops.answers(exportDoc=[content("新内容\n")])
    args = {"docId": "d-1", "path": "exports/q.md"}
    script = ops.script(
        call("exportDoc", args),
        call("exportDoc", {**args, "overwrite": True}),  # the model's own choice
        call("builtin_node_follow_up", {"question": "文件已存在，要覆盖吗？", "expectedFields": ["overwrite"]}),
        call("exportDoc", {**args, "overwrite": True}),
        finish("已覆盖"),
    )
    sid = "clobber"
    async with SkillYard() as yard:
        folder = await workspace_of(yard, ops, sid)
        (folder / "exports").mkdir()
        (folder / "exports" / "q.md").write_text("旧内容\n", encoding="utf-8")
        agent = await yard.agent(ops.dir, model=script)
        asked = await agent.send(ops.sid(sid), ASK, identity=IDENTITY)
    assert codes(asked)[:2] == [WRITE_FORBIDDEN, "agent_runtime.40024"], asked.as_dict()
    assert "overwrite" in asked.observations[0].next_step and ops.calls("exportDoc") == []
    assert (folder / "exports" / "q.md").read_text(encoding="utf-8") == "旧内容\n"
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.resume(ops.sid(sid), "REPLY", "覆盖")
        [record] = await stored_evidence(yard, done, "exportDoc")
    assert done.status == "DONE", done.as_dict()
    assert (folder / "exports" / "q.md").read_text(encoding="utf-8") == "新内容\n"
    assert record.export is not None and record.export["overwrote"] is True and leftovers(folder) == []


@needs_db
@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (content(size=3), "bytes"),
        (content(sha="0" * 64), "SHA-256"),
        ({"ok": True, "data": {"size": 1}}, "no text"),
    ],
)
async def test_an_export_that_does_not_verify_leaves_nothing_behind(ops: DocOpsAgent, answer: dict, why: str):
    ops.answers(exportDoc=[answer])
    script = ops.script(call("exportDoc", {"docId": "d-1", "path": "exports/q.md"}), say("导出失败"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        turn = await agent.send(ops.sid("bad"), ASK, identity=IDENTITY)
        [record] = await stored_evidence(yard, turn, "exportDoc")
        folder = await workspace_of(yard, ops, "bad")
    [refused] = turn.observations
    assert refused.code == BUSINESS and why in refused.content
    assert not (folder / "exports" / "q.md").exists() and leftovers(folder) == []
    assert record.business_ok is False and record.export is not None and why in record.export["error"]


@needs_db
async def test_a_file_the_tool_wrote_is_verified_and_moved_to_its_name(ops: DocOpsAgent):
    ops.changed(
        "exportDoc",
        export={"pathArg": "path", "filePath": "data.file", "sha256Path": "data.sha256"},
    )
    sha = hashlib.sha256(TEXT.encode()).hexdigest()
    ops.answers(
        exportDoc=[
            {"ok": True, "$write": {"path": "tmp/x.part", "text": TEXT}, "data": {"file": "tmp/x.part", "sha256": sha}}
        ]
    )
    script = ops.script(call("exportDoc", {"docId": "d-1", "path": "exports/q.md"}), finish("已导出"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.send(ops.sid("file"), ASK, identity=IDENTITY)
        folder = await workspace_of(yard, ops, "file")
    assert done.status == "DONE", done.as_dict()
    assert (folder / "exports" / "q.md").read_text(encoding="utf-8") == TEXT
    assert not (folder / "tmp" / "x.part").exists()  # the tool's temp file was consumed
