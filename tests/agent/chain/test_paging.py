"""Paged reads (``paging``, chain/paging.py): a listing is recorded as complete or not; when the user asks for
everything the node cannot finish while the last read of a query is incomplete (``FINISH_INCOMPLETE_LISTING``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.agent.chain.paging import asks_for_everything, completeness
from support.agent.probes import call, codes, finish, needs_db, say
from support.agent.receipts import BYPASS, IDENTITY, DocOpsAgent, by_cursor, page, receipt, stored_evidence

INCOMPLETE = "agent_runtime.42257"
BUSINESS = "agent_runtime.40004"
FIRST = [{"id": "d-1", "title": "周报 1"}, {"id": "d-2", "title": "周报 2"}]
SECOND = [{"id": "d-3", "title": "周报 3"}]
PAGES = by_cursor(first=page(FIRST, more="c2"), c2=page(SECOND, complete=True))


@pytest.fixture
def ops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DocOpsAgent:
    monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", BYPASS)
    return DocOpsAgent(tmp_path)


@needs_db
async def test_an_all_request_cannot_finish_on_an_incomplete_listing_and_continues_after_a_restart(
    ops: DocOpsAgent,
):
    ops.answers(findDocs=[PAGES])
    script = ops.script(
        call("findDocs", {"q": "周报"}),
        finish("共有 2 篇周报"),  # refused: page 1 of 2
        say("还有更多，继续查"),
        # a new process: the same query and filters with the cursor
        call("findDocs", {"q": "周报", "cursor": "c2"}),
        finish("共有 3 篇周报"),
    )
    sid = ops.sid("all")
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        first = await agent.send(sid, "列出所有周报", identity=IDENTITY)
        [listed] = await stored_evidence(yard, first, "findDocs")
    assert codes(first) == [None, INCOMPLETE], first.as_dict()
    seen, refused = first.observations
    assert "cursor='c2'" in seen.next_step and "same query and filters" in seen.next_step
    assert seen.for_model()["next_step"] == seen.next_step  # the model reads it with the result
    assert "'c2'" in refused.content and "cursor='c2'" in refused.next_step and "'所有'" in refused.content
    assert (listed.complete, listed.next_cursor) == (False, "c2") and listed.query is not None
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.send(sid, "继续", identity=IDENTITY)
        pages = await stored_evidence(yard, done, "findDocs")
    assert done.status == "DONE", done.as_dict()
    assert [p.complete for p in pages] == [False, True] and pages[0].query == pages[1].query


@needs_db
async def test_another_query_does_not_complete_the_listing(ops: DocOpsAgent):
    """Continuing with other filters is another query: the first one's last read is still incomplete."""
    ops.answers(findDocs=[page(FIRST, more="c2"), page(SECOND, complete=True)])
    script = ops.script(
        call("findDocs", {"q": "周报"}),
        call("findDocs", {"q": "周"}),  # a looser keyword, complete
        finish("共 1 篇"),
        say("需要继续翻页"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        turn = await agent.send(ops.sid("other"), "all weekly reports please", identity=IDENTITY)
    assert codes(turn) == [None, None, INCOMPLETE], turn.as_dict()
    assert "'all'" in turn.observations[2].content


@needs_db
async def test_without_an_all_request_a_page_may_be_the_answer(ops: DocOpsAgent):
    ops.answers(findDocs=[page(FIRST, more="c2")])
    script = ops.script(call("findDocs", {"q": "周报"}), finish("前两篇是周报 1 和周报 2（还有更多）"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.send(ops.sid("some"), "找两篇周报给我看看", identity=IDENTITY)
    assert done.status == "DONE"
    assert "not the complete listing" in done.observations[0].next_step


@needs_db
async def test_a_typed_paging_error_keeps_the_partial_items(ops: DocOpsAgent):
    """The next page fails with a typed error: its items are kept as partial_success with the cursor, and the
    listing stays incomplete until the same query continues."""
    typed = {
        "contractVersion": "doc.operation.v1",
        "ok": False,
        "error": {
            "kind": "validation",
            "message": "cursor expired",
            "stage": "page",
            "details": {
                "items": SECOND,
                "status": "partial_success",
                "complete": False,
                "reason": "cursor_stalled",
                "page": 2,
                "nextCursor": "c2b",
                "count": 1,
            },
        },
    }
    ops.answers(findDocs=[by_cursor(first=page(FIRST, more="c2"), c2=typed, c2b=page([], complete=True))])
    script = ops.script(
        call("findDocs", {"q": "周报"}),
        call("findDocs", {"q": "周报", "cursor": "c2"}),
        finish("共 3 篇"),
        call("builtin_node_follow_up", {"question": "第二页出错了，要从断点继续吗？"}),
        # the answer arrives in a new process
        call("findDocs", {"q": "周报", "cursor": "c2b"}),
        finish("共 3 篇"),
    )
    ops.changed("findDocs", receipt="doc.operation.v1")
    sid = ops.sid("typed")
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        asked = await agent.send(sid, "全部周报有哪些？", identity=IDENTITY)
    assert codes(asked) == [None, BUSINESS, INCOMPLETE, None], asked.as_dict()
    assert asked.checkpoint is not None and asked.checkpoint["type"] == "FOLLOW_UP"
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        done = await agent.resume(sid, "REPLY", "继续")
        pages = await stored_evidence(yard, done, "findDocs")
    assert codes(done) == [None, None], done.as_dict()
    partial = asked.observations[1]
    assert partial.content["partial_items"] == SECOND and partial.content["nextCursor"] == "c2b"
    assert "cursor='c2b'" in partial.next_step
    assert [(p.complete, p.next_cursor) for p in pages] == [(False, "c2"), (False, "c2b"), (True, None)]
    assert pages[1].write_status == "partial_success" and pages[1].response["error"]["details"]["items"] == SECOND
    assert done.status == "DONE"


@needs_db
async def test_a_receipt_read_without_paging_is_recorded_too(ops: DocOpsAgent):
    ops.changed("findDocs", paging=None)
    ops.answers(findDocs=[receipt("success", complete=False, data={"items": FIRST, "nextCursor": "n2"})])
    script = ops.script(call("findDocs", {"q": "周报"}), finish("两篇"), say("还没列完"))
    async with SkillYard() as yard:
        agent = await yard.agent(ops.dir, model=script)
        turn = await agent.send(ops.sid("rcpt"), "把所有周报列出来", identity=IDENTITY)
        [listed] = await stored_evidence(yard, turn, "findDocs")
    assert codes(turn) == [None, INCOMPLETE] and listed.complete is False


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("列出所有周报", "所有"),
        ("全部文档", "全部"),
        ("有哪些周报", "有哪些"),
        ("List ALL reports", "ALL"),
        ("every report", "every"),
        ("the entire archive", "entire"),
        ("给我all的文档", "all"),
        ("allow me to see one", None),
        ("the overall status", None),
        ("install the tool", None),
        ("文档所有者是 Ada", None),
        ("找一篇周报", None),
    ],
)
def test_the_all_word_list(text: str, word: str | None):
    assert asks_for_everything(text) == word


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        ({"complete": True}, (True, None)),
        ({"complete": False}, (False, None)),
        ({"hasMore": True, "nextCursor": "x"}, (False, "x")),
        ({"hasMore": False}, (True, None)),
        ({"truncated": True, "stopReason": "max_pages"}, (False, None)),
        ({"stopReason": "max_items"}, (False, None)),
        ({"nextCursor": "y"}, (False, "y")),
        ({"complete": True, "hasMore": True}, (False, None)),
        ({"items": []}, (None, None)),
    ],
)
def test_completeness(node: dict, expected: tuple):
    assert completeness(node) == expected
