"""BROWSER (executors/unsupported.py) answers a clear "not supported yet" failure."""

from __future__ import annotations

from support.skills import run_skill


async def test_browser_answers_not_supported_yet(make_skill, skills_root):
    make_skill("later", "name: later\ndescription: d\nexec: {primary: {type: BROWSER}}")
    env = await run_skill(skills_root, "later", {"url": "https://example.org"})
    assert env["ok"] is False
    assert "exec type BROWSER is not supported yet" in env["error"]
    assert env["error_type"] == "config" and env["non_retriable"] is True
