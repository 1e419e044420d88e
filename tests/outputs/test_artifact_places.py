"""Only files of the run's workspace become artifacts; a skill's own bundled file is copied in first."""

from __future__ import annotations

import json

from skillyard import SkillYard

RETURNS = """
import json, os
async def execute(input, ctx):
    return json.loads(input["result"].replace("SKILL_DIR", os.path.dirname(__file__)))
"""


async def test_secrets_and_system_files_are_never_registered(make_skill, skills_root, db_env, home):
    make_skill("leaky", files={"handler.py": RETURNS})
    key = home / "keys" / "other.key"  # a file under SKILLYARD_HOME (not the real key file: the run needs that)
    key.parent.mkdir()
    key.write_text("k", encoding="utf-8")
    result = {"ok": True, "local_path": str(key), "files": ["/etc/passwd"]}
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        envelope = await yard.run("leaky", {"result": json.dumps(result)}, context={"session_id": "s-leak"})
        listed = await yard.attachments.for_session("s-leak")
    assert "ref" not in envelope and "ref" not in envelope["files"][0]
    assert sum("outside the session's workspace" in w for w in envelope["warnings"]) == 2
    assert listed == []


async def test_a_file_of_the_skills_own_folder_is_copied_into_the_workspace(make_skill, skills_root, db_env, home):
    folder = make_skill("bundled", files={"handler.py": RETURNS, "assets/template.docx": "TEMPLATE"})
    result = {"ok": True, "files": [{"local_path": "SKILL_DIR/assets/template.docx"}]}
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        first = await yard.run("bundled", {"result": json.dumps(result)}, context={"session_id": "s-copy"})
        second = await yard.run("bundled", {"result": json.dumps(result)}, context={"session_id": "s-copy"})
        listed = await yard.attachments.for_session("s-copy")
    copy = home / "workspaces" / "s-copy" / "template.docx"
    assert first["files"][0]["ref"] == "file_1" and first["files"][0]["local_path"] == str(copy)
    assert copy.read_text(encoding="utf-8") == "TEMPLATE" and (folder / "assets" / "template.docx").exists()
    assert second["files"][0]["ref"] == "file_1"  # the identical copy is reused, not copied again
    assert [a.local_path for a in listed] == [str(copy)]
