"""Skill roots the core probes share, as fixtures (shared by every test folder through the root conftest).

* ``echo_root``: echo (alias parrot), ret, dump, caller and notes (fanned out into add and list);
* ``dump_skill``: dump, a skill answering its whole runtime_context, with each value's type (CTX_DUMP);
* ``chain_root``: a caller and a callee for call_skill;
* ``probe_cli``: a Python CLI skill that reports its argv, environment and working folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.skills import CALLER, CTX_DUMP, ECHO, PROBE_CLI, RET


@pytest.fixture
def echo_root(make_skill, skills_root: Path) -> Path:
    make_skill("echo", frontmatter="name: echo\ndescription: Echo\naliases: [parrot]", files={"handler.py": ECHO})
    make_skill("ret", files={"handler.py": RET})
    make_skill("dump", files={"handler.py": CTX_DUMP})
    make_skill("caller", files={"handler.py": CALLER})
    make_skill(
        "notes",
        frontmatter="""
        name: notes
        description: Notes
        cli_commands:
          add:
            properties: {text: {type: string}}
            required: [text]
          list: {}
        """,
        files={"handler.py": ECHO},
    )
    return skills_root


@pytest.fixture
def probe_cli(make_skill):
    return make_skill(
        "probe",
        frontmatter="name: probe\ndescription: d\nexec:\n  config: probe.py\nmetadata:\n  openclaw:\n    primaryEnv: PROBE_PRIMARY\n    requires:\n      env: [PROBE_DECLARED]",  # noqa: E501 (a skill file's text)
        files={"probe.py": PROBE_CLI},
    )


@pytest.fixture
def dump_skill(make_skill, skills_root):
    make_skill("dump", files={"handler.py": CTX_DUMP})
    return skills_root


@pytest.fixture
def chain_root(make_skill, skills_root):
    make_skill("callee", files={"handler.py": CTX_DUMP})
    make_skill("caller", files={"handler.py": CALLER})
    return skills_root
