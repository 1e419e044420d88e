"""BROWSER and MCP (executors/unsupported.py) answer a clear "not supported yet" failure."""

from __future__ import annotations

import pytest

from support.skills import run_skill


@pytest.mark.parametrize("exec_type", ["BROWSER", "MCP"])
async def test_browser_and_mcp_answer_not_supported_yet(make_skill, skills_root, exec_type):
    make_skill("later", f"name: later\ndescription: d\nexec: {{primary: {{type: {exec_type}}}}}")
    env = await run_skill(skills_root, "later", {"url": "https://example.org"})
    assert env["ok"] is False
    assert f"exec type {exec_type} is not supported yet" in env["error"]
    assert env["error_type"] == "config" and env["non_retriable"] is True


@pytest.mark.parametrize("t", ["BROWSER", "MCP"])
async def test_browser_mcp_not_supported(make_skill, skills_root, t):
    """Issue: 'BROWSER and MCP answer a clear "not supported yet" failure envelope.'"""
    make_skill("bm", frontmatter=f"name: bm\ndescription: d\nexec:\n  primary:\n    type: {t}")
    env = await run_skill(skills_root, "bm")
    assert env["ok"] is False and "not supported" in env["error"]
