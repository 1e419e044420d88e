"""``skillyard agent check`` on the fixture agent tests/fixtures/agents/cms: rewriting its contract, running check."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from skillyard.cli import cli


def set_contract(cms: Path, contract: dict[str, object], tools: str = "[createArticle, queryArticle]") -> None:
    folder = cms / "skills" / "article_lifecycle"
    (folder / "contract.json").write_text(json.dumps(contract), encoding="utf-8")
    md = folder / "SKILL.md"
    text = md.read_text(encoding="utf-8").replace("tools: [createArticle, queryArticle]", f"tools: {tools}")
    md.write_text(text, encoding="utf-8")


def check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["agent", "check", *args])
    return result.exit_code, result.output
