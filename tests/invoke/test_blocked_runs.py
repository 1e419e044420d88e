"""In-process handlers Python cannot stop: an async one that blocks the loop past its wall clock, a sync one whose
thread runs on. Both answer a failure with timed_out and blocked, never ok."""

from __future__ import annotations

import time

from skillyard import SkillYard

BLOCKING_ASYNC = "import time\n\nasync def execute(input, ctx):\n    time.sleep(1.2)\n    return {'done': True}\n"
SLOW_SYNC = "import time\n\ndef execute(input, ctx):\n    time.sleep(1.2)\n    return {'done': True}\n"
FRONT = "name: {name}\ndescription: d\nexec:\n  timeout: 0.3"


async def test_an_async_handler_that_blocks_the_loop_is_a_blocked_failure(make_skill, skills_root, caplog):
    make_skill("sleeper", frontmatter=FRONT.format(name="sleeper"), files={"handler.py": BLOCKING_ASYNC})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        envelope = await yard.run("sleeper", {})
    assert envelope["ok"] is False and envelope["timed_out"] is True and envelope["blocked"] is True
    assert "blocked the event loop" in envelope["error"] and "subprocess skill" in envelope["error"]
    assert "done" not in envelope
    assert any("blocked the event loop" in r.getMessage() for r in caplog.records)


async def test_a_sync_handler_past_its_wall_clock_is_said_to_be_still_running(make_skill, skills_root):
    make_skill("slow", frontmatter=FRONT.format(name="slow"), files={"handler.py": SLOW_SYNC})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        started = time.monotonic()
        envelope = await yard.run("slow", {})
        elapsed = time.monotonic() - started
    assert envelope["ok"] is False and envelope["timed_out"] is True and envelope["blocked"] is True
    assert "may still be running" in envelope["error"]
    assert elapsed < 1.0  # the run answers at its wall clock; the thread finishes on its own


async def test_a_handler_within_its_wall_clock_is_untouched(make_skill, skills_root):
    quick = "async def execute(input, ctx):\n    return {'done': True}\n"
    make_skill("quick", frontmatter=FRONT.format(name="quick"), files={"handler.py": quick})
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        assert (await yard.run("quick", {}))["done"] is True
