"""External events (orchestration P1): builtin_node_wait_event suspends at EVENT; yard.agent_event (and `skillyard agent
event`) resumes the org's waiting nodes as queued jobs; an event for nobody is kept for a later wait; a deadline
resumes with EVENT_TIMEOUT. The payload is evidence of ``event:<NAME>`` with its own source type, EVENT."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest

from skillyard import SkillYard
from skillyard.agent.runner import AgentError, resume_session
from skillyard.agent.store import AgentStore
from support.agent.notes import IDENTITY, NotesAgent, copy_contract
from support.agent.probes import call, codes, finish, needs_db, say, skillyard_cli

pytestmark = needs_db


def with_events(env: NotesAgent) -> None:
    """lookupOwner's q may come from an event only; order.paid's payment extract feeds evidence.payment."""
    contract = copy_contract()
    contract["events"] = {"order.paid": {"label": "付款回调", "extracts": [{"key": "payment", "path": "payment"}]}}
    contract["tools"]["lookupOwner"]["args"]["q"] = {"sources": ["EVENT"], "required": False}
    env.contract(contract)


def key() -> str:
    return f"SO-{uuid.uuid4().hex[:8]}"  # the database outlives the test: every test correlates its own orders


def wait(order: str, seconds: float | None = None) -> dict:
    arguments: dict = {"event": "order.paid", "correlationKey": order}
    if seconds is not None:
        arguments["timeoutSeconds"] = seconds
    return call("builtin_node_wait_event", arguments)


PAYMENT = {"payment": {"id": "PAY-77", "amount": 12}}


async def test_an_event_after_the_wait_resumes_the_node_across_a_restart(notes_agent: NotesAgent):
    with_events(notes_agent)
    order, sid = key(), notes_agent.sid("after")
    script = notes_agent.script(
        wait(order, 600),
        call("lookupOwner", {"q": "PAY-99"}),  # not in the payload: refused
        call("lookupOwner", {"q": "PAY-77"}),
        finish("付款已到"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        waiting = await agent.send(sid, "等付款", identity=IDENTITY)
    assert waiting.status == "SUSPENDED" and waiting.checkpoint is not None
    checkpoint = waiting.checkpoint
    assert checkpoint["type"] == "EVENT" and checkpoint["event"] == "order.paid" and checkpoint["key"] == order
    assert checkpoint["deadline"].endswith("+00:00") and "付款回调" in checkpoint["question"]
    async with SkillYard() as yard:  # the callback reaches another process
        delivery = await yard.agent_event("order.paid", order, PAYMENT, org_id="7", wait=True)
    assert delivery["stored"] is False and len(delivery["deliveries"]) == 1
    assert delivery["deliveries"][0]["session_id"] == sid and delivery["deliveries"][0]["status"] == "DONE"
    async with SkillYard() as yard:
        store = AgentStore(yard.database)
        task = await store.load_task(waiting.task_id or "")
        evidence = await store.load_evidence(waiting.task_id or "")
    assert task is not None and task.status.value == "DONE"
    event = next(e for e in evidence if e.tool == "event:order.paid")
    assert event.response == PAYMENT and event.extracts == {"payment": PAYMENT["payment"]}
    lookups = [e for e in evidence if e.tool == "lookupOwner"]
    assert len(lookups) == 1 and lookups[0].args == {"q": "PAY-77"}  # PAY-99 never ran
    assert [c["input"] for c in notes_agent.calls("lookupOwner")] == [{"q": "PAY-77"}]


async def test_an_event_before_the_wait_is_kept_and_taken_at_once(notes_agent: NotesAgent):
    with_events(notes_agent)
    order = key()
    async with SkillYard() as yard:
        early = await yard.agent_event("order.paid", order, PAYMENT, org_id="7")
    assert early["stored"] is True and early["deliveries"] == []
    script = notes_agent.script(wait(order), call("lookupOwner", {"q": "PAY-77"}), finish("付款已到"))
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        turn = await agent.send(notes_agent.sid("before"), "等付款", identity=IDENTITY)
        again = await yard.agent_event("order.paid", order, PAYMENT, org_id="7")
    assert turn.status == "DONE", turn.as_dict()
    assert turn.observations[0].ok and turn.observations[0].content == PAYMENT and turn.observations[0].evidence_id
    assert turn.observations[1].sources["q"] == "EVENT"
    assert again["stored"] is True  # the first event was claimed; nobody waits now, so the second is kept


async def test_events_are_scoped_by_org_and_go_to_every_waiter(notes_agent: NotesAgent):
    with_events(notes_agent)
    order = key()
    async with SkillYard() as yard:
        for name in ("w1", "w2"):
            agent = await yard.agent(notes_agent.dir, model=notes_agent.script(wait(order), finish("到了")))
            turn = await agent.send(notes_agent.sid(name), "等付款", identity=IDENTITY)
            assert turn.checkpoint and turn.checkpoint["type"] == "EVENT"
        elsewhere = await yard.agent_event("order.paid", order, PAYMENT, org_id="8", wait=True)
        assert elsewhere["stored"] is True  # org 8 has no waiter; org 7's nodes keep waiting
        both = await yard.agent_event("order.paid", order, PAYMENT, org_id="7", wait=True)
    assert sorted(d["session_id"] for d in both["deliveries"]) == sorted(notes_agent.sid(n) for n in ("w1", "w2"))
    assert {d["status"] for d in both["deliveries"]} == {"DONE"}


async def test_a_deadline_resumes_the_node_with_event_timeout(notes_agent: NotesAgent):
    """The timeout job on the waiting host's queue fires at the deadline (procrastinate polls scheduled jobs)."""
    with_events(notes_agent)
    sid = notes_agent.sid("timeout")
    script = notes_agent.script(wait(key(), 0.5), call("builtin_node_fail", {"reason": "没等到付款"}))
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        turn = await agent.send(sid, "等付款", identity=IDENTITY)
        assert turn.status == "SUSPENDED"
        store = AgentStore(yard.database)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # bounded: the worker polls scheduled jobs every few seconds
            task = await store.load_task(turn.task_id or "")
            if task is not None and task.status.value != "SUSPENDED":
                break
            await asyncio.sleep(0.2)
        nodes = await store.load_nodes(turn.task_id or "")
    assert task is not None and task.status.value == "FAILED"
    timeout = [m for m in nodes[0].messages if m["role"] == "user" and "agent_runtime.42259" in m["content"]]
    assert len(timeout) == 1  # the model read the timeout, then failed the node
    assert nodes[0].reply == "没等到付款"


async def test_a_message_after_the_deadline_times_the_wait_out_at_once(notes_agent: NotesAgent):
    """Without a worker alive at the deadline, the next touch of the session settles the wait."""
    with_events(notes_agent)
    order, sid = key(), notes_agent.sid("lazy")
    script = notes_agent.script(wait(order, 600), say("付款超时了"))  # waiting costs no model step
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        await agent.send(sid, "等付款", identity=IDENTITY)
        before = await agent.send(sid, "到了吗？", identity=IDENTITY)
        assert before.status == "SUSPENDED" and "仍在等待" in (before.reply or "")
        store = AgentStore(yard.database)
        session = await store.load_session(sid)
        assert session is not None and session.node_id
        node = await store.load_node(session.node_id)
        assert node is not None and node.checkpoint is not None
        node.checkpoint.deadline = time.time() - 1  # the deadline has passed
        await store.save_node(node)
        after = await agent.send(sid, "到了吗？", identity=IDENTITY)
        late = await yard.agent_event("order.paid", order, PAYMENT, org_id="7")
    assert after.status == "RUNNING" and codes(after) == ["agent_runtime.42259"]
    assert after.observations[0].tool == "event:order.paid" and after.reply == "付款超时了"
    assert late["stored"] is True  # the wait is over: the late callback waits for nobody


async def test_cancel_ends_the_wait(notes_agent: NotesAgent):
    with_events(notes_agent)
    order, sid = key(), notes_agent.sid("cancel")
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=notes_agent.script(wait(order)))
        await agent.send(sid, "等付款", identity=IDENTITY)
        with pytest.raises(AgentError, match="waits for an external event"):
            await agent.resume(sid, "CONFIRM")
        cancelled = await agent.resume(sid, "CANCEL")
        later = await yard.agent_event("order.paid", order, PAYMENT, org_id="7")
    assert cancelled.status == "CANCELLED" and later["stored"] is True


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"event": "no spaces allowed", "correlationKey": "k"}, "event name"),
        ({"event": "order.paid", "correlationKey": ""}, "correlation key"),
        ({"event": "order.paid", "correlationKey": "k", "timeoutSeconds": -1}, "timeoutSeconds"),
        ({"event": "order.paid", "correlationKey": "k", "timeoutSeconds": 10**9}, "timeoutSeconds"),
    ],
)
async def test_a_malformed_wait_is_refused(notes_agent: NotesAgent, arguments: dict, needle: str):
    script = notes_agent.script(call("builtin_node_wait_event", arguments), say("?"))
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=script)
        turn = await agent.send(notes_agent.sid("badwait"), "等", identity=IDENTITY)
    assert codes(turn) == ["agent_runtime.40032"] and needle in str(turn.observations[0].content)
    assert turn.status == "RUNNING"


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"name": "bad name", "key": "k", "payload": {}}, "event name"),
        ({"name": "e", "key": "", "payload": {}}, "correlation key"),
        ({"name": "e", "key": "k", "payload": [1]}, "JSON object"),
        ({"name": "e", "key": "k", "payload": {"x": "\x00"}}, "NUL"),
        ({"name": "e", "key": "k", "payload": {"x": "y" * 300_000}}, "at most"),
    ],
)
async def test_a_malformed_event_is_refused_before_anything_is_stored(kwargs: dict, needle: str):
    from skillyard.agent.events import EventError

    async with SkillYard() as yard:
        with pytest.raises(EventError, match=needle):
            await yard.agent_event(kwargs["name"], kwargs["key"], kwargs["payload"], org_id="7")


async def test_the_cli_delivers_an_event_and_prints_where_each_session_stands(notes_agent: NotesAgent):
    with_events(notes_agent)
    order, sid = key(), notes_agent.sid("cli")
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=notes_agent.script(wait(order), finish("到了")))
        await agent.send(sid, "等付款", identity=IDENTITY)
    shown = skillyard_cli("agent", "event", "--org", "7", "--event", "order.paid", "--key", order,
                          "--payload", json.dumps(PAYMENT))  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert sid in shown.stdout and "DONE" in shown.stdout
    kept = skillyard_cli("agent", "event", "--org", "7", "--event", "order.paid", "--key", order, "--json")
    assert kept.returncode == 0 and json.loads(kept.stdout)["stored"] is True
    bad = skillyard_cli("agent", "event", "--org", "7", "--event", "order.paid", "--key", order, "--payload", "[1]")
    assert bad.returncode == 2 and "--payload" in bad.stderr
    name = skillyard_cli("agent", "event", "--org", "7", "--event", "no spaces", "--key", order)
    assert name.returncode == 2 and "event name 'no spaces' is not valid" in name.stderr


async def test_a_detached_event_is_resumed_by_a_worker(notes_agent: NotesAgent):
    with_events(notes_agent)
    order, sid = key(), notes_agent.sid("detach")
    async with SkillYard() as yard:
        agent = await yard.agent(notes_agent.dir, model=notes_agent.script(wait(order), finish("到了")))
        await agent.send(sid, "等付款", identity=IDENTITY)
        queued = await yard.agent_event("order.paid", order, PAYMENT, org_id="7", detach=True)
        assert queued["deliveries"][0].get("status") is None  # queued for a worker, not run here
        async with yard.chains() as engine:
            worker = asyncio.create_task(engine.serve(["skillyard"], 1, "test-worker"))
            try:
                done = await _until_not_suspended(yard, sid)
            finally:
                worker.cancel()
                await asyncio.gather(worker, return_exceptions=True)
    assert done == "DONE"
    async with SkillYard() as yard:
        with pytest.raises(AgentError, match="no open node"):
            await resume_session(yard, sid, "CANCEL")


async def _until_not_suspended(yard: SkillYard, session_id: str) -> str:
    store = AgentStore(yard.database)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        session = await store.load_session(session_id)
        if session is not None and session.node_id is None:
            return "DONE"
        await asyncio.sleep(0.2)
    return "SUSPENDED"
