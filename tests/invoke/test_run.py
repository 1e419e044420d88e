"""invoke/run.py: the session-id rule matches the whole id (a final newline is no safe name)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from skillyard.cli import cli
from skillyard.errors import InvalidInput
from skillyard.invoke.run import check_session_id


@pytest.mark.parametrize("session", ["victim\n", "victim\r\n", "a\nb", "\nvictim", "", ".", "..", "a/b", "x" * 129])
def test_an_unsafe_session_id_is_refused(session):
    with pytest.raises(InvalidInput, match="is not a safe name"):
        check_session_id(session)


@pytest.mark.parametrize("session", ["victim", "s-1.2_x", "A" * 128])
def test_a_safe_session_id_is_kept(session):
    assert check_session_id(session) == session


def test_the_cli_refuses_a_session_id_ending_in_a_newline(home):
    result = CliRunner().invoke(cli, ["run", "hello", "--session", "victim\n"])
    assert result.exit_code == 2 and "is not a safe name" in result.stderr
    assert not (home / "workspaces" / "victim\n").exists()
