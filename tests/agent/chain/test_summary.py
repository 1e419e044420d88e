"""The "标签：值" summary of a write (chain/summary.py, §14.1 step 2): labels, masked sensitive values, hidden platform
arguments."""

from __future__ import annotations

from skillyard.agent.chain import build_summary
from support.agent.chain import BASE_CONTRACT
from support.agent.keeper import KeeperAgent, send_once
from support.agent.probes import call, needs_db


@needs_db
async def test_approval_question_is_summary_plus_masked_label_value_lines(keeper_agent: KeeperAgent):
    result = await send_once(
        keeper_agent,
        "保存季度总结",
        call("saveNote", {"title": "季度总结", "pin": "hunter2"}),
        call("builtin_node_approval", {"summary": "保存一篇笔记", "toolName": "saveNote"}),
    )
    assert result.checkpoint is not None and result.checkpoint["type"] == "APPROVAL"
    question = result.checkpoint["question"]
    assert question.startswith("保存一篇笔记")
    assert "标题：季度总结" in question and "口令：***" in question
    assert "hunter2" not in question and "42" not in question and "所有者" not in question


def test_summary_labels_masks_and_hides_platform_args():
    from skillyard.agent.contract_parse import parse_contract

    contract, _ = parse_contract(BASE_CONTRACT, skill_key="k")
    tool = contract.tools["saveNote"]
    args = {"title": "T", "owner": "u-7", "secret": "s3", "extra": {"n": 1}, "lines": [{"a": 1}]}
    summary = build_summary(tool, args, {"owner": "PLATFORM"})
    assert summary.splitlines() == ["标题：T", "口令：***", "extra.n：1", "lines.0.a：1"]
