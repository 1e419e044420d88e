"""Routing between agents (contract spec §1.2, agent part 2): ``yard.agents(dir, model=…)`` and ``skillyard agent
run --agents-dir DIR``. One loaded agent is chosen without a model call; otherwise one call offers only
``builtin_route`` with each agent's mission (else identity); an unknown code is answered once with the valid codes,
then the first agent (folder order) is used with the reason recorded; a session stays with its agent; two folders
with one agent code are an error; folders that do not load are left out (``router.problems``)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.agent import AgentError
from skillyard.agent.router import AgentRouter
from skillyard.agent.store import AgentStore
from support.agent.crm import HANDLER, IDENTITY, OK_200, CrmAgent, node, plan
from support.agent.memo import Recorder
from support.agent.probes import call, finish, needs_db, no_traceback, say, skillyard_cli, write_files

pytestmark = needs_db

CRM_MISSION = "Find customers, take orders, report orders."
HELP_IDENTITY = "A help desk that answers questions about the product."

ORDER = {
    "target": "createOrder",
    "tools": {
        "createOrder": {
            "label": "Creating the order",
            "sideEffect": "WRITE",
            "args": {
                "customerId": {"sources": ["USER"], "label": "客户"},
                "item": {"sources": ["USER"], "label": "商品"},
            },
            "success": OK_200,
        }
    },
}


def help_agent(agents: Path, log: Path, folder: str = "help", code: str = "help", mission: str = "") -> Path:
    """A one-skill agent (``help.faq`` over the business tool ``lookupFaq``); no mission unless given."""
    root = agents / folder
    body = f"# Identity\n{HELP_IDENTITY}\n" + (f"# Mission\n{mission}\n" if mission else "")
    handler = textwrap.dedent(HANDLER).format(
        log=str(log), name="lookupFaq", result='{"code": 200, "data": {"answer": "restart it"}}'
    )
    contract = {"tools": {"lookupFaq": {"label": "Looking it up", "args": {"q": {"sources": ["MODEL"]}}}}}
    contract["tools"]["lookupFaq"]["success"] = OK_200
    write_files(
        {
            root / "AGENT.md": f"---\nagent_code: {code}\nagent_name: Help desk\nskills: [help.faq]\n---\n{body}",
            root / "skills" / "faq" / "SKILL.md": (
                "---\nname: faq\nskill_key: help.faq\ndescription: Answers product questions.\n"
                "tools: [lookupFaq]\n---\nAnswer from the FAQ.\n"
            ),
            root / "skills" / "faq" / "contract.json": json.dumps(contract),
            root / "skills" / "tools" / "lookupFaq" / "SKILL.md": "---\nname: lookupFaq\ndescription: the FAQ\n---\n",
            root / "skills" / "tools" / "lookupFaq" / "handler.py": handler,
            root / "skills" / "tools" / "lookupFaq" / "schema.json": json.dumps(
                {"type": "object", "properties": {"q": {"type": "string"}}}
            ),
        }
    )
    return root


@pytest.fixture
def crm(tmp_path: Path) -> CrmAgent:
    """``agents/crm`` (the crm agent, its order skill with a USER-sourced customer) and ``agents/help``."""
    env = CrmAgent(tmp_path / "agents")
    env.contract("order", ORDER)
    help_agent(env.root, env.log)
    return env


async def route(crm: CrmAgent, session: str, message: str, model, agents: Path | None = None, **kw):
    async with SkillYard() as yard:
        router = await yard.agents(agents or crm.root, model=model)
        assert isinstance(router, AgentRouter)
        turn = await router.send(crm.sid(session), message, identity=IDENTITY, **kw)
        return turn, router


async def stored_session(crm: CrmAgent, session: str):
    async with SkillYard() as yard:
        return await AgentStore(yard.database).load_session(crm.sid(session))


def route_answer(recorder: Recorder, index: int) -> dict:
    message = recorder.seen[index][0][-1]
    assert message["role"] == "tool", message
    return json.loads(message["content"])


async def test_the_model_routes_with_only_builtin_route_and_each_agents_mission_else_identity(crm: CrmAgent):
    recorder = Recorder(
        crm.script(call("builtin_route", {"agentCode": "help"}), call("lookupFaq", {"q": "crash"}), finish("restart"))
    )
    turn, router = await route(crm, "model", "the app crashes", recorder)
    assert turn.status == "DONE" and turn.reply == "restart", turn.as_dict()
    assert turn.routing == {"agent_code": "help", "source": "MODEL", "reason": None}
    assert turn.as_dict()["routing"] == turn.routing
    assert recorder.offered(0) == ["builtin_route"]
    offered = recorder.seen[0][1][0]["function"]["parameters"]["properties"]["agentCode"]
    assert offered["enum"] == ["crm", "help"]
    prompt = recorder.system(0)
    assert f"- crm: {CRM_MISSION}" in prompt and f"- help: {HELP_IDENTITY}" in prompt
    assert "A CRM clerk." not in prompt  # crm has a mission: its identity is not used for routing
    assert recorder.seen[0][0][-1] == {"role": "user", "content": "the app crashes"}
    assert "builtin_route" not in recorder.offered(1)  # the routed agent's own node
    assert [c["tool"] for c in crm.calls()] == ["lookupFaq"]
    assert router.problems == [] and set(router.agents) == {"crm", "help"}
    session = await stored_session(crm, "model")
    assert session.agent_code == "help" and session.routing == turn.routing


async def test_a_session_stays_with_its_agent_and_later_messages_make_no_routing_call(crm: CrmAgent):
    script = crm.script(
        call("builtin_route", {"agentCode": "help"}),
        call("lookupFaq", {"q": "crash"}),
        finish("restart"),
        call("lookupFaq", {"q": "again"}),
        finish("reinstall"),
    )
    first, _ = await route(crm, "stay", "the app crashes", script)
    assert first.routing["agent_code"] == "help" and first.status == "DONE"
    recorder = Recorder(script)
    second, _ = await route(crm, "stay", "it still crashes, and where is my order?", recorder)
    assert second.status == "DONE" and second.reply == "reinstall", second.as_dict()
    assert second.routing is None and "routing" not in second.as_dict()
    assert all("builtin_route" not in recorder.offered(i) for i in range(len(recorder.seen)))
    assert len(recorder.seen) == 2  # the help node's two steps, no routing call, no planning call
    assert [c["input"] for c in crm.calls("lookupFaq")] == [{"q": "crash"}, {"q": "again"}]
    assert (await stored_session(crm, "stay")).routing == first.routing


async def test_an_unknown_code_is_answered_once_with_the_valid_codes_then_the_corrected_route_is_used(crm: CrmAgent):
    recorder = Recorder(
        crm.script(
            call("builtin_route", {"agentCode": "sales"}),
            call("builtin_route", {"agentCode": "help"}),
            call("lookupFaq", {"q": "x"}),
            finish("ok"),
        )
    )
    turn, _ = await route(crm, "retry", "help me", recorder)
    assert turn.routing == {"agent_code": "help", "source": "MODEL", "reason": None}, turn.as_dict()
    answer = route_answer(recorder, 1)
    assert answer["ok"] is False and "'sales'" in answer["error"]
    assert "crm, help" in answer["next_step"] and "builtin_route" in answer["next_step"]
    assert recorder.offered(1) == ["builtin_route"]


@pytest.mark.parametrize(
    ("first", "second", "why"),
    [
        (call("builtin_route", {"agentCode": "sales"}), call("builtin_route", {"agentCode": "nope"}), "'nope'"),
        (say("I am not sure"), None, "did not call builtin_route"),
        (call("builtin_route", {}), call("builtin_route", "{not json"), "not a loaded agent"),
        (call("builtin_route", "[" * 5000), call("builtin_route", '{"a":' * 5000), "not a loaded agent"),  # too deep
        (call("builtin_route", {"agentCode": "sales"}), say("still unsure"), "'sales'"),
        (call("some_tool", {"agentCode": "help"}), None, "did not call builtin_route"),
    ],
)
async def test_no_valid_route_falls_back_to_the_first_agent_in_folder_order_with_the_reason(
    tmp_path: Path, first, second, why
):
    # folder order (sorted) puts help (a_help) before crm (b_crm), unlike code order
    env = CrmAgent(tmp_path / "agents", folder="b_crm")
    help_agent(env.root, env.log, folder="a_help")
    turns = [first] + ([second] if second is not None else []) + [call("lookupFaq", {"q": "x"}), finish("fell")]
    recorder = Recorder(env.script(*turns))
    turn, _ = await route(env, "fallback", "hmm", recorder)
    assert turn.routing["agent_code"] == "help" and turn.routing["source"] == "FALLBACK", turn.as_dict()
    assert why in turn.routing["reason"]
    assert turn.status == "DONE" and turn.reply == "fell"
    routing_calls = 2 if second is not None else 1
    assert all(recorder.offered(i) == ["builtin_route"] for i in range(routing_calls))
    assert "builtin_route" not in recorder.offered(routing_calls)
    assert (await stored_session(env, "fallback")).routing == turn.routing


async def test_one_loaded_agent_is_chosen_without_a_model_call_and_broken_folders_are_left_out(crm: CrmAgent):
    agents = crm.root / "one"
    help_agent(agents, crm.log)
    write_files(
        {
            agents / "bad_front" / "AGENT.md": "---\nagent_code: [unclosed\n---\n",
            agents / "no_code" / "AGENT.md": "---\nagent_name: Nobody\n---\n",
            agents / "inactive" / "AGENT.md": "---\nagent_code: old\nstatus: DISABLED\nskills: [help.faq]\n---\n",
            agents / "no_skill" / "AGENT.md": "---\nagent_code: empty\nskills: [nobody.home]\n---\n",
            agents / "not_an_agent" / "README.md": "no AGENT.md here\n",
            agents / "loose.md": "a file, not a folder\n",
        }
    )
    recorder = Recorder(crm.script(call("lookupFaq", {"q": "x"}), finish("single")))
    turn, router = await route(crm, "single", "help", recorder, agents=agents)
    assert turn.routing == {"agent_code": "help", "source": "SINGLE", "reason": "the only loaded agent"}
    assert turn.status == "DONE" and turn.reply == "single"
    assert len(recorder.seen) == 2 and "builtin_route" not in recorder.offered(0)
    assert list(router.agents) == ["help"]
    problems = "\n".join(router.problems)
    assert len(router.problems) == 4, router.problems
    for folder in ("bad_front", "no_code", "inactive", "no_skill"):
        assert folder in problems
    assert "'old'" in problems and "DISABLED" in problems and "'empty'" in problems and "no usable skill" in problems
    assert "not_an_agent" not in problems


async def test_two_folders_with_one_agent_code_are_an_error_and_nothing_is_stored(crm: CrmAgent):
    help_agent(crm.root, crm.log, folder="help_copy")
    script = crm.script(call("builtin_route", {"agentCode": "help"}), finish("x"))
    with pytest.raises(AgentError) as caught:
        await route(crm, "dup", "help", script)
    message = str(caught.value)
    assert "'help'" in message and str(crm.root / "help") in message and str(crm.root / "help_copy") in message
    assert "agent_code" in message
    assert await stored_session(crm, "dup") is None
    result = skillyard_cli(
        "agent", "run", "--agents-dir", str(crm.root), "--session", crm.sid("dup-cli"), "--message", "x",
        "--model", script,
    )  # fmt: skip
    assert result.returncode == 1 and "help_copy" in result.stderr and no_traceback(result), result
    assert await stored_session(crm, "dup-cli") is None
    assert crm.calls() == []


async def test_a_folder_without_usable_agents_is_an_error(tmp_path: Path):
    agents = tmp_path / "agents"
    write_files({agents / "x" / "AGENT.md": "---\nagent_code: x\nskills: [no.such]\n---\n"})
    async with SkillYard() as yard:
        with pytest.raises(AgentError, match="no usable agent"):
            await yard.agents(agents, model="script:unused.yaml")
        (tmp_path / "empty").mkdir()
        with pytest.raises(AgentError, match=r"AGENT\.md"):
            await yard.agents(tmp_path / "empty", model="script:unused.yaml")
        with pytest.raises(AgentError, match="not a folder"):
            await yard.agents(tmp_path / "missing", model="script:unused.yaml")


async def test_a_routed_session_suspends_and_resumes_with_the_agent_it_was_routed_to(crm: CrmAgent):
    script = crm.script(
        call("builtin_route", {"agentCode": "crm"}),
        plan(node("n1", "crm.order", "order a widget for c-7")),
        call("createOrder", {"customerId": "c-7", "item": "widget"}),
        call("builtin_node_approval", {"summary": "下单", "toolName": "createOrder"}),
        finish("ordered"),
    )
    asked, _ = await route(crm, "resume", "给 c-7 下单 widget", script)
    assert asked.status == "SUSPENDED" and asked.checkpoint["type"] == "APPROVAL", asked.as_dict()
    assert asked.routing["agent_code"] == "crm" and asked.routing["source"] == "MODEL"
    assert crm.calls() == []
    async with SkillYard() as yard:  # a new process
        router = await yard.agents(crm.root, model=script)
        done = await router.resume(crm.sid("resume"), "CONFIRM")
    assert done.status == "DONE" and done.reply == "ordered", done.as_dict()
    assert [c["input"] for c in crm.calls("createOrder")] == [{"customerId": "c-7", "item": "widget"}]


async def test_resume_of_an_unknown_or_foreign_session_is_a_clear_error(crm: CrmAgent, tmp_path: Path):
    other = tmp_path / "other"
    help_agent(other, crm.log, code="helper")
    script = crm.script(call("builtin_route", {"agentCode": "help"}), call("lookupFaq", {"q": "x"}), say("hm"))
    await route(crm, "foreign", "help", script)
    async with SkillYard() as yard:
        router = await yard.agents(other, model=script)
        with pytest.raises(AgentError, match="no agent session"):
            await router.resume(crm.sid("never"), "CONFIRM")
        with pytest.raises(AgentError, match=r"'help'.*does not hold"):
            await router.send(crm.sid("foreign"), "again")
        with pytest.raises(AgentError, match="must be text"):
            await router.send(crm.sid("fresh"), 42)  # type: ignore[arg-type]
        with pytest.raises(AgentError):
            await router.send("bad/../id", "x")


def test_agent_run_needs_exactly_one_of_agent_dir_agents_dir_and_agent_code(crm: CrmAgent):
    base = ["--session", crm.sid("usage"), "--message", "x", "--model", crm.script(say("x"))]
    for given in (
        [],
        [str(crm.dir), "--agents-dir", str(crm.root)],
        ["--agents-dir", str(crm.root), "--agent-code", "crm"],
        [str(crm.dir), "--agent-code", "crm"],
    ):
        result = skillyard_cli("agent", "run", *given, *base)
        assert result.returncode == 2, (given, result)
        assert "exactly one of AGENT_DIR, --agents-dir and --agent-code" in result.stderr
    missing = skillyard_cli("agent", "run", "--agents-dir", str(crm.root / "nope"), *base)
    assert missing.returncode == 2 and "nope" in missing.stderr and no_traceback(missing)
    assert crm.calls() == []


def test_cli_routes_a_new_session_and_resumes_it_through_the_stored_agent_folder(crm: CrmAgent):
    script = crm.script(
        call("builtin_route", {"agentCode": "crm"}),
        plan(node("n1", "crm.order", "order a widget")),
        call("createOrder", {"customerId": "c-7", "item": "widget"}),
        call("builtin_node_approval", {"summary": "下单", "toolName": "createOrder"}),
        finish("ordered"),
        call("listOrders", {}),
        finish("one order"),
    )
    sid = crm.sid("cli")
    args = ["--session", sid, "--context", json.dumps(IDENTITY)]
    ran = skillyard_cli(
        "agent", "run", "--agents-dir", str(crm.root), *args, "--message", "给 c-7 下单 widget", "--model", script,
        "--json",
    )  # fmt: skip
    assert ran.returncode == 0, ran
    turn = json.loads(ran.stdout)
    assert turn["status"] == "SUSPENDED" and turn["routing"] == {"agent_code": "crm", "source": "MODEL", "reason": None}
    assert turn["graph"]["plan_source"] == "MODEL"
    resumed = skillyard_cli("agent", "resume", "--session", sid, "--action", "CONFIRM", "--json")
    assert resumed.returncode == 0, resumed
    done = json.loads(resumed.stdout)
    assert done["status"] == "DONE" and done["reply"] == "ordered" and "routing" not in done
    assert [c["tool"] for c in crm.calls()] == ["createOrder"]
    # a later message of the session (no --model: the session's spec) goes to crm without a routing call
    again = skillyard_cli(
        "agent", "run", "--agents-dir", str(crm.root), "--session", sid, "--message", "报表", "--skill", "crm.report",
        "--json",
    )  # fmt: skip
    assert again.returncode == 0, (again.stdout, again.stderr)
    later = json.loads(again.stdout)
    assert later["status"] == "DONE" and later["reply"] == "one order" and "routing" not in later
    assert [c["tool"] for c in crm.calls()] == ["createOrder", "listOrders"]


def test_cli_prints_the_routed_turn_as_text(crm: CrmAgent):
    script = crm.script(call("builtin_route", {"agentCode": "help"}), call("lookupFaq", {"q": "x"}), finish("答案"))
    result = skillyard_cli(
        "agent", "run", "--agents-dir", str(crm.root), "--session", crm.sid("text"), "--message", "help",
        "--model", script,
    )  # fmt: skip
    assert result.returncode == 0, result
    assert "status: DONE" in result.stdout and "答案" in result.stdout and "lookupFaq: ok" in result.stdout


async def test_a_send_the_routed_agent_refuses_stores_no_session(crm: CrmAgent):
    script = crm.script(call("builtin_route", {"agentCode": "help"}), call("lookupFaq", {"q": "x"}), finish("ok"))
    with pytest.raises(AgentError, match=r"no contract skill 'crm\.order' in agent 'help'"):
        await route(crm, "refused", "下单", script, skill_key="crm.order")
    assert await stored_session(crm, "refused") is None
