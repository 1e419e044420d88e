"""The call itself and §14.4 (chain/invoke.py): business tools of every exec type, failure classes (timeout,
unreachable, IO, params, other), what the skill receives (idempotency key, identity, argv, request body)."""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from skillyard import SkillYard
from skillyard.agent.codes import ErrorCode
from skillyard.agent.state import EvidenceStatus
from skillyard.storage.tables import runs
from support.agent import docs as docs_kit
from support.agent import exec as exec_kit
from support.agent import keeper as keeper_kit
from support.agent.chain import BASE_CONTRACT
from support.agent.docs import APPROVAL_REQUIRED, ASK_SAVE, IDENTITY, SAVE, DocsAgent, approve, assert_coded, statuses
from support.agent.exec import (
    BUSINESS,
    IO_ERROR,
    TIMEOUT,
    ExecAgent,
    add,
    executions,
    follow_up,
    kind_params,
    notes_skill,
    obs,
)
from support.agent.keeper import CONTRACT, FREE, OK200, KeeperAgent
from support.agent.notes import NotesAgent, send_once
from support.agent.probes import call, codes, finish, needs_db, say

UNREACHABLE = "agent_runtime.40017"


INVALID_PARAMS = "agent_runtime.40014"


UNREACHABLE_EXEC = "agent_runtime.40017"


TOOL_ERROR = "agent_runtime.40029"


PENDING_VERIFY = "agent_runtime.40030"


APPROVAL_REQUIRED_EXEC = "agent_runtime.42221"


def free_port() -> int:
    """A port of 127.0.0.1 with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# mode → (code, read status, write status) for in-process skills
INPROC_CLASSES = {
    "timeout": (TIMEOUT, "FAILED", "UNKNOWN"),  # the wall clock (exec.timeout 1 s)
    "refused": (UNREACHABLE_EXEC, "FAILED", "FAILED"),  # ConnectionRefusedError
    "refused_sub": (UNREACHABLE_EXEC, "FAILED", "FAILED"),  # a subclass of ConnectionRefusedError
    "io": (IO_ERROR, "FAILED", "UNKNOWN"),  # FileNotFoundError
    "perm": (IO_ERROR, "FAILED", "UNKNOWN"),  # PermissionError
    "reset": (IO_ERROR, "FAILED", "UNKNOWN"),  # ConnectionResetError: an OSError, not a refusal
    "own_timeout": (IO_ERROR, "FAILED", "UNKNOWN"),  # docs: a TimeoutError the skill raised itself is IO
    "urlerror": (IO_ERROR, "FAILED", "UNKNOWN"),  # docs: URLError (family OSError) is IO
    "custom_os": (IO_ERROR, "FAILED", "UNKNOWN"),  # docs: the skill's own OSError subclass is IO
    "boom": (TOOL_ERROR, "FAILED", "UNKNOWN"),  # ValueError: any other exception
    "keyerror": (TOOL_ERROR, "FAILED", "UNKNOWN"),
}


TITLE_KEY = hashlib.sha256("季度总结".encode()).hexdigest()


SEEN_IDENTITY = {
    "user_id": "42",
    "org_id": "7",
    "actor_name": "Ada",
    "actor_id": "m-9",
    "org_name": "Acme",
    "actor_department_path": "/HQ/Sales/",
}


INLINE = """exec:
  primary:
    type: INLINE_SHELL
    command: |
      echo "{{\\"tool\\": \\"inlSave\\", \\"argv\\": \\"$*\\"}}" >> {log}
      case "$*" in *timeout*) sleep 5;; esac
      echo '{{"code": 200, "data": {{"id": "i1"}}}}'
  timeout: 1.5
"""


@needs_db
@pytest.mark.parametrize(
    ("arguments", "code", "ran"),
    [
        ({"mode": "timeout"}, "agent_runtime.40016", 1),
        ({"mode": "refused"}, "agent_runtime.40017", 1),
        ({"mode": "io"}, "agent_runtime.40018", 1),
        ({"mode": "boom"}, "agent_runtime.40029", 1),
        ({"count": "many"}, "agent_runtime.40014", 0),  # the platform's schema rejects it: the handler never runs
    ],
    ids=["TOOL_TIMEOUT", "TOOL_UNREACHABLE", "TOOL_IO_ERROR", "TOOL_ERROR", "MCP_INVALID_PARAMS"],
)
async def test_failed_reads(notes_agent: NotesAgent, arguments: dict[str, Any], code: str, ran: int):
    result = await send_once(notes_agent, "找笔记", call("findNotes", arguments), say("出错了"))
    assert codes(result) == [code]
    assert len(notes_agent.calls("findNotes")) == ran  # never retried
    assert [e["status"] for e in result.evidence] == ["FAILED"]
    assert result.status == "RUNNING"


@pytest.mark.parametrize("mode", ["urlerror", "custom_oserror", "remote_disconnected"])
@needs_db
async def test_any_oserror_subclass_is_an_io_error(keeper_agent: KeeperAgent, mode: str):
    """Issue: ``any other OSError → IO`` (urllib's URLError, http.client's RemoteDisconnected and a skill's own
    OSError subclasses are all OSErrors)."""
    result = await keeper_kit.send_once(keeper_agent, "找笔记", call("findNotes", {"mode": mode}), say("出错了"))
    assert len(keeper_agent.calls("findNotes")) == 1
    assert codes(result) == ["agent_runtime.40018"], result.observations[0]
    assert [e["status"] for e in result.evidence] == ["FAILED"]


@needs_db
async def test_a_connection_refused_subclass_is_unreachable(keeper_agent: KeeperAgent):
    result = await keeper_kit.send_once(
        keeper_agent, "找笔记", call("findNotes", {"mode": "custom_refused"}), say("出错了")
    )
    assert codes(result) == ["agent_runtime.40017"], result.observations[0]


@pytest.mark.spec("§14.4")
@pytest.mark.parametrize(
    ("mode", "code", "status", "again"),
    [
        ("io", "agent_runtime.40018", "UNKNOWN", "agent_runtime.40030"),
        ("boom", "agent_runtime.40029", "UNKNOWN", "agent_runtime.40030"),
        ("timeout", "agent_runtime.40016", "UNKNOWN", "agent_runtime.40030"),
        ("refused", "agent_runtime.40017", "FAILED", None),  # FAILED: the identical write simply runs again
        ("custom_oserror", "agent_runtime.40018", "UNKNOWN", "agent_runtime.40030"),
    ],
)
@needs_db
async def test_write_failure_classes_and_what_an_identical_write_meets(
    keeper_agent: KeeperAgent, mode, code, status, again
):
    """§14.4 for writes (confirm:false + bypass, so no approval is involved): uncertain → WRITE_PENDING_VERIFY."""
    result = await keeper_kit.send_once(
        keeper_agent, "写", call("riskyWrite", {"mode": mode}), call("riskyWrite", {"mode": mode}), say("stop")
    )
    assert codes(result)[0] == code
    assert result.evidence[0]["status"] == status
    if again is None:
        assert codes(result)[1] == code and len(keeper_agent.calls("riskyWrite")) == 2
    else:
        assert codes(result)[1] == again and len(keeper_agent.calls("riskyWrite")) == 1


@needs_db
async def test_an_http_write_that_times_out_after_the_request_is_unknown(
    keeper_agent: KeeperAgent, monkeypatch: pytest.MonkeyPatch
):
    from http.server import BaseHTTPRequestHandler

    from support.local_http import serve

    hits: list[str] = []

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            hits.append(self.path)
            import time

            time.sleep(1.5)  # the write is committed, the answer comes too late
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"code": 200}')

        def log_message(self, *args: Any) -> None:
            pass

    with serve(Slow) as base:
        folder = keeper_agent.dir / "skills" / "remoteSave"
        folder.mkdir()
        (folder / "SKILL.md").write_text(
            "---\nname: remoteSave\ndescription: d\nexec: {config: api.toml}\n---\nBody.\n", "utf-8"
        )
        (folder / "api.toml").write_text(f'[request]\nmethod = "POST"\nurl = "{base}/save"\ntimeout = 0.4\n', "utf-8")
        (folder / "schema.json").write_text(json.dumps({"type": "object", "properties": {"q": {}}}), "utf-8")
        contract = json.loads(json.dumps(CONTRACT))
        contract["tools"]["remoteSave"] = {
            "sideEffect": "WRITE",
            "confirm": False,
            "args": {"q": FREE},
            "success": OK200,
        }
        keeper_agent.contract(contract)
        md = keeper_agent.dir / "skills" / "keeper" / "SKILL.md"
        md.write_text(md.read_text(encoding="utf-8").replace("plainTool]", "plainTool, remoteSave]"), "utf-8")
        monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", "riskyWrite,stampNote,remoteSave")
        result = await keeper_kit.send_once(
            keeper_agent, "远程保存", call("remoteSave", {"q": "a"}), call("remoteSave", {"q": "a"}), say("stop")
        )
    assert codes(result) == ["agent_runtime.40016", "agent_runtime.40030"]
    assert [e["status"] for e in result.evidence] == ["UNKNOWN"] and hits == ["/save"]


@pytest.mark.spec("§14.4", "§14.2")
@needs_db
async def test_an_unreachable_write_is_failed_and_may_be_approved_again(docs_agent: DocsAgent):
    """§14.4: an unreachable service is a failure for writes too (not UNKNOWN): no verify, no WRITE_PENDING_VERIFY;
    the identical write goes through a new approval (§14.2 "失败 → 正常调用")."""
    script = docs_agent.script(
        call("saveDoc", {"title": "季度总结", "mode": "refused"}),
        approve("saveDoc"),
        call("saveDoc", SAVE),
        say("要再确认"),
        say("好"),
    )
    async with SkillYard() as yard:
        agent = await yard.agent(docs_agent.dir, model=script)
        await agent.send(docs_agent.sid("unr"), ASK_SAVE, identity=IDENTITY)
        after = await agent.resume(docs_agent.sid("unr"), "CONFIRM")
        assert docs_kit.codes(after) == [UNREACHABLE, APPROVAL_REQUIRED] and statuses(after, "saveDoc") == ["FAILED"]
        later = await agent.send(docs_agent.sid("unr"), "再试试", identity=IDENTITY)
    assert docs_agent.calls("checkDoc") == [] and later.status == "RUNNING"
    assert_coded(after)


@needs_db
@pytest.mark.parametrize("status", [503])
async def test_http_status_error_without_exception_is_a_business_failure(exec_agent: ExecAgent, server, status: int):
    """http-skills.md: a status outside 2xx is an envelope with `status`, `body_excerpt`, `error_type` and no
    exception_type / timed_out; issue: such a failure envelope is a business failure (SUCCESS, businessOk false,
    TOOL_BUSINESS_FAILED) — and it grounds a bare question; one request, never repeated."""
    srv, base = server
    tool = add(exec_agent, "http", "httpFind", base)
    exec_agent.read(tool)
    turn = await exec_agent.send(call(tool, {"mode": f"s{status}"}), follow_up(), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == BUSINESS, o
    assert exec_kit.statuses(turn, tool) == [("SUCCESS", False)]
    assert turn.status == "SUSPENDED", turn.as_dict()
    assert len(srv.of(tool)) == 1


@needs_db
@pytest.mark.parametrize("kind", kind_params(["cli"]))
async def test_subprocess_nonzero_exit_is_a_business_failure(exec_agent: ExecAgent, server, kind: str):
    """authoring.md: a subprocess that exits non-zero gives `exit_code` and `stderr_tail`, no exception_type and no
    timed_out; issue: a failure envelope without exception or timeout is a business failure, reads and writes alike."""
    srv, base = server
    tool = add(exec_agent, kind, f"{kind}Save", base)
    exec_agent.write(tool, error=None)
    mode = "io" if kind == "cli" else "crash"
    turn = await exec_agent.send(call(tool, {"mode": mode, "title": "季度总结"}), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == BUSINESS, o
    assert exec_kit.statuses(turn, tool) == [("SUCCESS", False)]
    assert executions(exec_agent, srv, kind, tool) == 1


@pytest.mark.spec("§14.4")
@needs_db
@pytest.mark.parametrize("mode", ["timeout", "refused", "refused_sub", "io", "own_timeout", "custom_os", "boom"])
async def test_inprocess_read_failure_classes(exec_agent: ExecAgent, mode: str):
    """Issue §14.4 decision, in-process async skill, READ: the class decides the code; reads are FAILED; one run."""
    code, read_status, _ = INPROC_CLASSES[mode]
    tool = add(exec_agent, "py", "pyFind")
    exec_agent.read(tool)
    turn = await exec_agent.send(call(tool, {"mode": mode}), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == code, o
    assert [s for s, _ in exec_kit.statuses(turn, tool)] == [read_status]
    assert len(exec_agent.calls(tool)) == 1
    exec_kit.assert_coded(turn)


@pytest.mark.spec("§14.4")
@needs_db
@pytest.mark.parametrize("mode", ["timeout", "refused", "perm", "boom"])
async def test_inprocess_write_failure_classes(exec_agent: ExecAgent, mode: str):
    """Issue §14.4 decision, in-process async skill, WRITE: timeout / IO / unknown error → UNKNOWN; unreachable →
    FAILED; exactly one execution (writes are never retried)."""
    code, _, write_status = INPROC_CLASSES[mode]
    tool = add(exec_agent, "py", "pySave")
    exec_agent.write(tool)
    turn = await exec_agent.send(call(tool, {"mode": mode, "title": "季度总结"}), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == code, o
    assert [s for s, _ in exec_kit.statuses(turn, tool)] == [write_status]
    assert len(exec_agent.calls(tool)) == 1
    exec_kit.assert_coded(turn)


@needs_db
async def test_a_skill_raising_cancelled_error_is_an_unknown_error_not_a_crashed_turn(exec_agent: ExecAgent):
    """Issue: "any other exception → unknown error", writes UNKNOWN. A skill whose own awaited work was cancelled
    raises asyncio.CancelledError (an exception the skill raised; the turn itself was not cancelled): the model must
    get TOOL_ERROR and the write stays UNKNOWN, instead of the turn failing with the exception."""
    tool = add(exec_agent, "py", "pySave")
    exec_agent.write(tool)
    turn = await exec_agent.send(call(tool, {"mode": "cancelled", "title": "季度总结"}), exec_kit.say())
    assert [o.code for o in obs(turn, tool)] == [TOOL_ERROR]
    assert [s for s, _ in exec_kit.statuses(turn, tool)] == ["UNKNOWN"]
    assert len(exec_agent.calls(tool)) == 1


@needs_db
@pytest.mark.parametrize("mode,code", [("io", IO_ERROR)])
async def test_sync_inprocess_handler_failure_classes(exec_agent: ExecAgent, mode: str, code: str):
    """authoring.md: a plain `def` entry runs in a worker thread; its exceptions are classified the same way."""
    tool = "pySync"
    exec_agent.inproc(tool, sync=True)
    exec_agent.write(tool)
    turn = await exec_agent.send(call(tool, {"mode": mode, "title": "季度总结"}), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == code, o
    expected = "FAILED" if code == UNREACHABLE_EXEC else "UNKNOWN"
    assert [s for s, _ in exec_kit.statuses(turn, tool)] == [expected]
    assert len(exec_agent.calls(tool)) == 1


@needs_db
@pytest.mark.parametrize("kind", kind_params(["rb", "http"]))
async def test_wall_clock_timeout_of_a_read_is_timeout_failed(exec_agent: ExecAgent, server, kind: str):
    """Issue: wall-clock timeout → TIMEOUT; reads fail. Subprocess skills with exec.timeout 1.5 s sleeping 5 s; the
    HTTP skill with exec.timeout 1 s against a server that answers after 1.6 s (request timeout 5 s)."""
    srv, base = server
    kw: dict[str, Any] = {"wall": 1} if kind == "http" else {}
    tool = add(exec_agent, kind, f"{kind}Find", base, **kw)
    exec_agent.read(tool)
    turn = await exec_agent.send(call(tool, {"mode": "timeout"}), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == TIMEOUT, o
    assert [s for s, _ in exec_kit.statuses(turn, tool)] == ["FAILED"]
    assert executions(exec_agent, srv, kind, tool) == 1


@pytest.mark.spec("§14.2", "§14.3")
@needs_db
@pytest.mark.parametrize("kind", kind_params(["py", "node", "http"]))
async def test_timed_out_write_is_unknown_and_never_run_again(exec_agent: ExecAgent, server, kind: str):
    """Issue: timeout → a write becomes UNKNOWN; writes are never retried; §14.2 an identical write with an
    uncertain result is refused (WRITE_PENDING_VERIFY) without running; §14.3 the node cannot finish
    (FINISH_OPEN_EVIDENCE)."""
    srv, base = server
    kw: dict[str, Any] = {"wall": 1} if kind == "http" else {}
    tool = add(exec_agent, kind, f"{kind}Save", base, **kw)
    exec_agent.write(tool)
    args = {"mode": "timeout", "title": "季度总结"}
    turn = await exec_agent.send(call(tool, args), call(tool, args), finish("已保存"), exec_kit.say())
    assert [o.code for o in obs(turn, tool)] == [TIMEOUT, PENDING_VERIFY], turn.observations
    assert [s for s, _ in exec_kit.statuses(turn, tool)] == ["UNKNOWN"]
    assert [o.code for o in obs(turn, "builtin_node_finish")] == ["agent_runtime.42251"]
    assert executions(exec_agent, srv, kind, tool) == 1
    exec_kit.assert_coded(turn)


@needs_db
async def test_http_request_timeout_of_a_write_is_unknown(exec_agent: ExecAgent, server):
    """The same for a write: UNKNOWN, one request, the identical second call is WRITE_PENDING_VERIFY."""
    srv, base = server
    tool = add(exec_agent, "http", "httpSave", base, timeout=0.5)
    exec_agent.write(tool)
    args = {"mode": "slow", "title": "季度总结"}
    turn = await exec_agent.send(call(tool, args), call(tool, args), exec_kit.say())
    assert [o.code for o in obs(turn, tool)] == [TIMEOUT, PENDING_VERIFY]
    assert [s for s, _ in exec_kit.statuses(turn, tool)] == ["UNKNOWN"]
    assert len(srv.of(tool)) == 1


@pytest.mark.spec("§14.4")
@needs_db
@pytest.mark.parametrize("side", ["read", "write"])
async def test_http_refused_connection_is_unreachable_and_failed(exec_agent: ExecAgent, side: str):
    """Issue: an HTTP skill's refused connection → UNREACHABLE; FAILED for reads and writes (§14.4 服务不可达)."""
    tool = "httpGone"
    exec_agent.http(tool, "", url=f"http://127.0.0.1:{free_port()}/gone")
    exec_agent.read(tool) if side == "read" else exec_agent.write(tool)
    turn = await exec_agent.send(call(tool, {"mode": "ok", "title": "季度总结"}), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == UNREACHABLE_EXEC, o
    assert [s for s, _ in exec_kit.statuses(turn, tool)] == ["FAILED"]
    exec_kit.assert_coded(turn)


@pytest.mark.spec("§14.4", "§14.2")
@needs_db
async def test_an_unreachable_write_is_failed_so_it_may_run_again(exec_agent: ExecAgent):
    """§14.4 unreachable writes are FAILED (not uncertain) → §14.2 "失败 → 正常调用": the model's second identical
    call runs again (one execution per model call, none automatic)."""
    tool = add(exec_agent, "py", "pySave")
    exec_agent.write(tool)
    args = {"mode": "refused", "title": "季度总结"}
    turn = await exec_agent.send(call(tool, args), call(tool, args), exec_kit.say())
    assert [o.code for o in obs(turn, tool)] == [UNREACHABLE_EXEC, UNREACHABLE_EXEC]
    assert len(exec_agent.calls(tool)) == 2


@needs_db
@pytest.mark.parametrize("kind", kind_params(["cli"]))
async def test_subprocess_envelope_reporting_a_refused_connection_is_unreachable(
    exec_agent: ExecAgent, server, kind: str
):
    """Issue: the class is read from the envelope's `exception_type`: a CLI skill that catches the refusal and
    reports `exception_type: ConnectionRefusedError` in its envelope → UNREACHABLE, FAILED."""
    _srv, base = server
    tool = add(exec_agent, kind, "cliSave", base)
    exec_agent.write(tool)
    turn = await exec_agent.send(call(tool, {"mode": "report_refused", "title": "季度总结"}), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == UNREACHABLE_EXEC, o
    assert [s for s, _ in exec_kit.statuses(turn, tool)] == ["FAILED"]


@needs_db
@pytest.mark.parametrize(
    "kind,side", [("py", "read"), ("py", "write"), ("sh", "write"), ("http", "read")], ids=lambda v: str(v)
)
async def test_schema_rejection_is_a_params_error_and_failed(exec_agent: ExecAgent, server, kind: str, side: str):
    """Issue: a schema rejection of the input → params error (MCP_INVALID_PARAMS), FAILED for reads and writes.
    `count` is declared an integer; the model sends text (the arg policy checks only `required`, so the platform's
    input validation rejects it). The skill never runs."""
    srv, base = server
    tool = add(exec_agent, kind, f"{kind}Tool", base)
    exec_agent.read(tool) if side == "read" else exec_agent.write(tool)
    turn = await exec_agent.send(call(tool, {"mode": "ok", "title": "季度总结", "count": "many"}), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == INVALID_PARAMS, o
    assert [s for s, _ in exec_kit.statuses(turn, tool)] == ["FAILED"]
    assert executions(exec_agent, srv, kind, tool) == 0
    exec_kit.assert_coded(turn)


@needs_db
async def test_a_write_rejected_by_the_schema_runs_once_corrected(exec_agent: ExecAgent):
    """A params error is certain (FAILED), so the corrected write is not blocked and runs exactly once."""
    tool = add(exec_agent, "sh", "shSave")
    exec_agent.write(tool)
    turn = await exec_agent.send(
        call(tool, {"mode": "ok", "title": "季度总结", "count": "many"}),
        call(tool, {"mode": "ok", "title": "季度总结", "count": 3}),
        finish("已保存"),
    )
    assert [o.code for o in obs(turn, tool)] == [INVALID_PARAMS, None]
    assert [s for s, _ in exec_kit.statuses(turn, tool)] == ["FAILED", "SUCCESS"]
    assert turn.status == "DONE"
    assert len(exec_agent.calls(tool)) == 1 and exec_agent.calls(tool)[0]["input"]["count"] == 3


@needs_db
async def test_http_url_placeholder_without_input_is_a_params_error(exec_agent: ExecAgent, server):
    """http-skills.md: a URL placeholder without an input field answers `need_param` + recoverable before any
    request; the docs classify that envelope as a params error → MCP_INVALID_PARAMS, FAILED, no request."""
    srv, base = server
    tool = "httpDoc"
    schema = {"type": "object", "properties": {"docId": {"type": "string"}, "mode": {"type": "string"}}}
    exec_agent.http(tool, base, url=base + "/httpDoc/{docId}", schema=schema)
    exec_agent.read(tool, args={"docId": exec_kit.FREE, "mode": exec_kit.FREE})
    turn = await exec_agent.send(call(tool, {"mode": "ok"}), exec_kit.say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == INVALID_PARAMS, o
    assert [s for s, _ in exec_kit.statuses(turn, tool)] == ["FAILED"]
    assert srv.of(tool) == []


@needs_db
@pytest.mark.parametrize("kind", kind_params(["py", "cli", "go"]))
async def test_a_write_receives_the_idempotency_key_in_its_runtime_context(exec_agent: ExecAgent, server, kind: str):
    """Issue: the idempotency key is passed as runtime_context["idempotency_key"]; docs: the hex SHA-256 of the key
    paths' values (`title` only here). Subprocess skills see the runtime context as SKILL_CONTEXT (authoring.md:
    the JSON-serializable part, no `_` keys), so the key is there too."""
    _srv, base = server
    tool = add(exec_agent, kind, f"{kind}Save", base)
    exec_agent.write(tool)
    turn = await exec_agent.send(call(tool, {"mode": "ok", "title": "季度总结"}), finish("已保存"))
    assert turn.status == "DONE", turn.as_dict()
    [row] = exec_agent.calls(tool)
    assert row["ctx"].get("idempotency_key") == TITLE_KEY, row["ctx"]


@pytest.mark.spec("§11")
@needs_db
@pytest.mark.parametrize("kind", kind_params(["py", "cli"]))
async def test_the_caller_identity_reaches_the_skill(exec_agent: ExecAgent, server, kind: str):
    """Issue §11: identity comes from runtime_context; docs: the call's context is identity + session_id. In-process
    skills get it as the context argument, subprocess skills as SKILL_CONTEXT (extra keys such as org_name kept)."""
    _srv, base = server
    tool = add(exec_agent, kind, f"{kind}Find", base)
    exec_agent.read(tool)
    sid = exec_agent.sid("who")
    await exec_agent.send(call(tool, {"mode": "ok"}), exec_kit.say(), sid=sid)
    [row] = exec_agent.calls(tool)
    seen = {k: row["ctx"].get(k) for k in SEEN_IDENTITY}
    assert seen == SEEN_IDENTITY
    assert row["ctx"].get("session_id") == sid


@needs_db
@pytest.mark.parametrize("kind", kind_params(["sh"]))
async def test_subprocess_context_has_no_platform_internals(exec_agent: ExecAgent, server, kind: str):
    """authoring.md: SKILL_CONTEXT has no `_`-prefixed keys and no db / db_factory / call_skill / abort_signal /
    channel_registry / request."""
    _srv, base = server
    tool = add(exec_agent, kind, f"{kind}Save", base)
    exec_agent.write(tool)
    await exec_agent.send(call(tool, {"mode": "ok", "title": "季度总结"}), exec_kit.say())
    [row] = exec_agent.calls(tool)
    ctx = row["ctx"]
    assert not [k for k in ctx if k.startswith("_")], ctx
    assert not {"db", "db_factory", "call_skill", "abort_signal", "channel_registry", "request"} & set(ctx), ctx


@pytest.mark.spec("§11")
@needs_db
async def test_platform_bound_argument_reaches_a_shell_skill_on_argv_as_a_string(exec_agent: ExecAgent):
    """§11 ids stay strings; authoring.md: each input field is a `--key value` flag and in SKILL_INPUT. `owner`
    (from platform.userId) overrides the model's value."""
    tool = add(exec_agent, "sh", "shSave")
    exec_agent.write(tool)
    await exec_agent.send(call(tool, {"mode": "ok", "title": "季度总结", "owner": "999"}), exec_kit.say())
    [row] = exec_agent.calls(tool)
    argv = row["argv"]
    assert argv[argv.index("--owner") + 1] == "42", argv
    assert "999" not in argv
    assert row["input"]["owner"] == "42" and row["input"]["title"] == "季度总结"


@needs_db
async def test_an_http_write_sends_exactly_the_bound_arguments(exec_agent: ExecAgent, server):
    """http-skills.md: the input fields go to the URL, the query, then the JSON body; the runtime context reaches an
    HTTP skill only through `${VAR}` in headers (configs / declared env). So the body is the bound arguments
    (owner from platform.userId), no identity or idempotency key leaks into it; one request."""
    srv, base = server
    tool = add(exec_agent, "http", "httpSave", base)
    exec_agent.write(tool)
    turn = await exec_agent.send(call(tool, {"mode": "ok", "title": "季度总结"}), finish("已保存"))
    assert turn.status == "DONE", turn.as_dict()
    [hit] = srv.of(tool)
    assert hit["path"] == "/httpSave/ok" and hit["method"] == "POST"
    assert json.loads(hit["body"]) == {"title": "季度总结", "owner": "42"}
    assert TITLE_KEY not in json.dumps(hit["headers"])


@pytest.mark.spec("§14.1")
@needs_db
async def test_approved_subprocess_write_runs_once_with_its_key(exec_agent: ExecAgent):
    """§14.1: APPROVAL_REQUIRED runs nothing; after approval + CONFIRM the shell write runs exactly once with the
    approved arguments and its idempotency key in SKILL_CONTEXT."""
    tool = add(exec_agent, "sh", "shSave")
    exec_agent.write(tool, confirm=True)
    sid = exec_agent.sid("appr")
    script = [
        call(tool, {"mode": "ok", "title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存订单", "toolName": tool}),
        finish("已保存"),
    ]
    first = await exec_agent.send(*script, sid=sid)
    assert [o.code for o in obs(first, tool)] == [APPROVAL_REQUIRED_EXEC]
    assert first.checkpoint and first.checkpoint["type"] == "APPROVAL" and exec_agent.calls() == []
    exec_agent.build()
    async with SkillYard() as yard:
        agent = await yard.agent(exec_agent.dir, model=exec_agent.script(*script))
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    [row] = exec_agent.calls(tool)
    assert row["ctx"].get("idempotency_key") == TITLE_KEY and row["input"]["owner"] == "42"


@needs_db
async def test_inline_shell_write_success_then_timeout(exec_agent: ExecAgent):
    """authoring.md INLINE_SHELL (`bash -c command`, input as argv): a success is SUCCESS; a wall-clock timeout of the
    write is TOOL_TIMEOUT / UNKNOWN and the identical call is WRITE_PENDING_VERIFY; one execution per model call."""
    exec_agent._skill("inlSave", INLINE.format(log=exec_agent.log), {}, None)
    exec_agent.write("inlSave")
    turn = await exec_agent.send(
        call("inlSave", {"mode": "ok", "title": "甲"}),
        call("inlSave", {"mode": "timeout", "title": "乙"}),
        call("inlSave", {"mode": "timeout", "title": "乙"}),
        exec_kit.say(),
    )
    assert [o.code for o in obs(turn, "inlSave")] == [None, TIMEOUT, PENDING_VERIFY], turn.observations
    assert [s for s, _ in exec_kit.statuses(turn, "inlSave")] == ["SUCCESS", "UNKNOWN"]
    assert len(exec_agent.calls("inlSave")) == 2


@needs_db
@pytest.mark.parametrize(
    "kind,mode,code",
    [
        ("py", "io", IO_ERROR),
        ("py", "nonretriable", BUSINESS),
        ("http", "s503", BUSINESS),
    ],
)
async def test_repeated_failing_reads_all_run_no_core_ban_or_loop_detection(
    exec_agent: ExecAgent, server, kind: str, mode: str, code: str
):
    """Issue: only real executions are skill runs; the core's per-turn failure budget (ban after two failures, or one
    non_retriable; loop_detected at the 3rd identical call) does not apply inside the contract runtime, and the
    fingerprint counts only successful calls. Three identical failing reads: three real executions, same code."""
    srv, base = server
    tool = add(exec_agent, kind, f"{kind}Find", base)
    exec_agent.read(tool)
    args = {"mode": mode}
    turn = await exec_agent.send(call(tool, args), call(tool, args), call(tool, args), exec_kit.say())
    assert [o.code for o in obs(turn, tool)] == [code, code, code], turn.observations
    assert executions(exec_agent, srv, kind, tool) == 3


@needs_db
async def test_cli_subcommand_read_runs_with_the_subcommand_first_on_argv(exec_agent: ExecAgent):
    """authoring.md: running a fan-out tool name restores `_subcommand`; a subprocess gets it as its first
    argument, then the flags; `_subcommand` never becomes a flag. The read succeeds through the chain."""
    notes_skill(exec_agent)
    turn = await exec_agent.send(call("notes__list", {"mode": "ok"}), finish("查到了"))
    [o] = obs(turn, "notes__list")
    assert o.ok and o.code is None, o
    assert turn.status == "DONE" and exec_kit.statuses(turn, "notes__list") == [("SUCCESS", True)]
    [row] = exec_agent.calls("notes")
    assert row["argv"][0] == "list" and row["cmd"] == "list", row
    assert "--_subcommand" not in row["argv"]


@needs_db
async def test_cli_subcommand_write_gets_its_flags_and_idempotency_key(exec_agent: ExecAgent):
    """A fanned-out WRITE (`notes__add`): argv `add --text …`, and the idempotency key (SHA-256 of `text`) in
    SKILL_CONTEXT; evidence SUCCESS; one execution."""
    notes_skill(exec_agent)
    turn = await exec_agent.send(call("notes__add", {"text": "买牛奶"}), finish("记下了"))
    assert turn.status == "DONE", turn.as_dict()
    [row] = exec_agent.calls("notes")
    assert row["argv"][:3] == ["add", "--text", "买牛奶"], row["argv"]
    assert row["ctx"].get("idempotency_key") == hashlib.sha256("买牛奶".encode()).hexdigest()


@needs_db
async def test_cli_subcommand_write_timeout_is_unknown_and_not_rerun(exec_agent: ExecAgent):
    """A fanned-out subprocess WRITE that times out: TOOL_TIMEOUT, UNKNOWN, the identical call WRITE_PENDING_VERIFY;
    one execution."""
    notes_skill(exec_agent)
    args = {"text": "买牛奶", "mode": "timeout"}
    turn = await exec_agent.send(call("notes__add", args), call("notes__add", args), exec_kit.say())
    assert [o.code for o in obs(turn, "notes__add")] == [TIMEOUT, PENDING_VERIFY]
    assert [s for s, _ in exec_kit.statuses(turn, "notes__add")] == ["UNKNOWN"]
    assert len(exec_agent.calls("notes")) == 1


@needs_db
async def test_cli_subcommand_business_failure_and_empty_list(exec_agent: ExecAgent):
    """Business failure of a subcommand write (error.code E42, SUCCESS / businessOk false) and an empty subcommand
    read (a success that grounds a bare question)."""
    notes_skill(exec_agent)
    turn = await exec_agent.send(
        call("notes__add", {"text": "买牛奶", "mode": "business"}), call("notes__list", {"mode": "empty"}), follow_up()
    )
    assert [o.code for o in obs(turn, "notes__add")] == ["E42"]
    assert exec_kit.statuses(turn, "notes__add") == [("SUCCESS", False)]
    assert exec_kit.statuses(turn, "notes__list") == [("SUCCESS", True)]
    assert turn.checkpoint and turn.checkpoint["type"] == "FOLLOW_UP", turn.as_dict()


@needs_db
async def test_inprocess_subcommand_tool_sees_its_subcommand_and_key(exec_agent: ExecAgent):
    """authoring.md: running a fan-out tool name restores input["_subcommand"] — an in-process handler sees it; the
    write gets its idempotency key."""
    notes_skill(exec_agent, "py")
    turn = await exec_agent.send(
        call("memo__list", {"mode": "ok"}), call("memo__add", {"text": "买牛奶"}), finish("好")
    )
    assert turn.status == "DONE", turn.as_dict()
    rows = exec_agent.calls("memo")
    assert [r["input"].get("_subcommand") for r in rows] == ["list", "add"], rows
    assert rows[0]["ctx"]["idempotency_key"] is None
    assert rows[1]["ctx"]["idempotency_key"] == hashlib.sha256("买牛奶".encode()).hexdigest()


@pytest.mark.spec("§14.4")
@needs_db
@pytest.mark.parametrize("mode,code,status", [("io", IO_ERROR, "UNKNOWN")])
async def test_inprocess_subcommand_write_failure_classes(exec_agent: ExecAgent, mode: str, code: str, status: str):
    """§14.4 for a fanned-out in-process write: timeout / PermissionError → UNKNOWN; one execution."""
    notes_skill(exec_agent, "py")
    turn = await exec_agent.send(call("memo__add", {"text": "买牛奶", "mode": mode}), exec_kit.say())
    assert [o.code for o in obs(turn, "memo__add")] == [code]
    assert [s for s, _ in exec_kit.statuses(turn, "memo__add")] == [status]
    assert len(exec_agent.calls("memo")) == 1


@needs_db
async def test_http_subcommand_tool_never_sends_the_subcommand(exec_agent: ExecAgent, server):
    """http-skills.md: fields starting with `_` (such as `_subcommand`) are never sent: the fanned-out HTTP write
    posts exactly its own fields."""
    srv, base = server
    notes_skill(exec_agent, "http", base)
    turn = await exec_agent.send(call("notes__add", {"text": "买牛奶"}), finish("记下了"))
    assert turn.status == "DONE", turn.as_dict()
    [hit] = srv.of("notes")
    assert json.loads(hit["body"]) == {"text": "买牛奶"}


@needs_db
async def test_a_model_supplied_subcommand_cannot_turn_a_read_tool_into_the_write(exec_agent: ExecAgent):
    """authoring.md: running a fan-out tool name *restores* `_subcommand` from the name. The model calling the read
    `notes__list` with `_subcommand: "add"` must not run `add` (a WRITE the contract gates): the skill runs `list`
    or the call is refused — never `add` without approval."""
    notes_skill(exec_agent)
    exec_agent.tools["notes__add"]["confirm"] = True  # the write needs approval
    turn = await exec_agent.send(call("notes__list", {"_subcommand": "add", "text": "买牛奶"}), exec_kit.say())
    ran = [r["cmd"] for r in exec_agent.calls("notes")]
    assert "add" not in ran, (ran, turn.observations)


@pytest.mark.parametrize(
    ("mode", "code", "read_status", "write_status"),
    [
        ("io", ErrorCode.TOOL_IO_ERROR, "FAILED", "UNKNOWN"),
        ("refused", ErrorCode.TOOL_UNREACHABLE, "FAILED", "FAILED"),
        ("boom", ErrorCode.TOOL_ERROR, "FAILED", "UNKNOWN"),
        ("timeout", ErrorCode.TOOL_TIMEOUT, "FAILED", "UNKNOWN"),
    ],
)
async def test_failure_classes(build, mode, code, read_status, write_status):
    h = await build(user_messages=["保存 季度总结"])
    read = await h.call("findNotes", {"mode": mode})
    assert read.code == code.value and read.evidence_id
    assert h.ctx.evidence[-1].status.value == read_status
    write = await h.call("saveNote", {"title": "季度总结", "mode": mode}, approved=True)
    assert write.code == code.value
    assert h.ctx.evidence[-1].status.value == write_status
    assert len(h.calls()) == 2  # each ran exactly once: no automatic retry


async def test_http_skill_with_a_refused_connection_is_unreachable(build):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def http_tool(root: Path, log: Path) -> None:
        folder = root / "remoteNote"
        folder.mkdir()
        (folder / "SKILL.md").write_text(
            "---\nname: remoteNote\ndescription: d\nexec: {config: api.toml}\n---\nBody.\n", "utf-8"
        )
        (folder / "api.toml").write_text(f'[request]\nurl = "http://127.0.0.1:{port}/x"\n', "utf-8")

    contract = json.loads(json.dumps(BASE_CONTRACT))
    contract["tools"]["remoteNote"] = {"sideEffect": "WRITE", "success": {"path": "code", "op": "EQ", "value": 200}}
    h = await build(contract, tools=["saveNote", "findNotes", "remoteNote"], extra_skills=http_tool)
    obs = await h.call("remoteNote", {}, approved=True)
    assert obs.code == ErrorCode.TOOL_UNREACHABLE.value == "agent_runtime.40017"
    assert h.ctx.evidence[0].status is EvidenceStatus.FAILED


async def test_platform_schema_rejection_is_a_params_error_and_runs_nothing(build):
    h = await build(user_messages=["保存 季度总结"])
    read = await h.call("findNotes", {"count": "many"})
    assert read.code == ErrorCode.MCP_INVALID_PARAMS.value and "count" in read.content
    assert h.ctx.evidence[0].status is EvidenceStatus.FAILED
    write = await h.call("saveNote", {"title": "季度总结", "lines": "oops"}, approved=True)
    assert write.code == ErrorCode.MCP_INVALID_PARAMS.value
    assert h.ctx.evidence[1].status is EvidenceStatus.FAILED
    assert h.calls() == []


async def test_only_real_executions_are_skill_runs(build, db_env):
    h = await build()
    sessions = await h.yard.database.session_factory()
    async with sessions() as session:  # the session database holds the runs of earlier tests too
        before = (await session.execute(select(func.coalesce(func.max(runs.c.id), 0)))).scalar_one()
    assert (await h.call("findNotes", "not json")).code == ErrorCode.ARG_JSON_INVALID.value
    assert (await h.call("otherTool", {})).code == ErrorCode.CATALOG_DENIED.value
    assert (await h.call("saveNote", {})).code == ErrorCode.ARG_REJECTED.value
    assert (await h.call("findNotes", {})).ok
    await h.yard.runlog.flush()
    async with sessions() as session:
        query = select(runs.c.skill, func.count()).where(runs.c.id > before).group_by(runs.c.skill)
        rows = (await session.execute(query)).all()
    assert dict(rows) == {"findNotes": 1}
