"""The skill roots the CLI tests run against: ``hello`` (a greeter with an alias and a credential parameter),
``cli_root`` (hello, failer, raiser), ``root`` (the probe skills of support.cli_probes, and a noisy shell skill)
and ``state_root`` (two roots holding every STATE ``skillyard list`` shows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli_probes import BOOM, DBUSER, FANOUT, FANOUT_FM, GREET, GREET_SCHEMA, LEAKY, LEAKY_SCHEMA
from support.skills import SCHEMA_WHO, write_skill

HELLO = "async def execute(input, ctx):\n    return {'greeting': 'hello ' + input['who'], 'ws': ctx['workspace_dir']}\n"

SCHEMA = json.dumps(
    {
        "type": "object",
        "properties": {"who": {"type": "string"}, "api_key": {"type": "string"}},
        "required": ["who"],
    }
)


@pytest.fixture
def hello(make_skill):
    return make_skill(
        "hello",
        frontmatter="name: hello\ndescription: Greets\naliases: [hi]",
        files={"handler.py": HELLO, "schema.json": SCHEMA},
    )


@pytest.fixture
def cli_root(make_skill, skills_root):
    make_skill(
        "hello",
        frontmatter="name: hello\ndescription: Greets\naliases: [hi]",
        files={
            "handler.py": "async def execute(i, c):\n    return {'greeting': 'hello ' + i['who']}\n",
            "schema.json": json.dumps(SCHEMA_WHO),
        },
    )
    make_skill(
        "failer",
        files={
            "handler.py": "async def execute(i, c):\n    return {'ok': False, 'error': 'it failed', 'error_type': 'recoverable'}\n"  # noqa: E501 (a skill file's text)
        },
    )
    make_skill("raiser", files={"handler.py": "async def execute(i, c):\n    raise ValueError('kaput')\n"})
    return skills_root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A skill root with the probe skills."""
    base = tmp_path / "root"
    base.mkdir()
    write_skill(
        base,
        "greet",
        "name: greet\ndescription: Greets someone\naliases: [hey]\ncategory: people",
        files={"handler.py": GREET, "schema.json": GREET_SCHEMA},
    )
    write_skill(base, "notes", FANOUT_FM, files={"handler.py": FANOUT})
    write_skill(base, "boom", "name: boom\ndescription: Always raises", files={"handler.py": BOOM})
    write_skill(
        base,
        "leaky",
        "name: leaky\ndescription: Echoes its token",
        files={"handler.py": LEAKY, "schema.json": LEAKY_SCHEMA},
    )
    write_skill(base, "dbuser", "name: dbuser\ndescription: Uses the database", files={"handler.py": DBUSER})
    write_skill(
        base,
        "noisy",
        "name: noisy\ndescription: Writes to stderr\nexec:\n  config: run.sh",
        files={"run.sh": 'echo "NOISY_STDERR_MARK" >&2\necho \'{"ok": true, "said": "yes"}\'\n'},
    )
    return base


@pytest.fixture
def state_root(tmp_path: Path) -> tuple[Path, Path]:
    """Two roots exercising every list STATE: error, shadowed, ok, gated (requirements, knowledge)."""
    first, second = tmp_path / "r1", tmp_path / "r2"
    write_skill(first, "dup", "name: dup\ndescription: first copy")
    write_skill(second, "dup", "name: dup\ndescription: second copy")
    (first / "broken").mkdir(parents=True)
    (first / "broken" / "SKILL.md").write_text("---\nname: broken\ndescription: [unterminated\n", encoding="utf-8")
    write_skill(
        first,
        "gated",
        "name: gated\ndescription: g\n"
        "metadata: {openclaw: {requires: {env: [CLI_PROBE_NEED_ME], bins: [no_such_bin_zz]}}}",
        files={"handler.py": "async def execute(i):\n    return {}\n"},
    )
    write_skill(first, "know", "name: know\ndescription: k\nskill_type: knowledge")
    write_skill(first, "longdesc", "name: longdesc\ndescription: " + "abcdefghij" * 10)
    write_skill(first, "nodesc", "name: nodesc", body="First body line here\n")
    return first, second
