"""Loading skill code in-process (executors/loader.py): each skill under its own package name, its own helper
modules, a new version after an edit."""

from __future__ import annotations

import sys

from skillyard import SkillYard
from support.skills import run_skill


async def test_two_skills_with_the_same_file_names_see_their_own_helpers(make_skill, skills_root):
    make_skill(
        "alpha",
        "name: alpha\ndescription: d",
        files={
            "handler.py": """
            from . import helpers
            import helpers as plain
            from helpers import WHO

            def execute(input):
                return {"rel": helpers.WHO, "plain": plain.WHO, "from": WHO, "same": helpers is plain,
                        "module": helpers.__name__}
        """,
            "helpers.py": "WHO = 'alpha'\n",
        },
    )
    make_skill(
        "beta",
        "name: beta\ndescription: d",
        files={
            "handler.py": """
            import helpers
            from . import helpers as rel
            from lib.util import shout

            def execute(input):
                return {"rel": rel.WHO, "plain": helpers.WHO, "from": shout(), "same": helpers is rel,
                        "module": helpers.__name__}
        """,
            "helpers.py": "WHO = 'beta'\n",
            "lib/__init__.py": "",
            "lib/util.py": "from helpers import WHO\n\ndef shout():\n    return WHO.upper()\n",
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        alpha = await yard.run("alpha", {})
        beta = await yard.run("beta", {})
        alpha_again = await yard.run("alpha", {})
    assert (alpha["rel"], alpha["plain"], alpha["from"], alpha["same"]) == ("alpha", "alpha", "alpha", True)
    assert (beta["rel"], beta["plain"], beta["from"], beta["same"]) == ("beta", "beta", "BETA", True)
    assert alpha_again["rel"] == "alpha"
    assert alpha["module"] != beta["module"]
    assert "helpers" not in sys.modules and "lib" not in sys.modules
    assert not any(str(skills_root) in p for p in sys.path)


async def test_rescan_picks_up_edited_code(make_skill, skills_root):
    folder = make_skill(
        "editable",
        "name: editable\ndescription: d",
        files={
            "handler.py": "from . import helpers\n\ndef execute(input):\n    return {'v': 1, 'h': helpers.H}\n",
            "helpers.py": "H = 'one'\n",
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("editable", {}))["v"] == 1
        (folder / "handler.py").write_text(
            "from . import helpers\n\ndef execute(input):\n    return {'v': 'second', 'h': helpers.H}\n"
        )
        yard.rescan()
        env = await yard.run("editable", {})
        assert (env["v"], env["h"]) == ("second", "one")
        (folder / "helpers.py").write_text("H = 'helper two'\n")
        yard.rescan()
        assert (await yard.run("editable", {}))["h"] == "helper two"


async def test_old_versions_are_dropped_on_reload(make_skill, skills_root):
    import sys

    from skillyard import SkillYard

    folder = make_skill(
        "ver",
        files={
            "handler.py": "async def execute(i, c):\n    return {'v': 1}\n",
            "lib/__init__.py": "",
            "lib/util.py": "X = 1\n",
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("ver"))["v"] == 1
        first = [n for n in sys.modules if n.startswith("skillyard_skills.ver_")]
        (folder / "handler.py").write_text(
            "from .lib import util\nasync def execute(i, c):\n    return {'v': util.X}\n"
        )
        (folder / "lib" / "util.py").write_text("X = 2\n")
        yard.rescan()
        assert (await yard.run("ver"))["v"] == 2
        (folder / "lib" / "util.py").write_text("X = 33\n")  # an edit inside a sub-package alone
        yard.rescan()
        assert (await yard.run("ver"))["v"] == 33
        assert not any(n in sys.modules for n in first)


async def test_two_skills_with_same_helper_module(make_skill, skills_root):
    """Issue: 'Each skill is loaded under its own package name, so two skills may both have `handler.py` and a skill may
    import its own helper modules (relative or sibling imports) without seeing any other skill's.'"""
    make_skill(
        "sa",
        files={
            "helpers.py": "VALUE = 'a'\n",
            "handler.py": "from helpers import VALUE\ndef execute():\n    return {'v': VALUE}\n",
        },
    )
    make_skill(
        "sb",
        files={
            "helpers.py": "VALUE = 'b'\n",
            "handler.py": "from .helpers import VALUE\ndef execute():\n    return {'v': VALUE}\n",
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        a1 = await yard.run("sa", {})
        b1 = await yard.run("sb", {})
        a2 = await yard.run("sa", {})
    assert (a1["v"], b1["v"], a2["v"]) == ("a", "b", "a")


async def test_skill_package_helper_subpackage(make_skill, skills_root):
    """Issue: 'a skill may import its own helper modules (relative or sibling imports)'."""
    make_skill(
        "pk",
        files={
            "lib/__init__.py": "",
            "lib/util.py": "X = 42\n",
            "handler.py": "from lib.util import X\nasync def execute(i, c):\n    return {'x': X}\n",
        },
    )
    make_skill(
        "pk2",
        files={
            "lib/__init__.py": "",
            "lib/util.py": "X = 7\n",
            "handler.py": "from .lib.util import X\nasync def execute(i, c):\n    return {'x': X}\n",
        },
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("pk", {}))["x"] == 42
        assert (await yard.run("pk2", {}))["x"] == 7


async def test_skill_folder_not_on_sys_path(make_skill, skills_root):
    """docs/authoring.md: 'Code is imported per skill, under its own package name; the skill folder is never put on
    `sys.path`.'"""
    folder = make_skill("sp", files={"handler.py": "import sys\ndef execute():\n    return {'path': sys.path}\n"})
    env = await run_skill(skills_root, "sp")
    assert str(folder) not in env["path"]
    assert str(folder) not in sys.path


async def test_edited_handler_picked_up_after_rescan(make_skill, skills_root):
    """docs/authoring.md: 'A module is imported once per version of the folder's files: an edit takes effect after a
    rescan'."""
    folder = make_skill("ed", files={"handler.py": "def execute():\n    return {'v': 1}\n"})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("ed", {}))["v"] == 1
        (folder / "handler.py").write_text("def execute():\n    return {'v': 22222}\n")
        yard.rescan()
        assert (await yard.run("ed", {}))["v"] == 22222
