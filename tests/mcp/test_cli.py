"""``skillyard mcp serve``'s option checks: each refusal names the problem and the fix (exit 2)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from skillyard.cli import cli


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--no-auth"], "--no-auth is for --transport http"),
        (["--transport", "http", "--no-auth", "--host", "0.0.0.0"], "serves only a loopback address"),
        (["--transport", "http", "--context", "{}"], "--context goes with --no-auth only"),
        (["--context", "[1]"], "must be a JSON object"),
        (["--context", "{bad"], "is not valid JSON"),
    ],
)
def test_bad_options_are_usage_errors_naming_the_fix(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["mcp", "serve", *args])
    assert result.exit_code == 2
    assert message in result.output
