"""Display blocks (§6.2, outputs/display.py): ``display_md`` / ``display_only`` merged per turn, rendered on rich
channels only."""

from __future__ import annotations

import pytest

PLAIN = "async def execute(i, c):\n    return {'display_md': i['md'], 'display_only': i.get('only', False)}\n"


async def test_display_blocks_merge_per_turn(make_skill, yard_for):
    make_skill("plain", files={"handler.py": "async def execute(i, c):\n    return {'display_md': i['md']}\n"})
    make_skill(
        "only",
        files={
            "handler.py": """
        async def execute(i, c):
            return {'display_md': i['md'], 'display_only': True}
    """
        },
    )
    async with yard_for() as yard:
        web = yard.new_turn(session_id="d1", channel="web")
        await yard.run("plain", {"md": "A"}, turn=web)
        await yard.run("plain", {"md": "B"}, turn=web)
        assert web.display_md().markdown == "A\n\nB" and web.display_md().replaces_text is False
        await yard.run("only", {"md": "ONLY"}, turn=web)
        await yard.run("plain", {"md": "C"}, turn=web)
        block = web.display_md()
        assert block.markdown == "ONLY" and block.replaces_text is True
        text = yard.new_turn(session_id="d2", channel="telegram")
        await yard.run("only", {"md": "X"}, turn=text)
        assert text.display_md().markdown == "" and text.display_md().replaces_text is False


def test_display_block_unpacks():
    from skillyard.outputs.display import DisplayMerge

    merge = DisplayMerge()
    merge.add({"display_md": "X", "display_only": True})
    markdown, replaces = merge.render("web_admin")
    assert (markdown, replaces) == ("X", True)


async def test_display_merge_rules_and_channels(make_skill, yard_for):
    make_skill("plain", files={"handler.py": "async def execute(i, c):\n    return {'display_md': i['md']}\n"})
    make_skill(
        "only",
        files={"handler.py": "async def execute(i, c):\n    return {'display_md': i['md'], 'display_only': True}\n"},
    )
    async with yard_for() as yard:
        admin = yard.new_turn(session_id="dm-1", channel="web_admin")
        await yard.run("plain", {"md": "P1"}, turn=admin)
        await yard.run("only", {"md": "X1"}, turn=admin)
        await yard.run("plain", {"md": "P2"}, turn=admin)
        await yard.run("only", {"md": "X2"}, turn=admin)
        markdown, replaces = admin.display_md()
        assert replaces is True and "P1" not in markdown and "X1" in markdown and "X2" in markdown
        assert "P2" not in markdown

        web = yard.new_turn(session_id="dm-2", channel="web")
        await yard.run("plain", {"md": "A"}, turn=web)
        assert web.display_md() == ("A", False)

        text = yard.new_turn(session_id="dm-3", channel="wecom")
        await yard.run("plain", {"md": "A"}, turn=text)
        await yard.run("only", {"md": "B"}, turn=text)
        assert text.display_md().markdown == "" and text.display_md().replaces_text is False

        fresh = yard.new_turn(session_id="dm-4", channel="web")
        assert fresh.display_md() == ("", False)


async def test_plain_blocks_are_appended_in_call_order(make_skill, yard_for):
    make_skill("plain", files={"handler.py": PLAIN})
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="dm3-1", channel="web")
        for md in ("first", "second", "third"):
            await yard.run("plain", {"md": md}, turn=turn)
    markdown, replaces = turn.display_md()
    assert replaces is False
    assert markdown.index("first") < markdown.index("second") < markdown.index("third")


async def test_display_only_false_string_is_a_plain_block(make_skill, yard_for):
    """A skill returning display_only "false" (a string, as shell skills do) has not asked for replacement."""
    make_skill("plain", files={"handler.py": PLAIN})
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="dm3-2", channel="web_admin")
        await yard.run("plain", {"md": "A"}, turn=turn)
        await yard.run("plain", {"md": "B", "only": "false"}, turn=turn)
    markdown, replaces = turn.display_md()
    assert replaces is False and "A" in markdown and "B" in markdown


@pytest.mark.spec("§9.1")
async def test_call_skill_display_blocks_do_not_reach_the_turn(make_skill, yard_for):
    """§9.1: call_skill results skip the output side; the caller decides what it returns. A child's exclusive
    block must not replace the model's text of a turn whose top-level skill returned no block."""
    make_skill("plain", files={"handler.py": PLAIN})
    make_skill(
        "boss",
        files={
            "handler.py": "async def execute(i, ctx):\n"
            "    r = await ctx['call_skill']('plain', {'md': 'CHILD', 'only': True})\n"
            "    return {'ok': True, 'child_ok': r.get('ok')}\n"
        },
    )
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="dm3-3", channel="web")
        env = await yard.run("boss", turn=turn)
    assert env["child_ok"] is True
    assert turn.display_md() == ("", False)


async def test_exclusive_block_clears_plain_and_a_new_turn_starts_afresh(make_skill, yard_for):
    """The first exclusive block clears earlier plain blocks of the same turn; a later turn starts afresh."""
    make_skill("plain", files={"handler.py": PLAIN})
    async with yard_for() as yard:
        turn = yard.new_turn(session_id="dm3-4", channel="web")
        await yard.run("plain", {"md": "P"}, turn=turn)
        await yard.run("plain", {"md": "X", "only": True}, turn=turn)
        assert turn.display_md() == ("X", True)
        nxt = yard.new_turn(session_id="dm3-4", channel="web")
        await yard.run("plain", {"md": "Q"}, turn=nxt)
        assert nxt.display_md() == ("Q", False)
