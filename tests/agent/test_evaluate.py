"""Resolving §9 value expressions against a running node (evaluate.py): inputs, outputs, shared, session, prior,
platform and evidence, which evidence is visible and which result decides."""

from __future__ import annotations

from skillyard.agent.evaluate import resolve
from skillyard.agent.state import Entity, OutputValue
from support.agent.kit import BUSINESS, Kit, entity_contract, finish, lookup
from support.agent.probes import call, codes, needs_db, say


@needs_db
async def test_evidence_of_a_business_failure_is_not_read(kit: Kit):
    kit.with_args(first={"from": "evidence.notes.0.id"})
    failed = {"records": [{"id": "bad-1", "title": "坏"}]}
    turn = await kit.send("x", lookup(), lookup(failed, "business"), call("probe", {}), say("stop"))
    assert codes(turn)[:2] == [None, BUSINESS]
    assert kit.probed()["first"] == "n-1"


@needs_db
async def test_evidence_of_a_failed_call_is_not_read(kit: Kit):
    kit.with_args(first={"from": "evidence.notes.0.id", "sources": ["MODEL"]})
    turn = await kit.send("x", lookup(mode="io"), call("probe", {"first": "m"}), say("stop"))
    assert codes(turn)[0] == "agent_runtime.40018"
    assert turn.observations[1].sources["first"] == "MODEL" and kit.probed()["first"] == "m"


@needs_db
async def test_a_newer_empty_result_hides_an_older_one(kit: Kit):
    kit.with_args(first={"from": "evidence.notes.0.id", "sources": ["MODEL"]})
    turn = await kit.send("x", lookup(), lookup(mode="empty"), call("probe", {"first": "m"}), say("stop"))
    assert turn.observations[2].sources["first"] == "MODEL" and kit.probed()["first"] == "m"


@needs_db
async def test_an_index_past_the_end_does_not_bind(kit: Kit):
    kit.with_args(first={"from": "evidence.notes.5.id", "sources": ["MODEL"]})
    await kit.send("x", lookup(), call("probe", {"first": "m"}), say("stop"))
    assert kit.probed()["first"] == "m"


@needs_db
async def test_an_extract_key_no_tool_declares_does_not_bind(kit: Kit):
    kit.with_args(first={"from": "evidence.records.0.id", "sources": ["MODEL"]})
    turn = await kit.send("x", lookup(), call("probe", {"first": "m"}), say("stop"))
    assert turn.observations[1].sources["first"] == "MODEL" and kit.probed()["first"] == "m"


@needs_db
async def test_evidence_of_a_finished_task_is_not_visible_in_the_next_task(kit: Kit):
    kit.with_args(first={"from": "evidence.notes.0.id", "sources": ["MODEL"]})
    first, later = await kit.talk(["找", "再来"], lookup(), finish(), call("probe", {"first": "m"}), say("stop"))
    assert first.status == "DONE", first.as_dict()
    assert later.observations[0].sources["first"] == "MODEL" and kit.probed()["first"] == "m"


@needs_db
async def test_prior_reads_attributes_display_name_and_exact_type_id(kit: Kit):
    entity_contract(
        kit,
        {"type": "note", "name": "title"},
        a={"from": "prior.note.tag"},
        b={"from": "prior.note:n-1.tag"},
        c={"from": "prior.note.displayName"},
        d={"from": "prior.note:n-1.id"},
        e={"from": "prior.note.id"},
    )
    _, later = await kit.talk(["找", "用"], lookup(), finish(), call("probe", {}), say("stop"))
    obs = later.observations[0]
    assert obs.ok, obs
    assert {k: obs.sources[k] for k in "abcde"} == dict.fromkeys("abcde", "PRIOR_TASK")
    got = kit.probed()
    # the newest entity of the type is the last one the read produced (n-2); n-1 by its exact type:id
    assert (got["a"], got["b"], got["c"], got["d"], got["e"]) == ("y", "x", "周报", "n-1", "n-2")


@needs_db
async def test_prior_with_an_unknown_attribute_or_id_does_not_bind(kit: Kit):
    entity_contract(
        kit,
        {"type": "note", "name": "title"},
        a={"from": "prior.note.colour", "sources": ["MODEL"]},
        b={"from": "prior.note:n-9.tag", "sources": ["MODEL"]},
        c={"from": "prior.memo.id", "sources": ["MODEL"]},
    )
    _, later = await kit.talk(["找", "用"], lookup(), finish(), call("probe", {"a": "m", "b": "m", "c": "m"}), say("s"))
    assert later.observations[0].sources == {"a": "MODEL", "b": "MODEL", "c": "MODEL"}
    assert {k: kit.probed()[k] for k in "abc"} == dict.fromkeys("abc", "m")


async def test_evaluate_every_prefix(build):
    h = await build()
    ctx = h.ctx
    ctx.node.inputs["title"] = "T"
    ctx.node.outputs["articleId"] = OutputValue({"id": "a-9"}, "EVIDENCE")
    ctx.task.shared["spaceId"] = "sp-1"
    ctx.session.values["lang"] = "zh"
    ctx.session.entities += [Entity("note", "n-1", "old", {"tag": "x"}), Entity("note", "n-2", "new")]
    assert resolve(ctx, "inputs.title") == (True, "T", "NODE_OUTPUT")
    assert resolve(ctx, "outputs.articleId.id") == (True, "a-9", "NODE_OUTPUT")
    assert resolve(ctx, "shared.spaceId") == (True, "sp-1", "SHARED")
    assert resolve(ctx, "session.lang") == (True, "zh", "SESSION")
    assert resolve(ctx, "prior.note.id") == (True, "n-2", "PRIOR_TASK")
    assert resolve(ctx, "prior.note:n-1.tag") == (True, "x", "PRIOR_TASK")
    assert resolve(ctx, "prior.note:n-1.displayName") == (True, "old", "PRIOR_TASK")
    assert resolve(ctx, "platform.userId") == (True, "u-7", "PLATFORM")
    assert resolve(ctx, "platform.organId") == (False, None, None)
    assert resolve(ctx, "shared.nothing") == (False, None, None)
    assert (await h.call("findNotes", {})).ok
    assert resolve(ctx, "evidence.notes.1.id") == (True, "n-2", "EVIDENCE")
    assert resolve(ctx, "evidence.notes[].id") == (True, ["n-1", "n-2"], "EVIDENCE")
    assert (await h.call("findNotes", {"mode": "none_found"})).ok  # the newest (empty) result decides
    assert resolve(ctx, "evidence.notes") == (True, [], "EVIDENCE")
    assert (await h.call("findNotes", {"mode": "business"})).code  # business failures are not read
    assert resolve(ctx, "evidence.notes") == (True, [], "EVIDENCE")


async def test_evaluate_reads_upstream_evidence_after_this_nodes(build):
    h = await build()
    assert (await h.call("findNotes", {})).ok
    h.ctx.evidence[0].node_id = "upstream"
    h.ctx.upstream_node_ids = ["upstream"]
    assert resolve(h.ctx, "evidence.notes.0.id") == (True, "n-1", "EVIDENCE")
    h.ctx.upstream_node_ids = []
    assert resolve(h.ctx, "evidence.notes.0.id") == (False, None, None)
