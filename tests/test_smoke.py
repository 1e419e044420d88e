"""A first end-to-end run through the whole pipeline."""

from skillyard import SkillYard


async def test_inprocess_run(make_skill, skills_root):
    make_skill(
        "hello",
        files={
            "handler.py": """
        async def execute(input, ctx):
            return {"greeting": f"hello {input['who']}"}
    """
        },
    )
    async with SkillYard(skills_dirs=[skills_root]) as yard:
        env = await yard.run("hello", {"who": "Ada"})
    assert env == {"greeting": "hello Ada", "ok": True, "success": True}
