"""Review probes, round 4, for issue 5: binding, expressions, evidence/entities, outputs and the data builtins.

Written black-box from the issue text (`issues show 5`, its "Decisions where the spec is ambiguous" list is
binding), the contract spec (skill-contract-spec.md §5.2–§5.5 argument binding and provenance, §6.3 extracts /
counts / entities, §8 outputs, §9 expressions, §11 platform fields, §12 data builtins, §16.2 prefixes) and the
documented interfaces in docs/agents.md, docs/cli.md and docs/agent-models.md. The platform's source was not read
to decide what is right. Areas the earlier rounds (tests/test_agent_conformance*.py) covered are left out.

Real parts only: in-process business skills that log every real execution, real PostgreSQL (``db_env``), the
scripted model (wrapped only to copy evidence ids from observations, as a real model would).
"""

from __future__ import annotations

import json
import re
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.agent_probes import call, codes, say, write_files
from skillyard import SkillYard
from skillyard.agent.models import ModelReply, ScriptedModel, ToolCall
from skillyard.agent.store import AgentStore
from skillyard.agent.turn import TurnResult

pytestmark = pytest.mark.usefixtures("db_env")

IDENTITY = {"user_id": "42", "org_id": "7", "actor_name": "Ada"}
REJECTED = "agent_runtime.40025"
ASK_USER = "agent_runtime.40024"
FAIL = "agent_runtime.40022"
SOURCE_REJECT = "agent_runtime.42223"
PLATFORM_FORBIDDEN = "agent_runtime.42236"
STATE_RESERVED = "agent_runtime.40028"
EVIDENCE_PATH_INVALID = "agent_runtime.42235"
FINISH_OUTPUT_MISSING = "agent_runtime.42252"
FINISH_NEED_BUSINESS = "agent_runtime.42255"
BUSINESS = "agent_runtime.40004"  # TOOL_BUSINESS_FAILED: lookup has no error spec

HANDLER = """
import json, pathlib

LOG = pathlib.Path({log!r})
NAME = {name!r}


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input}}, ensure_ascii=False) + "\\n")
    mode = input.get("mode", "ok")
    if mode == "io":
        raise OSError("disk gone")
    if mode == "business":
        return {{"ok": False, "code": "E1", "data": input.get("respond", {{"records": [{{"id": "bad-1"}}]}})}}
    if mode == "empty":
        return {{"code": 200, "data": {{"records": []}}}}
    if "respond" in input:
        return {{"code": 200, "data": input["respond"]}}
    return {default}
"""

RECORDS = [{"id": "n-1", "title": "季度总结", "tag": "x"}, {"id": "n-2", "title": "周报", "tag": "y"}]
DEFAULTS = {
    "lookup": '{"code": 200, "data": {"records": ' + json.dumps(RECORDS, ensure_ascii=False) + "}}",
    "probe": '{"code": 200, "echo": input}',
}
SCHEMAS = {
    "lookup": {"type": "object", "properties": {"q": {}, "mode": {}, "respond": {}}},
    "probe": {"type": "object"},
}

FREE = {"sources": ["MODEL"], "required": False}
OK200 = {"path": "code", "op": "EQ", "value": 200}


def base_contract() -> dict[str, Any]:
    return {
        "tools": {
            "lookup": {
                "label": "正在查找",
                "args": {"q": FREE, "mode": FREE, "respond": FREE},
                "success": OK200,
                "extracts": [{"key": "notes", "path": "data.records", "fields": ["id", "title"]}],
            },
            "probe": {"label": "正在探测", "args": {"mode": FREE}, "success": OK200},
        }
    }


class Kit:
    """An agent folder with one contract skill (``probe.kit``) over two logging business skills: ``lookup`` (a
    query whose result the model may choose with ``respond``) and ``probe`` (echoes its bound input)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "calls.jsonl"
        self.dir = root / "kit_agent"
        self.uid = uuid.uuid4().hex[:10]
        self.scripts = 0
        skills = self.dir / "skills"
        self.skill = skills / "kit"
        files = {
            self.dir / "AGENT.md": "---\nagent_code: kit\nagent_name: Probe kit\nskills: [probe.kit]\n---\n"
            "# Identity\nA probe agent.\n# Mission\nProbe the runtime.\n",
            self.skill / "SKILL.md": "---\nname: kit\nskill_key: probe.kit\ndescription: Probes.\n"
            "tools: [lookup, probe]\n---\nThe kit manual.\n",
        }
        for name, default in DEFAULTS.items():
            folder = skills / name
            files[folder / "SKILL.md"] = f"---\nname: {name}\ndescription: tool {name}\nexec: {{timeout: 20}}\n---\n"
            files[folder / "handler.py"] = textwrap.dedent(HANDLER).format(
                log=str(self.log), name=name, default=default
            )
            files[folder / "schema.json"] = json.dumps(SCHEMAS[name])
        write_files(files)
        self.contract(base_contract())

    def contract(self, contract: dict[str, Any]) -> None:
        (self.skill / "contract.json").write_text(json.dumps(contract, ensure_ascii=False), encoding="utf-8")

    def with_args(self, outputs: dict[str, Any] | None = None, **args: Any) -> dict[str, Any]:
        """The base contract with these ``probe`` argument contracts (and outputs); written and returned."""
        contract = base_contract()
        contract["tools"]["probe"]["args"].update(args)
        if outputs is not None:
            contract["outputs"] = outputs
        self.contract(contract)
        return contract

    def sid(self, name: str) -> str:
        return f"{name}-{self.uid}"

    def model(self, *turns: dict[str, Any]) -> EvScript:
        self.scripts += 1
        path = self.root / f"turns{self.scripts}.yaml"
        path.write_text(yaml.safe_dump({"turns": list(turns)}, allow_unicode=True), encoding="utf-8")
        return EvScript(path)

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(x) for x in self.log.read_text(encoding="utf-8").splitlines()]
        return [r for r in rows if tool is None or r["tool"] == tool]

    def probed(self, index: int = 0) -> dict[str, Any]:
        return self.calls("probe")[index]["input"]

    async def talk(
        self, messages: list[str], *turns: dict[str, Any], session: str = "s", identity: dict | None = None
    ) -> list[TurnResult]:
        """One agent; each message is one ``send`` in the same session; the turns are one script."""
        model = self.model(*turns)
        out = []
        async with SkillYard() as yard:
            agent = await yard.agent(self.dir, model=model)
            for message in messages:
                out.append(await agent.send(self.sid(session), message, identity=identity or IDENTITY))
        return out

    async def send(self, message: str, *turns: dict[str, Any], session: str = "s") -> TurnResult:
        return (await self.talk([message], *turns, session=session))[0]

    async def session(self, session: str = "s") -> Any:
        async with SkillYard() as yard:
            return await AgentStore(yard.database).load_session(self.sid(session))


class EvScript:
    """The scripted model; ``$EV`` in a call's arguments becomes the newest evidence id the model has seen in a tool
    message (a result, or the list of visible ids in a refusal), ``$EV1`` the first one ever seen (kept across
    tasks: the model remembers what it read)."""

    def __init__(self, path: Path) -> None:
        self.inner = ScriptedModel(str(path))
        self.ids: list[str] = []

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], state: dict[str, Any]):
        reply = await self.inner.complete(messages, tools, state)
        for m in messages:
            if m.get("role") == "tool":
                for ev in re.findall(r"\bev_[0-9a-f]+", str(m.get("content", ""))):
                    if ev not in self.ids:
                        self.ids.append(ev)
        if not self.ids:
            return reply

        def fix(text: str) -> str:
            return text.replace("$EV1", self.ids[0]).replace("$EV", self.ids[-1])

        return ModelReply(reply.text, tuple(ToolCall(c.id, c.name, fix(c.arguments)) for c in reply.tool_calls))


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    return Kit(tmp_path)


def finish(text: str = "好了") -> dict[str, Any]:
    return call("builtin_node_finish", {"output": text})


def put(key: str, value: Any, source: str = "USER", ref: str = "msg", path: str | None = None) -> dict[str, Any]:
    arguments = {"key": key, "value": value, "sourceType": source, "sourceRef": ref}
    if path is not None:
        arguments["sourcePath"] = path
    return call("builtin_output_set", arguments)


SHARE = {"required": False, "share": "SESSION"}


# =====================================================================================================================
# §5.2 / §5.3 step 1: from and const binding
# =====================================================================================================================


async def test_from_platform_overrides_the_model_value_and_records_platform(kit: Kit):
    kit.with_args(org={"from": "platform.organId"})
    turn = await kit.send("x", call("probe", {"org": "999"}), say("stop"))
    obs = turn.observations[0]
    assert obs.ok and obs.sources["org"] == "PLATFORM", obs
    assert kit.probed()["org"] == "7"


async def test_from_into_a_nested_path_creates_the_object(kit: Kit):
    kit.with_args(**{"orderInfo.taxNo": {"from": "platform.userId"}})
    turn = await kit.send("x", call("probe", {}), say("stop"))
    assert turn.observations[0].ok, turn.observations[0]
    assert kit.probed()["orderInfo"] == {"taxNo": "42"}


async def test_from_into_a_nested_path_keeps_the_sibling_fields(kit: Kit):
    kit.with_args(**{"orderInfo.taxNo": {"from": "platform.userId"}})
    await kit.send("x", call("probe", {"orderInfo": {"taxNo": "T-1", "amount": 3}}), say("stop"))
    assert kit.probed()["orderInfo"] == {"taxNo": "42", "amount": 3}


async def test_from_that_finds_nothing_keeps_the_model_value_as_model_when_model_is_allowed(kit: Kit):
    kit.with_args(org={"from": "platform.organName", "sources": ["MODEL"]})
    turn = await kit.send("x", call("probe", {"org": "ACME"}), say("stop"))
    obs = turn.observations[0]
    assert obs.ok and obs.sources["org"] == "MODEL", obs
    assert kit.probed()["org"] == "ACME"


async def test_from_that_finds_nothing_rejects_the_model_value_without_model_in_sources(kit: Kit):
    """§5.3 step 3: with from, an unbound value came from the model; step 4: no USER in sources → rejected."""
    kit.with_args(org={"from": "platform.organName"})
    turn = await kit.send("x", call("probe", {"org": "ACME"}), say("stop"))
    assert codes(turn)[0] == REJECTED and kit.calls("probe") == []


async def test_from_with_user_source_asks_again_even_when_the_user_said_the_value(kit: Kit):
    """§5.3 note: from + sources [USER] asks again and again when the binding fails — the value counts as MODEL
    (step 3 does not consult sources when from/const are configured)."""
    kit.with_args(org={"from": "platform.organName", "sources": ["USER"]})
    turn = await kit.send("我们机构是 ACME 公司", call("probe", {"org": "ACME"}), say("stop"))
    assert codes(turn)[0] == ASK_USER and kit.calls("probe") == []


async def test_from_that_finds_nothing_and_no_model_value_follows_the_missing_action(kit: Kit):
    kit.with_args(org={"from": "platform.organName", "missing": {"action": "FAIL", "message": "无机构名"}})
    turn = await kit.send("x", call("probe", {}), say("stop"))
    assert codes(turn)[0] == FAIL and kit.calls("probe") == []


async def test_an_optional_from_that_finds_nothing_passes_without_the_argument(kit: Kit):
    kit.with_args(org={"from": "platform.organName", "required": False})
    turn = await kit.send("x", call("probe", {}), say("stop"))
    assert turn.observations[0].ok and "org" not in kit.probed()


async def test_const_object_overrides_the_model_value(kit: Kit):
    kit.with_args(opts={"const": {"a": [1, 2], "b": None}})
    turn = await kit.send("x", call("probe", {"opts": {"a": 9}}), say("stop"))
    assert turn.observations[0].ok and turn.observations[0].sources["opts"] == "CONTRACT"
    assert kit.probed()["opts"] == {"a": [1, 2], "b": None}


@pytest.mark.parametrize("constant", [False, 0, []], ids=["false", "zero", "empty-list"])
async def test_a_falsy_const_is_still_bound(kit: Kit, constant: Any):
    kit.with_args(flag={"const": constant})
    turn = await kit.send("x", call("probe", {"flag": "model"}), say("stop"))
    assert turn.observations[0].ok and turn.observations[0].sources["flag"] == "CONTRACT", turn.observations[0]
    assert kit.probed()["flag"] == constant


async def test_from_outputs_binds_the_value_written_in_this_node(kit: Kit):
    kit.with_args(outputs={"pick": SHARE}, x={"from": "outputs.pick"}, y={"from": "outputs.pick.id"})
    value = {"id": "a-9", "name": "A"}
    turn = await kit.send("x", put("pick", value), call("probe", {"x": "m", "y": "m"}), say("stop"))
    obs = turn.observations[1]
    assert obs.ok and obs.sources["x"] == "NODE_OUTPUT" and obs.sources["y"] == "NODE_OUTPUT", obs
    assert kit.probed()["x"] == value and kit.probed()["y"] == "a-9"


async def test_from_outputs_before_the_output_is_written_does_not_bind(kit: Kit):
    kit.with_args(outputs={"pick": SHARE}, x={"from": "outputs.pick", "sources": ["MODEL"]})
    turn = await kit.send("x", call("probe", {"x": "m"}), say("stop"))
    assert turn.observations[0].sources["x"] == "MODEL" and kit.probed()["x"] == "m"


async def test_a_falsy_session_value_is_bound_over_the_model_value(kit: Kit):
    kit.with_args(outputs={"count": SHARE}, n={"from": "session.count", "sources": ["MODEL"]})
    first, later = await kit.talk(
        ["数量记为 0", "用它"], put("count", 0), finish(), call("probe", {"n": 5}), say("stop")
    )
    assert first.status == "DONE", first.as_dict()
    assert later.observations[0].sources["n"] == "SESSION" and kit.probed()["n"] == 0


async def test_a_session_value_of_one_session_is_not_bound_in_another(kit: Kit):
    kit.with_args(outputs={"category": SHARE}, c={"from": "session.category", "sources": ["MODEL"]})
    first = await kit.send("分类工作", put("category", "工作"), finish(), session="one")
    assert first.status == "DONE"
    other = await kit.send("挑", call("probe", {"c": "m"}), say("stop"), session="two")
    assert other.observations[0].sources["c"] == "MODEL" and kit.probed()["c"] == "m"


async def test_a_later_session_share_replaces_the_earlier_value(kit: Kit):
    kit.with_args(outputs={"category": SHARE}, c={"from": "session.category"})
    turns = await kit.talk(
        ["分类A", "分类B", "用"],
        put("category", "甲"),
        finish(),
        put("category", "乙"),
        finish(),
        call("probe", {"c": "m"}),
        say("stop"),
    )
    assert [t.status for t in turns[:2]] == ["DONE", "DONE"]
    assert kit.probed()["c"] == "乙"


# =====================================================================================================================
# §9 evidence.<key>[.<path>] resolution
# =====================================================================================================================


def lookup(respond: Any = None, mode: str | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"q": "a"}
    if respond is not None:
        args["respond"] = respond
    if mode:
        args["mode"] = mode
    return call("lookup", args)


async def test_from_evidence_path_binds_the_newest_success_and_records_evidence(kit: Kit):
    kit.with_args(first={"from": "evidence.notes.0.id"}, whole={"from": "evidence.notes"})
    newer = {"records": [{"id": "n-7", "title": "月报"}]}
    turn = await kit.send("x", lookup(), lookup(newer), call("probe", {}), say("stop"))
    obs = turn.observations[2]
    assert obs.ok and obs.sources["first"] == "EVIDENCE" and obs.sources["whole"] == "EVIDENCE", obs
    assert kit.probed()["first"] == "n-7" and kit.probed()["whole"] == newer["records"]


async def test_evidence_of_a_business_failure_is_not_read(kit: Kit):
    kit.with_args(first={"from": "evidence.notes.0.id"})
    failed = {"records": [{"id": "bad-1", "title": "坏"}]}
    turn = await kit.send("x", lookup(), lookup(failed, "business"), call("probe", {}), say("stop"))
    assert codes(turn)[:2] == [None, BUSINESS]
    assert kit.probed()["first"] == "n-1"


async def test_evidence_of_a_failed_call_is_not_read(kit: Kit):
    kit.with_args(first={"from": "evidence.notes.0.id", "sources": ["MODEL"]})
    turn = await kit.send("x", lookup(mode="io"), call("probe", {"first": "m"}), say("stop"))
    assert codes(turn)[0] == "agent_runtime.40018"
    assert turn.observations[1].sources["first"] == "MODEL" and kit.probed()["first"] == "m"


async def test_a_newer_empty_result_hides_an_older_one(kit: Kit):
    kit.with_args(first={"from": "evidence.notes.0.id", "sources": ["MODEL"]})
    turn = await kit.send("x", lookup(), lookup(mode="empty"), call("probe", {"first": "m"}), say("stop"))
    assert turn.observations[2].sources["first"] == "MODEL" and kit.probed()["first"] == "m"


async def test_an_index_past_the_end_does_not_bind(kit: Kit):
    kit.with_args(first={"from": "evidence.notes.5.id", "sources": ["MODEL"]})
    await kit.send("x", lookup(), call("probe", {"first": "m"}), say("stop"))
    assert kit.probed()["first"] == "m"


async def test_an_extract_key_no_tool_declares_does_not_bind(kit: Kit):
    kit.with_args(first={"from": "evidence.records.0.id", "sources": ["MODEL"]})
    turn = await kit.send("x", lookup(), call("probe", {"first": "m"}), say("stop"))
    assert turn.observations[1].sources["first"] == "MODEL" and kit.probed()["first"] == "m"


async def test_evidence_of_a_finished_task_is_not_visible_in_the_next_task(kit: Kit):
    kit.with_args(first={"from": "evidence.notes.0.id", "sources": ["MODEL"]})
    first, later = await kit.talk(["找", "再来"], lookup(), finish(), call("probe", {"first": "m"}), say("stop"))
    assert first.status == "DONE", first.as_dict()
    assert later.observations[0].sources["first"] == "MODEL" and kit.probed()["first"] == "m"


# --- §5.4 when ----------------------------------------------------------------------------------------------------


async def test_when_unique_evidence_binds_the_one_item_list_itself(kit: Kit):
    kit.with_args(ids={"from": "evidence.notes[].id", "when": "UNIQUE", "sources": ["MODEL"], "required": False})
    turn = await kit.send("x", lookup({"records": [{"id": "n-1"}]}), call("probe", {"ids": ["m"]}), say("stop"))
    obs = turn.observations[1]
    assert obs.ok and obs.sources["ids"] == "EVIDENCE", obs
    assert kit.probed()["ids"] == ["n-1"]


async def test_when_unique_evidence_with_no_candidate_does_not_bind(kit: Kit):
    kit.with_args(ids={"from": "evidence.notes[].id", "when": "UNIQUE", "sources": ["MODEL"], "required": False})
    turn = await kit.send("x", lookup(mode="empty"), call("probe", {"ids": ["m"]}), say("stop"))
    assert turn.observations[1].sources["ids"] == "MODEL" and kit.probed()["ids"] == ["m"]


async def test_when_always_evidence_binds_every_candidate(kit: Kit):
    kit.with_args(ids={"from": "evidence.notes[].id", "sources": ["MODEL"], "required": False})
    await kit.send("x", lookup(), call("probe", {"ids": ["m"]}), say("stop"))
    assert kit.probed()["ids"] == ["n-1", "n-2"]


ITEMS = {"type": "LIST", "fields": ["code"], "required": False, "share": "SESSION"}


@pytest.mark.parametrize(("items", "bound"), [([{"code": "A"}], True), ([{"code": "A"}, {"code": "B"}], False)])
async def test_when_unique_on_a_session_list_binds_only_for_one_item(kit: Kit, items: list, bound: bool):
    """§5.4: for non-evidence expressions UNIQUE needs the array before the first ``[`` to have one item."""
    kit.with_args(
        outputs={"items": ITEMS},
        code={"from": "session.items[].code", "when": "UNIQUE", "sources": ["MODEL"], "required": False},
    )
    first, later = await kit.talk(["记下", "挑"], put("items", items), finish(), call("probe", {"code": "m"}), say("s"))
    assert first.status == "DONE", first.as_dict()
    obs = later.observations[0]
    if bound:
        assert obs.sources["code"] == "SESSION" and kit.probed()["code"] in ("A", ["A"]), (obs, kit.probed())
    else:
        assert obs.sources["code"] == "MODEL" and kit.probed()["code"] == "m"


# --- §5.4 array templates -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, [{"goodsCode": "A"}, {"goodsCode": "B"}]),
        ([{"goodsCode": "mine"}, {"qty": 2}], [{"goodsCode": "mine"}, {"qty": 2, "goodsCode": "B"}]),
        ([{"qty": 1}], [{"qty": 1, "goodsCode": "A"}, {"goodsCode": "B"}]),
    ],
    ids=["no-list", "fill-the-gap", "longer-source"],
)
async def test_array_template_from_a_session_list(kit: Kit, given: Any, expected: list):
    kit.with_args(
        outputs={"items": ITEMS},
        **{"lines[].goodsCode": {"from": "session.items[].code", "sources": ["MODEL"], "required": False}},
    )
    arguments = {} if given is None else {"lines": given}
    first, later = await kit.talk(
        ["记下", "下单"], put("items", [{"code": "A"}, {"code": "B"}]), finish(), call("probe", arguments), say("s")
    )
    assert first.status == "DONE" and later.observations[0].ok, later.observations
    assert kit.probed()["lines"] == expected


async def test_array_template_from_an_output_of_this_node(kit: Kit):
    kit.with_args(
        outputs={"items": ITEMS},
        **{"lines[].goodsCode": {"from": "outputs.items[].code", "sources": ["MODEL"], "required": False}},
    )
    arguments = {"lines": [{"qty": 1}, {"qty": 2, "goodsCode": "mine"}]}
    await kit.send("x", put("items", [{"code": "A"}, {"code": "B"}]), call("probe", arguments), say("s"))
    assert kit.probed()["lines"] == [{"qty": 1, "goodsCode": "A"}, {"qty": 2, "goodsCode": "mine"}]


async def test_an_evidence_expression_is_never_an_array_template(kit: Kit):
    """§5.4: ``evidence.*`` does not support array templates (the issue's example lines[].goodsCode from
    evidence.items[].code): the model's lines are left as they are."""
    kit.with_args(**{"lines[].goodsCode": {"from": "evidence.notes[].id", "sources": ["MODEL"], "required": False}})
    await kit.send("x", lookup(), call("probe", {"lines": [{"qty": 1}]}), say("stop"))
    assert kit.probed()["lines"] == [{"qty": 1}]


# =====================================================================================================================
# §5.3 step 3: source matching
# =====================================================================================================================


@pytest.mark.parametrize(
    ("value", "ok"),
    [("n-2", True), ("周报", True), ("N-2", False), ("zed", False), (200, False)],
    ids=["id", "nested-field", "case", "outside-the-extract", "response-code"],
)
async def test_evidence_source_needs_a_value_of_the_extracted_content(kit: Kit, value: Any, ok: bool):
    kit.with_args(n={"sources": ["EVIDENCE"]})
    respond = {"records": RECORDS, "meta": {"owner": "zed"}}
    turn = await kit.send("x", lookup(respond), call("probe", {"n": value}), say("stop"))
    obs = turn.observations[1]
    if ok:
        assert obs.ok and obs.sources["n"] == "EVIDENCE", obs
    else:
        assert obs.code == REJECTED and len(kit.calls("probe")) == 0, obs


async def test_evidence_source_matches_a_number_value(kit: Kit):
    kit.with_args(n={"sources": ["EVIDENCE"]})
    turn = await kit.send("x", lookup({"records": [{"id": 7, "title": "七"}]}), call("probe", {"n": 7}), say("s"))
    assert turn.observations[1].ok and turn.observations[1].sources["n"] == "EVIDENCE"


async def test_evidence_source_does_not_accept_a_business_failure(kit: Kit):
    kit.with_args(n={"sources": ["EVIDENCE"]})
    turn = await kit.send("x", lookup(mode="business"), call("probe", {"n": "bad-1"}), say("stop"))
    assert codes(turn) == [BUSINESS, REJECTED]


async def test_evidence_source_does_not_accept_a_value_of_a_finished_task(kit: Kit):
    kit.with_args(n={"sources": ["EVIDENCE"]})
    _, later = await kit.talk(["找", "用"], lookup(), finish(), call("probe", {"n": "n-1"}), say("stop"))
    assert codes(later)[0] == REJECTED


@pytest.mark.parametrize(("sources", "expected"), [(["EVIDENCE", "USER"], "EVIDENCE"), (["USER", "EVIDENCE"], "USER")])
async def test_sources_are_matched_in_their_order(kit: Kit, sources: list[str], expected: str):
    kit.with_args(t={"sources": sources})
    turn = await kit.send("用周报那篇", lookup(), call("probe", {"t": "周报"}), say("stop"))
    assert turn.observations[1].ok and turn.observations[1].sources["t"] == expected


@pytest.mark.parametrize("source", ["PLATFORM", "CONTRACT"])
async def test_platform_and_contract_sources_never_match_a_model_value(kit: Kit, source: str):
    kit.with_args(u={"sources": [source]})
    turn = await kit.send("我是 42", call("probe", {"u": "42"}), say("stop"))
    assert codes(turn)[0] == REJECTED and kit.calls("probe") == []


@pytest.mark.parametrize(("value", "ok"), [("周报", True), ("别的", False)])
async def test_node_output_source_matches_the_output_of_the_same_path(kit: Kit, value: str, ok: bool):
    kit.with_args(outputs={"title": SHARE}, title={"sources": ["NODE_OUTPUT"]})
    turn = await kit.send("x", put("title", "周报"), call("probe", {"title": value}), say("stop"))
    obs = turn.observations[1]
    assert (obs.ok, obs.code) == ((True, None) if ok else (False, REJECTED)), obs
    if ok:
        assert obs.sources["title"] == "NODE_OUTPUT"


@pytest.mark.parametrize(("value", "ok"), [("n-2", True), ("周报", False), ("n-9", False)])
async def test_prior_task_source_matches_an_entity_id_only(kit: Kit, value: str, ok: bool):
    contract = kit.with_args(noteId={"sources": ["PRIOR_TASK"]})
    contract["tools"]["lookup"]["extracts"][0]["entity"] = {"type": "note", "name": "title"}
    kit.contract(contract)
    first, later = await kit.talk(["找", "打开"], lookup(), finish(), call("probe", {"noteId": value}), say("s"))
    assert first.status == "DONE", first.as_dict()
    obs = later.observations[0]
    assert (obs.ok, obs.code) == ((True, None) if ok else (False, REJECTED)), obs
    if ok:
        assert obs.sources["noteId"] == "PRIOR_TASK"


async def test_user_source_needs_at_least_two_characters(kit: Kit):
    kit.with_args(n={"sources": ["USER"]})
    turn = await kit.send("要 5 个", call("probe", {"n": "5"}), say("stop"))
    assert codes(turn)[0] == ASK_USER and kit.calls("probe") == []


async def test_user_source_ignores_case(kit: Kit):
    kit.with_args(t={"sources": ["USER"]})
    turn = await kit.send("标题是 Weekly Report 吧", call("probe", {"t": "weekly REPORT"}), say("stop"))
    assert turn.observations[0].ok and turn.observations[0].sources["t"] == "USER", turn.observations[0]


async def test_user_source_is_not_matched_by_the_assistants_own_text(kit: Kit):
    kit.with_args(t={"sources": ["USER"]})
    _, later = await kit.talk(
        ["起个标题", "好的"], say("建议标题：项目复盘"), call("probe", {"t": "项目复盘"}), say("stop")
    )
    assert codes(later)[0] == ASK_USER and kit.calls("probe") == []


async def test_user_source_matches_an_earlier_message_of_the_same_node(kit: Kit):
    kit.with_args(t={"sources": ["USER"]})
    _, later = await kit.talk(
        ["标题用项目复盘", "就这样"], say("还要别的吗？"), call("probe", {"t": "项目复盘"}), say("stop")
    )
    assert later.observations[0].ok and later.observations[0].sources["t"] == "USER"


async def test_an_argument_not_listed_in_args_is_free(kit: Kit):
    kit.with_args(t={"sources": ["USER"], "required": False})
    turn = await kit.send("x", call("probe", {"anything": "编的"}), say("stop"))
    assert turn.observations[0].ok and kit.probed()["anything"] == "编的"


async def test_an_enum_value_that_is_listed_passes(kit: Kit):
    kit.with_args(color={"sources": ["MODEL"], "enum": ["red", "blue"]})
    turn = await kit.send("x", call("probe", {"color": "blue"}), call("probe", {"color": "green"}), say("stop"))
    assert codes(turn) == [None, ASK_USER]


# =====================================================================================================================
# §6.3 extracts: empty, entities; §9 prior.*
# =====================================================================================================================


async def evidence_of(turn: TurnResult) -> list[Any]:
    async with SkillYard() as yard:
        return await AgentStore(yard.database).load_evidence(str(turn.task_id))


async def test_empty_only_when_every_extract_counts_zero(kit: Kit):
    contract = base_contract()
    contract["tools"]["lookup"]["extracts"] = [
        {"key": "notes", "path": "data.records"},
        {"key": "more", "path": "data.more"},
    ]
    kit.contract(contract)
    turn = await kit.send(
        "x",
        lookup({"records": [], "more": [{"id": "m"}]}),
        lookup({"records": [], "more": []}),
        say("stop"),
    )
    records = sorted(await evidence_of(turn), key=lambda r: r.seq)
    assert [r.empty for r in records] == [False, True]
    assert records[0].counts.get("notes") == 0 and records[0].counts.get("more") == 1


async def test_an_extract_path_to_an_object_counts_one_or_zero(kit: Kit):
    contract = base_contract()
    contract["tools"]["lookup"]["extracts"] = [{"key": "one", "path": "data.item"}]
    kit.contract(contract)
    turn = await kit.send("x", lookup({"item": {"id": "a"}}), lookup({"item": None}), say("stop"))
    records = sorted(await evidence_of(turn), key=lambda r: r.seq)
    assert [r.counts.get("one") for r in records] == [1, 0]
    assert [r.empty for r in records] == [False, True]


def entity_contract(kit: Kit, entity: dict[str, Any], path: str = "data.records", **args: Any) -> None:
    contract = kit.with_args(**args)
    contract["tools"]["lookup"]["extracts"] = [{"key": "things", "path": path, "entity": entity}]
    kit.contract(contract)


GOODS = [{"code": "G1", "label": "苹果", "price": 3, "meta": {"x": 1}}, {"label": "无码"}]


async def test_read_entities_use_the_configured_id_and_name_fields_and_skip_items_without_id(kit: Kit):
    entity_contract(kit, {"type": "goods", "id": "code", "name": "label"})
    turn = await kit.send("x", lookup({"records": GOODS}), say("stop"), session="goods")
    assert turn.observations[0].ok
    session = await kit.session("goods")
    assert [(e.type, e.id, e.name) for e in session.entities] == [("goods", "G1", "苹果")]
    attrs = session.entities[0].attrs
    assert attrs.get("price") == 3 and "meta" not in attrs


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


async def test_a_scalar_result_without_scalar_is_no_entity(kit: Kit):
    entity_contract(kit, {"type": "memo"}, path="data")
    await kit.send("x", lookup("M-5"), say("stop"), session="scalar0")
    assert (await kit.session("scalar0")).entities == []


async def test_a_scalar_read_result_named_by_scalar_is_an_entity(kit: Kit):
    entity_contract(kit, {"type": "memo", "scalar": "id"}, path="data")
    await kit.send("x", lookup("M-5"), say("stop"), session="scalar1")
    assert [(e.type, e.id) for e in (await kit.session("scalar1")).entities] == [("memo", "M-5")]


async def test_an_object_at_the_extract_path_is_one_entity(kit: Kit):
    entity_contract(kit, {"type": "article"}, path="data.item")
    await kit.send("x", lookup({"item": {"id": "a-1", "name": "春", "words": 120}}), say("stop"), session="obj")
    entities = (await kit.session("obj")).entities
    assert [(e.type, e.id, e.name) for e in entities] == [("article", "a-1", "春")]
    assert entities[0].attrs.get("words") == 120


async def test_a_business_failed_read_produces_no_entity(kit: Kit):
    entity_contract(kit, {"type": "note"})
    turn = await kit.send("x", lookup(mode="business"), say("stop"), session="bizent")
    assert codes(turn) == [BUSINESS]
    assert (await kit.session("bizent")).entities == []


async def test_entities_belong_to_their_session(kit: Kit):
    entity_contract(kit, {"type": "note", "name": "title"}, n={"from": "prior.note.id", "sources": ["MODEL"]})
    assert (await kit.send("找", lookup(), finish(), session="ea")).status == "DONE"
    other = await kit.send("用", call("probe", {"n": "m"}), say("stop"), session="eb")
    assert other.observations[0].sources["n"] == "MODEL" and kit.probed()["n"] == "m"


# =====================================================================================================================
# §8 outputs
# =====================================================================================================================


@pytest.mark.parametrize("key", ["name", "memberId", "deptPath", "adminCompany"])
async def test_output_set_refuses_every_platform_field_name(kit: Kit, key: str):
    kit.with_args(outputs={"category": SHARE})
    turn = await kit.send("x", put(key, "v"), say("stop"))
    assert codes(turn) == [PLATFORM_FORBIDDEN] and turn.observations[0].next_step


@pytest.mark.parametrize("key", ["name", "deptPath", "adminUser"])
async def test_an_output_named_like_a_platform_field_fails_loading(kit: Kit, key: str):
    from skillyard.agent import load_agent

    kit.with_args(outputs={key: {"sources": ["USER"]}})
    async with SkillYard() as yard:
        loaded = await load_agent(yard, kit.dir)
    assert "probe.kit" not in loaded.skills
    assert ("probe.kit", "§11", f"outputs.{key}") in [(e.skill, e.rule, e.path) for e in loaded.errors]


async def test_a_second_output_set_replaces_the_first_value(kit: Kit):
    kit.with_args(outputs={"category": SHARE})
    turn = await kit.send("x", put("category", "甲"), put("category", "乙"), finish(), session="twice")
    assert turn.status == "DONE"
    assert (await kit.session("twice")).values.get("category") == "乙"


async def test_outputs_of_a_failed_node_are_neither_shared_nor_entities(kit: Kit):
    outputs = {"category": SHARE, "memo": {"required": False, "entity": {"type": "memo", "scalar": "id"}}}
    kit.with_args(outputs=outputs)
    turn = await kit.send(
        "x", put("category", "工作"), put("memo", "M-1"), call("builtin_node_fail", {"reason": "不做了"}), session="f"
    )
    assert turn.status == "FAILED"
    session = await kit.session("f")
    assert "category" not in session.values and session.entities == []


async def test_outputs_of_a_cancelled_task_are_not_shared(kit: Kit):
    kit.with_args(outputs={"category": SHARE})
    model = kit.model(
        put("category", "工作"), lookup(mode="empty"), call("builtin_node_follow_up", {"question": "换个词？"})
    )
    async with SkillYard() as yard:
        agent = await yard.agent(kit.dir, model=model)
        asked = await agent.send(kit.sid("c"), "找", identity=IDENTITY)
        assert asked.status == "SUSPENDED", asked.as_dict()
        assert (await agent.resume(kit.sid("c"), "CANCEL")).status == "CANCELLED"
    assert "category" not in (await kit.session("c")).values


async def test_a_task_share_is_published_to_the_task_at_finish(kit: Kit):
    kit.with_args(outputs={"spaceId": {"required": False, "share": "TASK"}})
    turn = await kit.send("x", put("spaceId", "sp-1"), finish())
    async with SkillYard() as yard:
        task = await AgentStore(yard.database).load_task(str(turn.task_id))
    assert task is not None and task.shared == {"spaceId": "sp-1"}
    assert "spaceId" not in (await kit.session()).values


async def test_list_output_entities_one_per_item_with_an_id(kit: Kit):
    goods = {"type": "LIST", "fields": ["code", "label"], "required": False}
    goods["entity"] = {"type": "goods", "id": "code", "name": "label"}
    kit.with_args(outputs={"goods": goods})
    value = [{"code": "G1", "label": "苹果"}, {"code": "G2", "label": "梨"}, {"label": "无码"}]
    turn = await kit.send("x", put("goods", value), finish(), session="lst")
    assert turn.status == "DONE", turn.as_dict()
    found = {(e.type, e.id, e.name) for e in (await kit.session("lst")).entities}
    assert found == {("goods", "G1", "苹果"), ("goods", "G2", "梨")}


async def test_an_object_output_entity_takes_default_id_and_name_and_simple_attributes(kit: Kit):
    kit.with_args(outputs={"article": {"required": False, "entity": {"type": "article"}}})
    value = {"id": "a-1", "name": "春", "words": 120, "tags": ["x"]}
    turn = await kit.send("x", put("article", value), finish(), session="objout")
    assert turn.status == "DONE", turn.as_dict()
    entities = (await kit.session("objout")).entities
    assert [(e.type, e.id, e.name) for e in entities] == [("article", "a-1", "春")]
    assert entities[0].attrs.get("words") == 120 and "tags" not in entities[0].attrs


async def test_output_evidence_of_a_finished_task_is_refused(kit: Kit):
    kit.with_args(outputs={"noteId": {"sources": ["EVIDENCE"], **SHARE}})
    first, later = await kit.talk(
        ["找", "记下"], lookup(), finish(), put("noteId", "n-1", "EVIDENCE", "$EV1", "data.records.0.id"), say("s")
    )
    assert first.status == "DONE"
    assert codes(later) == [SOURCE_REJECT]


@pytest.mark.parametrize(("value", "ok"), [("n-1", True), ("n-9", False)])
async def test_an_output_with_empty_sources_still_checks_the_evidence_value(kit: Kit, value: str, ok: bool):
    kit.with_args(outputs={"free": SHARE})
    turn = await kit.send(
        "x", lookup(), put("free", value, "EVIDENCE", "$EV", "data.records.0.id"), say("stop"), session="esrc"
    )
    obs = turn.observations[1]
    assert (obs.ok, obs.code) == ((True, None) if ok else (False, SOURCE_REJECT)), obs


async def test_an_output_contract_constant_compares_as_json(kit: Kit):
    kit.with_args(outputs={"kind": {"sources": ["CONTRACT"], "constant": {"a": 1, "b": [1]}, **SHARE}})
    turn = await kit.send(
        "x",
        put("kind", {"b": [1], "a": 1}, "CONTRACT", "c"),
        put("kind", {"a": 1, "b": [2]}, "CONTRACT", "c"),
        say("stop"),
    )
    assert codes(turn) == [None, SOURCE_REJECT]


@pytest.mark.parametrize("empty", [[], {}], ids=["list", "object"])
async def test_a_required_output_written_as_an_empty_container_is_missing(kit: Kit, empty: Any):
    kit.with_args(outputs={"result": {"required": True}})
    turn = await kit.send("x", put("result", empty), finish(), say("stop"))
    assert codes(turn) == [None, FINISH_OUTPUT_MISSING] and turn.status == "RUNNING"


# =====================================================================================================================
# §9 / §16.2 expression prefixes at load time
# =====================================================================================================================


async def load(kit: Kit) -> Any:
    from skillyard.agent import load_agent

    async with SkillYard() as yard:
        return await load_agent(yard, kit.dir)


@pytest.mark.parametrize(
    "expression",
    ["state.draft", "input.title", "Session.lang", "env.now", "evidence.", "shared", "call.title"],
)
async def test_an_unknown_or_empty_from_prefix_drops_the_skill(kit: Kit, expression: str):
    kit.with_args(x={"from": expression})
    loaded = await load(kit)
    assert "probe.kit" not in loaded.skills
    assert ("probe.kit", "§16.2", "tools.probe.args.x.from") in [(e.skill, e.rule, e.path) for e in loaded.errors]


async def test_every_documented_prefix_loads(kit: Kit):
    kit.with_args(
        outputs={"o": SHARE},
        a={"from": "inputs.topic"},
        b={"from": "outputs.o"},
        c={"from": "shared.spaceId"},
        d={"from": "session.lang"},
        e={"from": "prior.note.id"},
        f={"from": "prior.note:n-1.tag"},
        g={"from": "platform.deptPath"},
        h={"from": "evidence.notes.0.id"},
        i={"from": "evidence.notes[].id", "when": "UNIQUE"},
    )
    loaded = await load(kit)
    assert "probe.kit" in loaded.skills and loaded.errors == [], loaded.errors


async def test_an_input_from_with_another_prefix_still_loads(kit: Kit):
    """§7: in inputs.*.from an unknown prefix falls back to the upstream output of that name (no load error)."""
    contract = base_contract()
    contract["inputs"] = {"topic": {"from": "whatever.topic"}}
    kit.contract(contract)
    loaded = await load(kit)
    assert "probe.kit" in loaded.skills, loaded.errors


# =====================================================================================================================
# §12 data builtins: evidence_get, session_info, state_set, env_*
# =====================================================================================================================


@pytest.mark.parametrize(
    ("mode", "status", "business_ok", "empty"),
    [("business", "SUCCESS", False, None), ("empty", "SUCCESS", True, True), ("io", "FAILED", None, None)],
)
async def test_evidence_get_reports_status_business_ok_and_empty(
    kit: Kit, mode: str, status: str, business_ok: Any, empty: Any
):
    turn = await kit.send(
        "x",
        lookup(mode=mode),
        call("builtin_evidence_get", {"evidenceId": "ev-nope"}),  # the refusal lists the visible ids
        call("builtin_evidence_get", {"evidenceId": "$EV"}),
        say("s"),
    )
    assert turn.observations[1].code == EVIDENCE_PATH_INVALID
    obs = turn.observations[2]
    assert obs.ok, obs
    content = obs.content
    assert content["tool"] == "lookup" and content["status"] == status
    if business_ok is not None:
        assert content["businessOk"] is business_ok
    if empty is not None:
        assert content["empty"] is empty
    if mode == "business":
        assert content["response"]["code"] == "E1"


async def test_session_info_after_a_resume_and_in_the_next_task(kit: Kit):
    model = kit.model(
        lookup(mode="empty"),
        call("builtin_node_follow_up", {"question": "换个词？"}),
        call("builtin_session_info"),
        lookup(),
        finish(),
        call("builtin_session_info"),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(kit.dir, model=model)
        asked = await agent.send(kit.sid("info"), "找", identity=IDENTITY)
        assert asked.status == "SUSPENDED", asked.as_dict()
        resumed = await agent.resume(kit.sid("info"), "REPLY", "用季度")
        later = await agent.send(kit.sid("info"), "再来", identity=IDENTITY)
    info = resumed.observations[0].content
    assert info == {
        "sessionId": kit.sid("info"),
        "taskId": asked.task_id,
        "nodeId": asked.node_id,
        "nodeStatus": "RUNNING",
    }
    assert resumed.status == "DONE"
    nxt = later.observations[0].content
    assert nxt["sessionId"] == kit.sid("info") and nxt["taskId"] != asked.task_id and nxt["nodeId"] != asked.node_id


@pytest.mark.parametrize(
    "key",
    [
        "outputs",
        "prior",
        "checkpoint",
        "user_fields",
        "fingerprint",
        "deptPath",
        "adminCompany",
        "Inputs",
        "_",
    ],
)
async def test_state_set_refuses_more_reserved_keys(kit: Kit, key: str):
    turn = await kit.send("x", call("builtin_state_set", {"key": key, "value": 1}), say("stop"))
    obs = turn.observations[0]
    assert obs.code == STATE_RESERVED and obs.next_step, obs


@pytest.mark.parametrize("key", ["statusNote", "draft_2", "草稿", "nodes"])
async def test_state_set_accepts_free_keys_and_overwrites(kit: Kit, key: str):
    turn = await kit.send(
        "x",
        call("builtin_state_set", {"key": key, "value": 1}),
        call("builtin_state_set", {"key": key, "value": {"v": 2}}),
        say("stop"),
    )
    assert codes(turn) == [None, None], turn.observations
    async with SkillYard() as yard:
        node = await AgentStore(yard.database).load_node(str(turn.node_id))
    assert node is not None and node.scratch == {key: {"v": 2}}


async def test_state_set_is_no_business_call_and_no_output(kit: Kit):
    kit.with_args(outputs={"draft": {"required": True}})
    turn = await kit.send("x", call("builtin_state_set", {"key": "draft", "value": "v"}), finish(), say("stop"))
    assert codes(turn) == [None, FINISH_OUTPUT_MISSING]
    kit.contract(base_contract())
    turn = await kit.send(
        "x", call("builtin_state_set", {"key": "draft", "value": "v"}), finish(), say("stop"), session="nb"
    )
    assert codes(turn) == [None, FINISH_NEED_BUSINESS]


async def test_builtins_are_outside_the_fingerprint_fuse(kit: Kit):
    same = call("builtin_env_hash", {"input": "abc"})
    note = call("builtin_state_set", {"key": "draft", "value": 1})
    turn = await kit.send("x", same, same, same, same, same, note, note, note, note, say("stop"))
    assert codes(turn) == [None] * 9 and turn.status == "RUNNING"


ENV_CASES = [
    ("uuid 32", "builtin_env_generate_uuid", {"length": 32}, lambda r: len(r["uuid"]) == 32 and "-" not in r["uuid"]),
    (
        "format slashes",
        "builtin_env_format_datetime",
        {"input": "2024/05/01 08:30:05", "outputPattern": "dd.MM.yyyy HH:mm"},
        lambda r: r["result"] == "01.05.2024 08:30",
    ),
    (
        "format strftime",
        "builtin_env_format_datetime",
        {"input": "2024-05-01", "outputPattern": "%Y年%m月%d日"},
        lambda r: r["result"] == "2024年05月01日",
    ),
    (
        "format 12h",
        "builtin_env_format_datetime",
        {"input": "2024-05-01T00:05:00", "outputPattern": "h:mm a"},
        lambda r: r["result"] == "12:05 AM",
    ),
    (
        "add weeks",
        "builtin_env_add_datetime",
        {"base": "2024-05-01", "amount": 2, "unit": "weeks"},
        lambda r: r["result"] == "2024-05-15",
    ),
    (
        "add minutes",
        "builtin_env_add_datetime",
        {"base": "2024-05-01 23:50:00", "amount": 15, "unit": "MINUTES"},
        lambda r: r["result"] == "2024-05-02 00:05:00",
    ),
    (
        "add months from a datetime",
        "builtin_env_add_datetime",
        {"base": "2024-03-31 10:00:00", "amount": -1, "unit": "month"},
        lambda r: r["result"] == "2024-02-29 10:00:00",
    ),
    (
        "diff weeks",
        "builtin_env_diff_datetime",
        {"from": "2024-05-01", "to": "2024-05-20", "unit": "weeks"},
        lambda r: r["result"] == 2,
    ),
    (
        "diff minutes negative",
        "builtin_env_diff_datetime",
        {"from": "2024-05-01T10:00:00", "to": "2024-05-01T09:29:30", "unit": "minutes"},
        lambda r: r["result"] == -30,
    ),
    (
        "diff seconds across a compact date",
        "builtin_env_diff_datetime",
        {"from": "20240501", "to": "2024-05-01T00:01:01", "unit": "seconds"},
        lambda r: r["result"] == 61,
    ),
    (
        "weekday monday",
        "builtin_env_get_weekday",
        {"date": "2024-04-29"},
        lambda r: (r["weekday"], r["number"]) == ("Monday", 1),
    ),
    (
        "hash sha512 cut",
        "builtin_env_hash",
        {"input": "abc", "algorithm": "sha512", "length": 16},
        lambda r: r["hash"] == __import__("hashlib").sha512(b"abc").hexdigest()[:16],
    ),
    ("random negative", "builtin_env_random_int", {"min": -5, "max": -5}, lambda r: r["result"] == -5),
    (
        "now is consistent",
        "builtin_env_current_datetime",
        {},
        lambda r: r["date"] == r["datetime"][:10] and r["iso"][:10] == r["date"],
    ),
]


@pytest.mark.parametrize(("case", "name", "arguments", "check"), ENV_CASES, ids=[c[0] for c in ENV_CASES])
async def test_more_env_helpers(kit: Kit, case: str, name: str, arguments: dict[str, Any], check: Any):
    turn = await kit.send("x", call(name, arguments), say("stop"))
    obs = turn.observations[0]
    assert obs.ok and obs.code is None, obs
    assert check(obs.content), obs.content


# =====================================================================================================================
# More §5.3 / §5.4 edges: bound values and sources, enum after binding, nested and array paths, UNIQUE shapes
# =====================================================================================================================


async def test_a_bound_value_passes_whatever_the_sources_list(kit: Kit):
    """§5.3 step 3: a successful from binding gives the bound source; step 4 only refuses MODEL values."""
    kit.with_args(outputs={"category": SHARE}, c={"from": "session.category", "sources": ["USER"]})
    _, later = await kit.talk(["分类工作", "挑"], put("category", "工作"), finish(), call("probe", {}), say("s"))
    obs = later.observations[0]
    assert obs.ok and obs.sources["c"] == "SESSION", obs
    assert kit.probed()["c"] == "工作"


async def test_the_enum_check_applies_to_a_from_bound_value(kit: Kit):
    """§5.3 step 5 runs for every value that is not a const: a platform value outside the enum asks the user."""
    kit.with_args(org={"from": "platform.organId", "enum": ["1", "2"]})
    turn = await kit.send("x", call("probe", {}), say("stop"))
    assert codes(turn)[0] == ASK_USER and kit.calls("probe") == []


async def test_an_optional_argument_without_sources_still_rejects_a_model_value(kit: Kit):
    """§5.3 note: listed, no from/const, empty sources → the model's value is always rejected; required=false only
    lets a *missing* value pass."""
    kit.with_args(t={"required": False})
    turn = await kit.send("x", call("probe", {"t": "编的"}), call("probe", {}), say("stop"))
    assert codes(turn) == [REJECTED, None]


async def test_a_null_value_is_a_missing_value(kit: Kit):
    kit.with_args(t={"sources": ["USER"], "missing": {"action": "FAIL", "message": "没有标题"}})
    turn = await kit.send("x", call("probe", {"t": None}), say("stop"))
    assert codes(turn)[0] == FAIL and kit.calls("probe") == []


@pytest.mark.parametrize(
    ("lines", "ok"),
    [([{"goodsCode": "n-1"}, {"goodsCode": "n-2"}], True), ([{"goodsCode": "n-1"}, {"goodsCode": "zzz"}], False)],
    ids=["all-from-evidence", "one-made-up"],
)
async def test_each_item_of_an_array_path_needs_its_source(kit: Kit, lines: list, ok: bool):
    kit.with_args(**{"lines[].goodsCode": {"sources": ["EVIDENCE"]}})
    turn = await kit.send("x", lookup(), call("probe", {"lines": lines}), say("stop"))
    obs = turn.observations[1]
    assert (obs.ok, obs.code) == ((True, None) if ok else (False, REJECTED)), obs


@pytest.mark.parametrize(("message", "code"), [("税号 91310000X 开票", None), ("帮我开票", ASK_USER)])
async def test_a_nested_argument_is_checked_at_its_path(kit: Kit, message: str, code: str | None):
    kit.with_args(**{"orderInfo.taxNo": {"sources": ["USER"]}})
    turn = await kit.send(message, call("probe", {"orderInfo": {"taxNo": "91310000X", "n": 1}}), say("stop"))
    assert codes(turn)[0] == code, turn.observations[0]


async def test_a_missing_nested_argument_follows_the_missing_action(kit: Kit):
    kit.with_args(**{"orderInfo.taxNo": {"sources": ["USER"], "missing": {"action": "FAIL", "message": "缺税号"}}})
    turn = await kit.send("x", call("probe", {"orderInfo": {"n": 1}}), say("stop"))
    assert codes(turn)[0] == FAIL and kit.calls("probe") == []


async def test_an_answered_expected_field_is_user_only_inside_its_node(kit: Kit):
    """§5.3 USER: the *current* follow-up's expectedFields; a later task does not inherit the answer."""
    kit.with_args(tag={"sources": ["USER"]})
    model = kit.model(
        call("builtin_node_follow_up", {"question": "打什么标签？", "expectedFields": ["tag"]}),
        call("probe", {"tag": "urgent-ish"}),
        finish(),
        call("probe", {"tag": "urgent-ish"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(kit.dir, model=model)
        asked = await agent.send(kit.sid("ef"), "打个标签", identity=IDENTITY)
        assert asked.status == "SUSPENDED", asked.as_dict()
        done = await agent.resume(kit.sid("ef"), "REPLY", "紧急的那种")
        later = await agent.send(kit.sid("ef"), "再打一个", identity=IDENTITY)
    assert codes(done) == [None, None] and done.observations[0].sources["tag"] == "USER"
    assert codes(later)[0] == ASK_USER


@pytest.mark.parametrize(
    ("value", "message", "ok"),
    [("C++", "用 C++写一个", True), ("a.b", "用 axb 吧", False), ("(1)", "选第(1)项", True)],
    ids=["plus", "dot-is-no-wildcard", "parens"],
)
async def test_user_text_match_treats_the_value_literally(kit: Kit, value: str, message: str, ok: bool):
    kit.with_args(t={"sources": ["USER"]})
    turn = await kit.send(message, call("probe", {"t": value}), say("stop"))
    assert codes(turn)[0] == (None if ok else ASK_USER), turn.observations[0]


async def test_when_unique_on_an_expression_without_a_list_binds(kit: Kit):
    """§5.4: UNIQUE looks at the array before the first ``[``; an expression without one binds as ALWAYS does."""
    kit.with_args(outputs={"category": SHARE}, c={"from": "session.category", "when": "UNIQUE", "sources": ["MODEL"]})
    _, later = await kit.talk(
        ["分类工作", "挑"], put("category", "工作"), finish(), call("probe", {"c": "m"}), say("s")
    )
    assert later.observations[0].sources["c"] == "SESSION" and kit.probed()["c"] == "工作"


async def test_when_unique_evidence_needs_a_list_value(kit: Kit):
    """§5.4: for ``evidence.*`` UNIQUE needs the value to be a one-item array; a scalar is not bound."""
    kit.with_args(n={"from": "evidence.notes.0.id", "when": "UNIQUE", "sources": ["MODEL"]})
    turn = await kit.send("x", lookup({"records": [{"id": "n-1"}]}), call("probe", {"n": "m"}), say("stop"))
    assert turn.observations[1].sources["n"] == "MODEL" and kit.probed()["n"] == "m"


async def test_when_unique_evidence_binds_a_one_record_list(kit: Kit):
    kit.with_args(rows={"from": "evidence.notes", "when": "UNIQUE", "sources": ["MODEL"]})
    await kit.send("x", lookup({"records": [{"id": "n-1", "title": "甲"}]}), call("probe", {"rows": "m"}), say("s"))
    assert kit.probed()["rows"] == [{"id": "n-1", "title": "甲"}]


async def test_when_unique_on_an_output_list_of_this_node(kit: Kit):
    kit.with_args(
        outputs={"items": ITEMS},
        code={"from": "outputs.items[].code", "when": "UNIQUE", "sources": ["MODEL"]},
    )
    turn = await kit.send(
        "x",
        put("items", [{"code": "A"}, {"code": "B"}]),
        call("probe", {"code": "m"}),
        put("items", [{"code": "C"}]),
        call("probe", {"code": "m"}),
        say("stop"),
    )
    assert [turn.observations[i].sources["code"] for i in (1, 3)] == ["MODEL", "NODE_OUTPUT"]
    assert kit.probed(0)["code"] == "m" and kit.probed(1)["code"] in ("C", ["C"])


async def test_a_list_expression_into_a_plain_argument_binds_the_whole_list(kit: Kit):
    kit.with_args(outputs={"items": ITEMS}, codes={"from": "session.items[].code", "sources": ["MODEL"]})
    await kit.talk(
        ["记", "用"], put("items", [{"code": "A"}, {"code": "B"}]), finish(), call("probe", {"codes": "m"}), say("s")
    )
    assert kit.probed()["codes"] == ["A", "B"]


async def test_a_nested_array_template(kit: Kit):
    kit.with_args(
        outputs={"items": ITEMS},
        **{"order.lines[].code": {"from": "session.items[].code", "sources": ["MODEL"], "required": False}},
    )
    await kit.talk(
        ["记", "下单"],
        put("items", [{"code": "A"}, {"code": "B"}]),
        finish(),
        call("probe", {"order": {"id": 1, "lines": [{"qty": 1}]}}),
        say("s"),
    )
    assert kit.probed()["order"] == {"id": 1, "lines": [{"qty": 1, "code": "A"}, {"code": "B"}]}


async def test_an_array_template_skips_source_items_without_the_field(kit: Kit):
    kit.with_args(
        outputs={"items": ITEMS},
        **{"lines[].code": {"from": "session.items[].code", "sources": ["MODEL"], "required": False}},
    )
    await kit.talk(
        ["记", "下单"],
        put("items", [{"x": 1}, {"code": "B"}]),
        finish(),
        call("probe", {"lines": [{"qty": 1}, {"qty": 2}]}),
        say("s"),
    )
    assert kit.probed()["lines"] == [{"qty": 1}, {"qty": 2, "code": "B"}]


# =====================================================================================================================
# More §6.3 / §8 edges
# =====================================================================================================================


async def test_an_array_of_scalars_named_by_scalar_gives_one_entity_per_item(kit: Kit):
    entity_contract(kit, {"type": "tag", "scalar": "id"}, path="data.ids")
    await kit.send("x", lookup({"ids": ["t-1", "t-2"]}), say("stop"), session="scal")
    assert {(e.type, e.id) for e in (await kit.session("scal")).entities} == {("tag", "t-1"), ("tag", "t-2")}


async def test_a_list_path_counts_its_items_whatever_their_fields(kit: Kit):
    """§6.3: a path to an array counts the array's length (``fields`` counts only an object at the path)."""
    contract = base_contract()
    contract["tools"]["lookup"]["extracts"] = [{"key": "notes", "path": "data.records", "fields": ["id"]}]
    kit.contract(contract)
    turn = await kit.send("x", lookup({"records": [{"id": None, "title": "无号"}]}), say("stop"))
    (record,) = await evidence_of(turn)
    assert record.counts.get("notes") == 1 and record.empty is False


async def test_an_extract_without_key_still_decides_empty(kit: Kit):
    contract = base_contract()
    contract["tools"]["lookup"]["extracts"] = [{"path": "data.records"}]
    kit.contract(contract)
    turn = await kit.send("x", lookup({"records": []}), lookup({"records": [{"id": "a"}]}), say("stop"))
    records = sorted(await evidence_of(turn), key=lambda r: r.seq)
    assert [r.empty for r in records] == [True, False]


async def test_model_is_never_an_output_source_even_when_listed(kit: Kit):
    kit.with_args(outputs={"free": {"sources": ["MODEL", "USER"], **SHARE}})
    turn = await kit.send("x", put("free", "v", "MODEL"), put("free", "v", "USER"), say("stop"))
    assert codes(turn) == [SOURCE_REJECT, None]


async def test_an_output_object_without_id_makes_no_entity(kit: Kit):
    kit.with_args(outputs={"article": {"required": False, "entity": {"type": "article"}}})
    turn = await kit.send("x", put("article", {"name": "无号"}), finish(), session="noid")
    assert turn.status == "DONE", turn.as_dict()
    assert (await kit.session("noid")).entities == []


async def test_an_outputs_list_expression_into_a_plain_argument_binds_the_list(kit: Kit):
    """§9 ``outputs.<路径>`` with §5.4's ``[]`` (every item), as ``session.items[].code`` and ``inputs.items[].code``
    do: the plain argument gets the list of codes."""
    kit.with_args(outputs={"items": ITEMS}, codes={"from": "outputs.items[].code", "sources": ["MODEL"]})
    turn = await kit.send("x", put("items", [{"code": "A"}, {"code": "B"}]), call("probe", {"codes": "m"}), say("s"))
    assert turn.observations[1].sources["codes"] == "NODE_OUTPUT", turn.observations[1]
    assert kit.probed()["codes"] == ["A", "B"]


# =====================================================================================================================
# Session isolation of evidence; USER from a follow-up answer's text
# =====================================================================================================================


async def two_sessions(kit: Kit, first: list[dict[str, Any]], second: list[dict[str, Any]]) -> tuple[Any, Any]:
    """Session A runs ``first``; session B runs ``second`` with a model that has read A's tool messages too."""
    model_a, model_b = kit.model(*first), kit.model(*second)
    model_b.ids = model_a.ids  # one model that remembers what it read in the other session
    async with SkillYard() as yard:
        a = await (await yard.agent(kit.dir, model=model_a)).send(kit.sid("sa"), "找", identity=IDENTITY)
        b = await (await yard.agent(kit.dir, model=model_b)).send(kit.sid("sb"), "用", identity=IDENTITY)
    return a, b


async def test_evidence_get_does_not_read_another_sessions_evidence(kit: Kit):
    a, b = await two_sessions(
        kit, [lookup(), say("找到了")], [call("builtin_evidence_get", {"evidenceId": "$EV"}), say("s")]
    )
    assert a.status == "RUNNING" and a.observations[0].evidence_id
    assert codes(b) == [EVIDENCE_PATH_INVALID]


async def test_output_set_does_not_accept_another_sessions_evidence(kit: Kit):
    kit.with_args(outputs={"noteId": {"sources": ["EVIDENCE"], **SHARE}})
    _, b = await two_sessions(
        kit, [lookup(), say("找到了")], [put("noteId", "n-1", "EVIDENCE", "$EV", "data.records.0.id"), say("s")]
    )
    assert codes(b) == [SOURCE_REJECT]


async def test_evidence_source_does_not_accept_another_sessions_evidence(kit: Kit):
    kit.with_args(n={"sources": ["EVIDENCE"]})
    _, b = await two_sessions(kit, [lookup(), say("找到了")], [call("probe", {"n": "n-1"}), say("s")])
    assert codes(b) == [REJECTED] and kit.calls("probe") == []


async def test_a_value_in_a_follow_up_answer_is_user(kit: Kit):
    kit.with_args(t={"sources": ["USER"]})
    model = kit.model(
        lookup(mode="empty"),
        call("builtin_node_follow_up", {"question": "没找到，换个标题？"}),
        call("probe", {"t": "项目复盘"}),
        say("stop"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(kit.dir, model=model)
        asked = await agent.send(kit.sid("fa"), "找笔记", identity=IDENTITY)
        assert asked.status == "SUSPENDED", asked.as_dict()
        after = await agent.resume(kit.sid("fa"), "REPLY", "那就用项目复盘")
    assert after.observations[0].ok and after.observations[0].sources["t"] == "USER"


# =====================================================================================================================
# env helpers that read local time (a fixed zone for the test)
# =====================================================================================================================


@pytest.fixture
def shanghai(monkeypatch: pytest.MonkeyPatch):
    import time

    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param({"input": "1714523405"}, "2024-05-01 08:30:05", id="epoch-seconds"),
        pytest.param(
            {"input": "1714523405123", "outputPattern": "yyyy-MM-dd HH:mm:ss.SSS"},
            "2024-05-01 08:30:05.123",
            id="epoch-millis",
        ),
        pytest.param(
            {"input": "2024-05-01T08:30:05", "outputPattern": "yyyy-MM-dd'T'HH:mm:ssXXX Z"},
            "2024-05-01T08:30:05+08:00 +0800",
            id="local-zone",
        ),
    ],
)
async def test_format_datetime_reads_epochs_as_local_time(kit: Kit, shanghai: None, arguments: dict, expected: str):
    turn = await kit.send("x", call("builtin_env_format_datetime", arguments), say("stop"))
    obs = turn.observations[0]
    assert obs.ok and obs.content["result"] == expected, obs


async def test_generate_uuid_is_a_version_4_uuid(kit: Kit):
    turn = await kit.send("x", call("builtin_env_generate_uuid"), say("stop"))
    assert uuid.UUID(turn.observations[0].content["uuid"]).version == 4


async def test_a_list_output_of_scalars_named_by_scalar_gives_one_entity_per_item(kit: Kit):
    tags = {"type": "LIST", "fields": ["id"], "required": False, "entity": {"type": "tag", "scalar": "id"}}
    kit.with_args(outputs={"tags": tags})
    turn = await kit.send("x", put("tags", ["t-1", "t-2"]), finish(), session="ltags")
    assert turn.status == "DONE", turn.as_dict()
    assert {(e.type, e.id) for e in (await kit.session("ltags")).entities} == {("tag", "t-1"), ("tag", "t-2")}


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


@pytest.mark.parametrize(
    ("value", "message", "ok"),
    [
        ("季度", "看看季度Q1的", False),
        ("报告", "写A报告", False),
        ("10", "2010年的10月", True),
        ("ab", "abab ab", True),
    ],
    ids=["cjk-then-letter", "letter-then-cjk", "second-occurrence", "later-standalone"],
)
async def test_user_text_match_boundaries_per_the_issue_decision(kit: Kit, value: str, message: str, ok: bool):
    """Issue decision: the normalized value must occur with no ASCII letter or digit directly before or after it —
    for any value, and at any of its occurrences."""
    kit.with_args(t={"sources": ["USER"]})
    turn = await kit.send(message, call("probe", {"t": value}), say("stop"))
    assert codes(turn)[0] == (None if ok else ASK_USER), turn.observations[0]


async def test_node_output_source_matches_a_bound_input(kit: Kit):
    """§9: inputs are recorded as NODE_OUTPUT; §5.3 NODE_OUTPUT matches the node's data at the argument path."""
    contract = kit.with_args(outputs={"topic": SHARE}, topic={"sources": ["NODE_OUTPUT"]})
    contract["inputs"] = {"topic": {"from": "session.topic"}}
    kit.contract(contract)
    _, later = await kit.talk(
        ["主题工作", "找"], put("topic", "工作"), finish(), call("probe", {"topic": "工作"}), say("stop")
    )
    assert later.observations[0].ok and later.observations[0].sources["topic"] == "NODE_OUTPUT", later.observations


async def test_output_set_does_not_accept_a_failed_calls_evidence(kit: Kit):
    kit.with_args(outputs={"free": SHARE})
    turn = await kit.send(
        "x",
        lookup(mode="io"),
        call("builtin_evidence_get", {"evidenceId": "ev-nope"}),
        put("free", "disk gone", "EVIDENCE", "$EV", "error"),
        say("stop"),
    )
    assert codes(turn) == ["agent_runtime.40018", EVIDENCE_PATH_INVALID, SOURCE_REJECT]
