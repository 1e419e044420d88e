"""Review probes, round 6, for issue 5 (the contract-driven agent runtime, part 1): how the tool-call chain calls
business tools of EVERY exec type and classifies what comes back.

Covered, for in-process async Python skills, CLI subprocess skills (Python, shell, node, ruby, go) and HTTP skills
described by a TOML file against a real server on 127.0.0.1:

* success, a business failure envelope and empty results (with and without a `success` spec) through the chain:
  the observation (ok, code, next step) and the evidence (status, businessOk, `empty`);
* the §14.4 failure classes: wall-clock timeout, refused connection, other OSError, schema rejection of the input,
  other exceptions, HTTP status errors — for a READ and for a WRITE tool, with the write's UNKNOWN settled by a
  verify tool or a VERIFY checkpoint;
* what the skill sees: runtime_context["idempotency_key"], the caller identity (user_id, org_id …), and for
  subprocess/HTTP skills what the docs say reaches them (SKILL_CONTEXT, argv, the request body);
* writes are never retried: every probe counts real executions (a line the skill appends to a log file, or a hit
  on the HTTP server);
* subcommand skills (`cli_commands`, fanned out as `skill__sub`) as business tools.

Written black-box from the issue text ("Decisions where the spec is ambiguous"), skill-contract-spec.md §6, §13,
§14, §17, docs/agents.md, docs/authoring.md (exec types, the subprocess contract, the envelope, subcommands) and
docs/http-skills.md. Real parts only: real skills, real subprocesses, a real HTTP server, real PostgreSQL
(``db_env``), scripted models.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import socket
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.agent_probes import call, finish
from skillyard import SkillYard
from skillyard.agent import ErrorCode
from skillyard.agent.turn import TurnResult

pytestmark = pytest.mark.usefixtures("db_env")

IDENTITY = {
    "user_id": "42",
    "org_id": "7",
    "actor_name": "Ada",
    "actor_id": "m-9",
    "org_name": "Acme",
    "actor_department_path": "/HQ/Sales/",
}

BUSINESS = "agent_runtime.40004"
INVALID_PARAMS = "agent_runtime.40014"
TIMEOUT = "agent_runtime.40016"
UNREACHABLE = "agent_runtime.40017"
IO_ERROR = "agent_runtime.40018"
TOOL_ERROR = "agent_runtime.40029"
ARG_REJECTED = "agent_runtime.40032"
PENDING_VERIFY = "agent_runtime.40030"
APPROVAL_REQUIRED = "agent_runtime.42221"
UNGROUNDED = "agent_runtime.42248"
ALL_CODES = {str(code) for code in ErrorCode}

FREE = {"sources": ["MODEL"], "required": False}
OK200 = {"path": "code", "op": "EQ", "value": 200}
ERROR_CODE = {"code": "code", "message": "msg"}
PY = sys.executable

# ---------------------------------------------------------------------------------------------------------------------
# Business skills. Every one appends one JSON line per real execution to the log, then behaves by its `mode` input:
# ok, empty, business, blank (an empty object), timeout (sleeps past its wall clock), refused / io / perm / boom ….
# ---------------------------------------------------------------------------------------------------------------------

RESULT_OK = {"code": 200, "data": {"records": [{"id": "r1", "name": "季度总结"}]}}
RESULT_EMPTY = {"code": 200, "data": {"records": []}}
RESULT_BUSINESS = {"ok": False, "code": "E42", "msg": "duplicate title"}

INPROC = """
import asyncio, json, pathlib, urllib.error

LOG = pathlib.Path({log!r})
NAME = {name!r}
SEEN = ("idempotency_key", "user_id", "org_id", "actor_name", "actor_id", "org_name", "actor_department_path",
        "session_id")


class StorageGone(OSError):
    pass


class PortClosed(ConnectionRefusedError):
    pass


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input, "ctx": {{k: ctx.get(k) for k in SEEN}}}},
                           ensure_ascii=False) + "\\n")
    mode = input.get("mode") or "ok"
    if mode == "timeout":
        await asyncio.sleep(5)
    if mode == "refused":
        raise ConnectionRefusedError("nobody listens on the order service")
    if mode == "refused_sub":
        raise PortClosed("port closed")
    if mode == "io":
        raise FileNotFoundError("/data/orders.db")
    if mode == "perm":
        raise PermissionError("read-only volume")
    if mode == "reset":
        raise ConnectionResetError("peer reset")
    if mode == "own_timeout":
        raise TimeoutError("the skill gave up itself")
    if mode == "urlerror":
        raise urllib.error.URLError("name resolution failed")
    if mode == "custom_os":
        raise StorageGone("storage gone")
    if mode == "boom":
        raise ValueError("bad state")
    if mode == "keyerror":
        raise KeyError("missing")
    if mode == "business":
        return {business}
    if mode == "empty":
        return {empty}
    if mode == "blank":
        return {{}}
    if mode == "okfalse_200":
        return {{"ok": "false", "code": 200, "msg": "rejected by the ledger"}}
    if mode == "nonretriable":
        return {{"ok": False, "error": "no permission", "error_type": "config", "non_retriable": True}}
    if mode == "self_need_param":
        return {{"ok": False, "error": "which warehouse?", "need_param": "warehouse", "error_type": "recoverable"}}
    if mode == "listresult":
        return [1, 2, 3]
    if mode == "cancelled":
        raise asyncio.CancelledError()
    return {ok}
"""

SYNC_INPROC = """
import json, pathlib, time

LOG = pathlib.Path({log!r})
NAME = {name!r}


def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": input}}, ensure_ascii=False) + "\\n")
    mode = input.get("mode") or "ok"
    if mode == "io":
        raise FileNotFoundError("/data/orders.db")
    if mode == "refused":
        raise ConnectionRefusedError("nobody listens")
    if mode == "boom":
        raise ValueError("bad state")
    return {ok}
"""

CLI_PY = """
import argparse, json, os, pathlib, sys, time

LOG = pathlib.Path({log!r})
NAME = {name!r}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="ok")
    args, _ = parser.parse_known_args()
    data = json.loads(os.environ.get("SKILL_INPUT") or "{{}}")
    ctx = json.loads(os.environ.get("SKILL_CONTEXT") or "{{}}")
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": NAME, "input": data, "ctx": ctx, "argv": sys.argv[1:]}}, ensure_ascii=False)
                + "\\n")
    mode = args.mode
    if mode == "timeout":
        time.sleep(5)
    if mode == "io":
        raise FileNotFoundError("/data/orders.db")
    if mode == "boom":
        raise ValueError("bad state")
    if mode == "report_refused":
        print(json.dumps({{"ok": False, "error": "order service refused the connection",
                          "exception_type": "ConnectionRefusedError"}}))
        return
    if mode == "business":
        print(json.dumps({business}))
        return
    if mode == "empty":
        print(json.dumps({empty}))
        return
    print(json.dumps({ok}))


if __name__ == "__main__":
    main()
"""

SHELL = """
#!/bin/bash
{py} -c 'import json, os, sys; print(json.dumps({{"tool": sys.argv[1], "argv": sys.argv[2:],
  "input": json.loads(os.environ.get("SKILL_INPUT") or "{{}}"),
  "ctx": json.loads(os.environ.get("SKILL_CONTEXT") or "{{}}")}}, ensure_ascii=False))' {name} "$@" >> {log}
mode=ok
while [ $# -gt 0 ]; do
  if [ "$1" = "--mode" ]; then mode="$2"; shift; fi
  shift
done
case "$mode" in
  timeout) sleep 5; echo '{ok}' ;;
  business) echo '{business}' ;;
  empty) echo '{empty}' ;;
  crash) echo "disk gone" >&2; exit 3 ;;
  *) echo '{ok}' ;;
esac
"""

NODE = """
const fs = require("fs");
const input = JSON.parse(process.env.SKILL_INPUT || "{{}}");
const ctx = JSON.parse(process.env.SKILL_CONTEXT || "{{}}");
fs.appendFileSync({log_js}, JSON.stringify({{tool: {name_js}, input, ctx, argv: process.argv.slice(2)}}) + "\\n");
const mode = input.mode || "ok";
const out = {{ok: {ok}, business: {business}, empty: {empty}}};
if (mode === "timeout") {{
  setTimeout(() => console.log(JSON.stringify(out.ok)), 5000);
}} else {{
  console.log(JSON.stringify(out[mode] || out.ok));
}}
"""

RUBY = """
require "json"
input = JSON.parse(ENV["SKILL_INPUT"] || "{{}}")
ctx = JSON.parse(ENV["SKILL_CONTEXT"] || "{{}}")
File.open({log_js}, "a") {{ |f| f.puts(JSON.generate({{tool: {name_js}, input: input, ctx: ctx, argv: ARGV}})) }}
mode = input["mode"] || "ok"
out = {{"ok" => {ok_rb}, "business" => {business_rb}, "empty" => {empty_rb}}}
sleep 5 if mode == "timeout"
puts JSON.generate(out[mode] || out["ok"])
"""

GO = """
package main

import (
\t"encoding/json"
\t"fmt"
\t"os"
)

func main() {{
\tvar input map[string]interface{{}}
\tvar ctx map[string]interface{{}}
\t_ = json.Unmarshal([]byte(os.Getenv("SKILL_INPUT")), &input)
\t_ = json.Unmarshal([]byte(os.Getenv("SKILL_CONTEXT")), &ctx)
\trow := map[string]interface{{}}{{"tool": {name_js}, "input": input, "ctx": ctx, "argv": os.Args[1:]}}
\tline, _ := json.Marshal(row)
\tf, _ := os.OpenFile({log_js}, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
\tf.Write(append(line, '\\n'))
\tf.Close()
\tmode, _ := input["mode"].(string)
\tswitch mode {{
\tcase "business":
\t\tfmt.Println({business_go})
\tcase "empty":
\t\tfmt.Println({empty_go})
\tdefault:
\t\tfmt.Println({ok_go})
\t}}
}}
"""


def free_port() -> int:
    """A port of 127.0.0.1 with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """A real HTTP server on 127.0.0.1: `/<tool>/<mode>` answers by mode and records every hit."""

    def __init__(self) -> None:
        self.hits: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                parts = self.path.split("?")[0].strip("/").split("/")
                mode = parts[-1] if parts else ""
                with server.lock:
                    server.hits.append(
                        {
                            "tool": parts[0] if parts else "",
                            "mode": mode,
                            "path": self.path,
                            "method": self.command,
                            "body": raw.decode("utf-8", "replace"),
                            "headers": dict(self.headers.items()),
                        }
                    )
                status, body, ctype = 200, json.dumps(RESULT_OK), "application/json"
                if mode == "empty":
                    body = json.dumps(RESULT_EMPTY)
                elif mode == "business":
                    body = json.dumps(RESULT_BUSINESS)
                elif mode == "blank":
                    body = "{}"
                elif mode in ("slow", "timeout"):
                    time.sleep(1.6)
                elif mode.startswith("s") and mode[1:].isdigit():
                    status, body = int(mode[1:]), json.dumps({"message": "down for maintenance"})
                elif mode == "text":
                    body, ctype = "plain words", "text/plain"
                elif mode == "check":
                    body = json.dumps({"found": server.found})
                payload = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client gave up (a timeout probe)
                    self.wfile.write(payload)

            do_GET = do_POST = do_PUT = _answer

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    found = False

    def of(self, tool: str) -> list[dict[str, Any]]:
        with self.lock:
            return [h for h in self.hits if h["tool"] == tool]


@pytest.fixture
def server() -> Iterator[tuple[Server, str]]:
    from support.local_http import serve

    srv = Server()
    with serve(srv.handler()) as base:
        yield srv, base


def ruby_literal(value: Any) -> str:
    """A Ruby hash literal for a JSON value (keys as strings)."""
    return json.dumps(value).replace('": ', '" => ')


class Env:
    """An agent folder whose contract skill lists the business tools a probe adds."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.monkeypatch = monkeypatch
        self.bypass: list[str] = []
        self.log = root / "calls.jsonl"
        self.dir = root / "agent"
        self.skills = self.dir / "skills"
        self.tools: dict[str, dict[str, Any]] = {}
        self.names: list[str] = []
        self.uid = uuid.uuid4().hex[:10]
        self.scripts = 0
        (self.dir).mkdir(parents=True)
        (self.dir / "AGENT.md").write_text(
            "---\nagent_code: orders\nagent_name: Order clerk\nskills: [orders.clerk]\n---\n"
            "# Identity\nAn order clerk.\n# Mission\nLook up and save orders.\n",
            encoding="utf-8",
        )

    # --- skills -----------------------------------------------------------------------------------------------------

    def _skill(self, name: str, frontmatter: str, files: dict[str, str], schema: dict[str, Any] | None) -> Path:
        folder = self.skills / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: tool {name}\n{frontmatter}---\nBody.\n")
        for rel, text in files.items():
            (folder / rel).write_text(text, encoding="utf-8")
        schema = schema if schema is not None else default_schema()
        (folder / "schema.json").write_text(json.dumps(schema), encoding="utf-8")
        return folder

    def inproc(self, name: str, *, timeout: float = 1, schema: dict[str, Any] | None = None, sync: bool = False):
        template = SYNC_INPROC if sync else INPROC
        code = textwrap.dedent(template).format(
            log=str(self.log), name=name, ok=repr(RESULT_OK), business=repr(RESULT_BUSINESS), empty=repr(RESULT_EMPTY)
        )
        return self._skill(name, f"exec: {{timeout: {timeout}}}\n", {"handler.py": code}, schema)

    def cli(self, name: str, *, timeout: float = 1.5, schema: dict[str, Any] | None = None, extra: str = ""):
        code = textwrap.dedent(CLI_PY).format(
            log=str(self.log), name=name, ok=repr(RESULT_OK), business=repr(RESULT_BUSINESS), empty=repr(RESULT_EMPTY)
        )
        return self._skill(name, f"exec: {{config: tool.py, timeout: {timeout}}}\n{extra}", {"tool.py": code}, schema)

    def shell(self, name: str, *, timeout: float = 1.5, schema: dict[str, Any] | None = None):
        code = (
            textwrap.dedent(SHELL)
            .lstrip("\n")
            .format(
                py=PY,
                log=str(self.log),
                name=name,
                ok=json.dumps(RESULT_OK, ensure_ascii=False),
                business=json.dumps(RESULT_BUSINESS),
                empty=json.dumps(RESULT_EMPTY),
            )
        )
        return self._skill(name, f"exec: {{config: tool.sh, timeout: {timeout}}}\n", {"tool.sh": code}, schema)

    def node(self, name: str, *, timeout: float = 1.5):
        code = textwrap.dedent(NODE).format(
            log_js=json.dumps(str(self.log)),
            name_js=json.dumps(name),
            ok=json.dumps(RESULT_OK),
            business=json.dumps(RESULT_BUSINESS),
            empty=json.dumps(RESULT_EMPTY),
        )
        return self._skill(name, f"exec: {{config: tool.js, timeout: {timeout}}}\n", {"tool.js": code}, None)

    def ruby(self, name: str, *, timeout: float = 1.5):
        code = textwrap.dedent(RUBY).format(
            log_js=json.dumps(str(self.log)),
            name_js=json.dumps(name),
            ok_rb=ruby_literal(RESULT_OK),
            business_rb=ruby_literal(RESULT_BUSINESS),
            empty_rb=ruby_literal(RESULT_EMPTY),
        )
        return self._skill(name, f"exec: {{config: tool.rb, timeout: {timeout}}}\n", {"tool.rb": code}, None)

    def go(self, name: str):
        def lit(value: Any) -> str:
            return json.dumps(json.dumps(value))

        code = textwrap.dedent(GO).format(
            log_js=json.dumps(str(self.log)),
            name_js=json.dumps(name),
            ok_go=lit(RESULT_OK),
            business_go=lit(RESULT_BUSINESS),
            empty_go=lit(RESULT_EMPTY),
        )
        return self._skill(name, "exec: {config: tool.go, timeout: 60}\n", {"tool.go": code}, None)

    def http(
        self,
        name: str,
        base: str,
        *,
        method: str = "POST",
        url: str | None = None,
        timeout: float = 5,
        wall: float | None = None,
        schema: dict[str, Any] | None = None,
    ):
        toml = f'[request]\nmethod = "{method}"\nurl = "{url or base + "/" + name + "/{mode}"}"\ntimeout = {timeout}\n'
        fm = "exec: {config: api.toml" + (f", timeout: {wall}" if wall else "") + "}\n"
        return self._skill(name, fm, {"api.toml": toml}, schema)

    # --- contract ---------------------------------------------------------------------------------------------------

    def read(self, name: str, **extra: Any) -> None:
        contract: dict[str, Any] = {
            "label": f"正在查询{name}",
            "args": {"mode": FREE, "title": FREE},
            "extracts": [{"key": f"recs_{name}", "path": "data.records"}],
        }
        contract.update(extra)
        self.tools[name] = {k: v for k, v in contract.items() if v is not None}
        self.names.append(name)

    def write(self, name: str, *, verify: str | None = None, verify_mode: str = "ok", **extra: Any) -> None:
        contract: dict[str, Any] = {
            "label": f"正在保存{name}",
            "sideEffect": "WRITE",
            "confirm": False,
            "idempotencyKey": ["title"],
            "args": {"mode": FREE, "title": FREE, "owner": {"from": "platform.userId", "label": "所有者"}},
            "success": OK200,
            "error": ERROR_CODE,
        }
        contract.update(extra)
        if contract.get("confirm") is False:
            self.bypass.append(name)
        if verify:
            contract["verify"] = {
                "tool": verify,
                "args": {"title": {"from": "call.title"}, "mode": {"const": verify_mode}},
            }
        self.tools[name] = {k: v for k, v in contract.items() if v is not None}
        self.names.append(name)

    def other(self, name: str) -> None:
        """A toolName without a contract entry (read-only by §1.3 defaults)."""
        self.names.append(name)

    def build(self) -> None:
        self.monkeypatch.setenv("SKILLYARD_AGENT_WRITE_CONFIRM_BYPASS_TOOLS", ",".join(self.bypass))
        folder = self.skills / "clerk"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(
            "---\nname: clerk\nskill_key: orders.clerk\ndescription: Looks up and saves orders.\n"
            f"tools: [{', '.join(self.names)}]\n---\nThe clerk manual.\n",
            encoding="utf-8",
        )
        (folder / "contract.json").write_text(json.dumps({"tools": self.tools}, ensure_ascii=False), encoding="utf-8")

    # --- running ----------------------------------------------------------------------------------------------------

    def sid(self, name: str = "s") -> str:
        return f"{name}-{self.uid}"

    def script(self, *turns: dict[str, Any]) -> str:
        self.scripts += 1
        path = self.root / f"turns{self.scripts}.yaml"
        path.write_text(yaml.safe_dump({"turns": list(turns)}, allow_unicode=True), encoding="utf-8")
        return f"script:{path}"

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(x) for x in self.log.read_text(encoding="utf-8").splitlines() if x.strip()]
        return [r for r in rows if tool is None or r["tool"] == tool]

    async def send(self, *turns: dict[str, Any], message: str = "请处理订单《季度总结》", sid: str | None = None):
        """One turn of a fresh session (or `sid`), the business calls then the script's remaining turns."""
        self.build()
        async with SkillYard() as yard:
            agent = await yard.agent(self.dir, model=self.script(*turns))
            return await agent.send(sid or self.sid(), message, identity=IDENTITY)


def default_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "mode": {"type": "string"},
            "title": {"type": "string"},
            "owner": {"type": "string"},
            "count": {"type": "integer"},
        },
    }


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    return Env(tmp_path, monkeypatch)


def say(text: str = "稍等") -> dict[str, Any]:
    return {"text": text}


def obs(turn: TurnResult, tool: str) -> list[Any]:
    return [o for o in turn.observations if o.tool == tool]


def statuses(turn: TurnResult, tool: str) -> list[tuple[str, Any]]:
    return [(e["status"], e["business_ok"]) for e in turn.evidence if e["tool"] == tool]


def assert_coded(turn: TurnResult) -> None:
    """Issue: every observation the model sees carries the spec's error code (§17) and a next step."""
    for o in turn.observations:
        if o.ok:
            continue
        assert o.code in ALL_CODES or o.code == "E42", (o.tool, o.code, o.content)
        assert o.next_step and str(o.next_step).strip(), (o.tool, o.code, o.content)


def content(o: Any) -> str:
    return o.content if isinstance(o.content, str) else json.dumps(o.content, ensure_ascii=False)


KINDS = ["py", "cli", "sh", "node", "rb", "go", "http"]
NEEDS = {"node": "node", "rb": "ruby", "go": "go"}


def kind_params(kinds: list[str] = KINDS) -> list[Any]:
    """One param per exec type; node / ruby / go are skipped when their interpreter is not on PATH."""
    out = []
    for kind in kinds:
        binary = NEEDS.get(kind)
        marks = [pytest.mark.skipif(not shutil.which(binary), reason=f"{binary} not on PATH")] if binary else []
        out.append(pytest.param(kind, marks=marks, id=kind))
    return out


def add(env: Env, kind: str, name: str, base: str | None = None, **kw: Any) -> str:
    """A business skill `name` of exec type `kind`; returns the name (the tool name the model calls)."""
    if kind == "py":
        env.inproc(name, **kw)
    elif kind == "cli":
        env.cli(name, **kw)
    elif kind == "sh":
        env.shell(name, **kw)
    elif kind == "node":
        env.node(name, **kw)
    elif kind == "rb":
        env.ruby(name, **kw)
    elif kind == "go":
        env.go(name)
    elif kind == "http":
        assert base
        env.http(name, base, **kw)
    else:  # pragma: no cover
        raise AssertionError(kind)
    return name


def executions(env: Env, srv: Server, kind: str, tool: str) -> int:
    """Real executions: lines the skill logged, or hits on the HTTP server."""
    return len(srv.of(tool)) if kind == "http" else len(env.calls(tool))


def follow_up(question: str = "要换个条件再查吗？") -> dict[str, Any]:
    return call("builtin_node_follow_up", {"question": question})


async def evidence_record(env: Env, sid: str, first: list[dict[str, Any]], evidence_id: str) -> dict[str, Any]:
    """builtin_evidence_get of `evidence_id`, asked in a second turn of the same session (the script continues)."""
    turn = await env.send(*first, call("builtin_evidence_get", {"evidenceId": evidence_id}), say(), sid=sid)
    [o] = obs(turn, "builtin_evidence_get")
    assert o.ok, o
    return o.content if isinstance(o.content, dict) else json.loads(o.content)


# =====================================================================================================================
# 1. success, business failure and empty results through the chain, every exec type
# =====================================================================================================================


@pytest.mark.parametrize("kind", kind_params())
async def test_read_success_is_ok_evidence_success_and_runs_once(env: Env, server, kind: str):
    """§6.1 no success spec: a call that does not fail is a success; evidence SUCCESS, businessOk true; the §4 label
    is a progress event; the node may finish on it (§10.2 step 5); exactly one real execution."""
    srv, base = server
    tool = add(env, kind, f"{kind}Find", base)
    env.read(tool)
    turn = await env.send(call(tool, {"mode": "ok", "title": "季度总结"}), finish("查到了"))
    [o] = obs(turn, tool)
    assert o.ok and o.code is None, o
    assert "r1" in content(o) and "季度总结" in content(o)
    assert statuses(turn, tool) == [("SUCCESS", True)]
    assert {"type": "tool", "tool": tool, "label": f"正在查询{tool}"} in turn.events, turn.events
    assert turn.status == "DONE", turn.as_dict()
    assert executions(env, srv, kind, tool) == 1


@pytest.mark.parametrize("kind", kind_params(["py", "node", "http"]))
async def test_read_business_failure_envelope(env: Env, server, kind: str):
    """Issue: a failure envelope (ok false, no exception, no timeout) is a business failure: evidence SUCCESS,
    businessOk false, TOOL_BUSINESS_FAILED (no error.code configured) and a next step; no retry."""
    srv, base = server
    tool = add(env, kind, f"{kind}Find", base)
    env.read(tool)
    turn = await env.send(call(tool, {"mode": "business"}), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == BUSINESS, o
    assert o.next_step
    assert statuses(turn, tool) == [("SUCCESS", False)]
    assert executions(env, srv, kind, tool) == 1
    assert_coded(turn)


@pytest.mark.parametrize("kind", kind_params(["cli", "http"]))
async def test_write_business_failure_uses_error_code_and_may_be_called_again(env: Env, server, kind: str):
    """§6.2: the business code comes from `error.code` (E42); the issue: business failure for writes alike (evidence
    SUCCESS, businessOk false); §14.2: a business-failed write is no obstacle to calling it again — it runs again
    (never automatically: exactly one execution per model call)."""
    srv, base = server
    tool = add(env, kind, f"{kind}Save", base)
    env.write(tool)
    args = {"mode": "business", "title": "季度总结"}
    turn = await env.send(call(tool, args), call(tool, args), say())
    assert [o.code for o in obs(turn, tool)] == ["E42", "E42"], turn.observations
    assert statuses(turn, tool) == [("SUCCESS", False), ("SUCCESS", False)]
    assert executions(env, srv, kind, tool) == 2
    assert_coded(turn)


@pytest.mark.parametrize("kind", kind_params(["py", "rb", "http"]))
async def test_empty_read_without_success_spec_is_a_success_that_grounds_a_question(env: Env, server, kind: str):
    """§6.3: all extracts count 0 → empty; without success it is a success (SUCCESS, businessOk true). docs: a
    question without expectedFields is grounded when the node's latest business call returned empty."""
    srv, base = server
    tool = add(env, kind, f"{kind}Find", base)
    env.read(tool)
    turn = await env.send(call(tool, {"mode": "empty"}), follow_up(), say())
    [o] = obs(turn, tool)
    assert o.ok and o.code is None, o
    assert statuses(turn, tool) == [("SUCCESS", True)]
    assert turn.status == "SUSPENDED" and turn.checkpoint and turn.checkpoint["type"] == "FOLLOW_UP", turn.as_dict()
    assert executions(env, srv, kind, tool) == 1


@pytest.mark.parametrize("kind", kind_params(["sh"]))
async def test_non_empty_success_does_not_ground_a_bare_question(env: Env, server, kind: str):
    """The counterpart: after a non-empty success a question without expectedFields is FOLLOW_UP_UNGROUNDED."""
    _srv, base = server
    tool = add(env, kind, f"{kind}Find", base)
    env.read(tool)
    turn = await env.send(call(tool, {"mode": "ok"}), follow_up(), say())
    assert [o.code for o in obs(turn, "builtin_node_follow_up")] == [UNGROUNDED]
    assert turn.status == "RUNNING"


@pytest.mark.parametrize("kind", kind_params(["http"]))
async def test_empty_read_with_a_success_spec_that_holds_is_business_ok(env: Env, server, kind: str):
    """§6.1: `success` code == 200 holds on {code: 200, data: {records: []}} → business success although the
    extract is empty; evidence_get reports empty=true."""
    _srv, base = server
    tool = add(env, kind, f"{kind}Find", base)
    env.read(tool, success=OK200)
    sid = env.sid()
    first = [call(tool, {"mode": "empty"}), say()]
    turn = await env.send(*first, sid=sid)
    [o] = obs(turn, tool)
    assert o.ok and o.code is None, o
    assert statuses(turn, tool) == [("SUCCESS", True)]
    record = await evidence_record(env, sid, first, o.evidence_id)
    assert record.get("empty") is True and record.get("businessOk") is True, record


@pytest.mark.parametrize("kind", kind_params(["sh"]))
async def test_empty_list_fails_a_truthy_success_spec(env: Env, server, kind: str):
    """§6.1 TRUTHY: an empty container is not truthy → business failure (SUCCESS, businessOk false)."""
    _srv, base = server
    tool = add(env, kind, f"{kind}Find", base)
    env.read(tool, success={"path": "data.records", "op": "TRUTHY"})
    turn = await env.send(call(tool, {"mode": "empty"}), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == BUSINESS, o
    assert statuses(turn, tool) == [("SUCCESS", False)]


@pytest.mark.parametrize("kind", kind_params(["http"]))
async def test_blank_response_with_a_success_spec_is_a_business_failure(env: Env, server, kind: str):
    """§6.1 "配置了 success 而响应为空 → 业务失败": a skill answering `{}` with success EXISTS on `code`."""
    _srv, base = server
    tool = add(env, kind, f"{kind}Find", base)
    env.read(tool, success={"path": "code", "op": "EXISTS"}, extracts=None)
    turn = await env.send(call(tool, {"mode": "blank"}), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == BUSINESS, o
    assert statuses(turn, tool) == [("SUCCESS", False)]


@pytest.mark.parametrize("kind", kind_params(["py"]))
async def test_blank_response_without_success_or_extracts_is_an_empty_success(env: Env, server, kind: str):
    """§6.1 no success → success; §6.3 "没有 extracts 时按响应结构判断是否为空": `{}` is empty (evidence_get
    empty=true), and the empty result grounds a question without expectedFields."""
    _srv, base = server
    tool = add(env, kind, f"{kind}Find", base)
    env.read(tool, extracts=None)
    sid = env.sid()
    first = [call(tool, {"mode": "blank"}), say()]
    turn = await env.send(*first, sid=sid)
    [o] = obs(turn, tool)
    assert o.ok and statuses(turn, tool) == [("SUCCESS", True)], o
    record = await evidence_record(env, sid, first, o.evidence_id)
    assert record.get("empty") is True, record


async def test_http_text_response_is_a_success_without_success_spec(env: Env, server):
    """http-skills.md: a non-JSON response becomes {"output": "<body text>", "status": 200}; no success spec →
    success (§6.1)."""
    _srv, base = server
    tool = add(env, "http", "httpText", base)
    env.read(tool, extracts=None)
    turn = await env.send(call(tool, {"mode": "text"}), say())
    [o] = obs(turn, tool)
    assert o.ok and "plain words" in content(o), o
    assert statuses(turn, tool) == [("SUCCESS", True)]


@pytest.mark.parametrize("status", [503])
async def test_http_status_error_without_exception_is_a_business_failure(env: Env, server, status: int):
    """http-skills.md: a status outside 2xx is an envelope with `status`, `body_excerpt`, `error_type` and no
    exception_type / timed_out; issue: such a failure envelope is a business failure (SUCCESS, businessOk false,
    TOOL_BUSINESS_FAILED) — and it grounds a bare question; one request, never repeated."""
    srv, base = server
    tool = add(env, "http", "httpFind", base)
    env.read(tool)
    turn = await env.send(call(tool, {"mode": f"s{status}"}), follow_up(), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == BUSINESS, o
    assert statuses(turn, tool) == [("SUCCESS", False)]
    assert turn.status == "SUSPENDED", turn.as_dict()
    assert len(srv.of(tool)) == 1


@pytest.mark.parametrize("kind", kind_params(["cli"]))
async def test_subprocess_nonzero_exit_is_a_business_failure(env: Env, server, kind: str):
    """authoring.md: a subprocess that exits non-zero gives `exit_code` and `stderr_tail`, no exception_type and no
    timed_out; issue: a failure envelope without exception or timeout is a business failure, reads and writes alike."""
    srv, base = server
    tool = add(env, kind, f"{kind}Save", base)
    env.write(tool, error=None)
    mode = "io" if kind == "cli" else "crash"
    turn = await env.send(call(tool, {"mode": mode, "title": "季度总结"}), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == BUSINESS, o
    assert statuses(turn, tool) == [("SUCCESS", False)]
    assert executions(env, srv, kind, tool) == 1


# =====================================================================================================================
# 2. failure classes (§14.4 as the issue classifies them), for a READ and for a WRITE
# =====================================================================================================================

# mode → (code, read status, write status) for in-process skills
INPROC_CLASSES = {
    "timeout": (TIMEOUT, "FAILED", "UNKNOWN"),  # the wall clock (exec.timeout 1 s)
    "refused": (UNREACHABLE, "FAILED", "FAILED"),  # ConnectionRefusedError
    "refused_sub": (UNREACHABLE, "FAILED", "FAILED"),  # a subclass of ConnectionRefusedError
    "io": (IO_ERROR, "FAILED", "UNKNOWN"),  # FileNotFoundError
    "perm": (IO_ERROR, "FAILED", "UNKNOWN"),  # PermissionError
    "reset": (IO_ERROR, "FAILED", "UNKNOWN"),  # ConnectionResetError: an OSError, not a refusal
    "own_timeout": (IO_ERROR, "FAILED", "UNKNOWN"),  # docs: a TimeoutError the skill raised itself is IO
    "urlerror": (IO_ERROR, "FAILED", "UNKNOWN"),  # docs: URLError (family OSError) is IO
    "custom_os": (IO_ERROR, "FAILED", "UNKNOWN"),  # docs: the skill's own OSError subclass is IO
    "boom": (TOOL_ERROR, "FAILED", "UNKNOWN"),  # ValueError: any other exception
    "keyerror": (TOOL_ERROR, "FAILED", "UNKNOWN"),
}


@pytest.mark.parametrize("mode", ["timeout", "refused", "refused_sub", "io", "own_timeout", "custom_os", "boom"])
async def test_inprocess_read_failure_classes(env: Env, mode: str):
    """Issue §14.4 decision, in-process async skill, READ: the class decides the code; reads are FAILED; one run."""
    code, read_status, _ = INPROC_CLASSES[mode]
    tool = add(env, "py", "pyFind")
    env.read(tool)
    turn = await env.send(call(tool, {"mode": mode}), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == code, o
    assert [s for s, _ in statuses(turn, tool)] == [read_status]
    assert len(env.calls(tool)) == 1
    assert_coded(turn)


@pytest.mark.parametrize("mode", ["timeout", "refused", "perm", "boom"])
async def test_inprocess_write_failure_classes(env: Env, mode: str):
    """Issue §14.4 decision, in-process async skill, WRITE: timeout / IO / unknown error → UNKNOWN; unreachable →
    FAILED; exactly one execution (writes are never retried)."""
    code, _, write_status = INPROC_CLASSES[mode]
    tool = add(env, "py", "pySave")
    env.write(tool)
    turn = await env.send(call(tool, {"mode": mode, "title": "季度总结"}), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == code, o
    assert [s for s, _ in statuses(turn, tool)] == [write_status]
    assert len(env.calls(tool)) == 1
    assert_coded(turn)


async def test_a_skill_raising_cancelled_error_is_an_unknown_error_not_a_crashed_turn(env: Env):
    """Issue: "any other exception → unknown error", writes UNKNOWN. A skill whose own awaited work was cancelled
    raises asyncio.CancelledError (an exception the skill raised; the turn itself was not cancelled): the model must
    get TOOL_ERROR and the write stays UNKNOWN, instead of the turn failing with the exception."""
    tool = add(env, "py", "pySave")
    env.write(tool)
    turn = await env.send(call(tool, {"mode": "cancelled", "title": "季度总结"}), say())
    assert [o.code for o in obs(turn, tool)] == [TOOL_ERROR]
    assert [s for s, _ in statuses(turn, tool)] == ["UNKNOWN"]
    assert len(env.calls(tool)) == 1


@pytest.mark.parametrize("mode,code", [("io", IO_ERROR)])
async def test_sync_inprocess_handler_failure_classes(env: Env, mode: str, code: str):
    """authoring.md: a plain `def` entry runs in a worker thread; its exceptions are classified the same way."""
    tool = "pySync"
    env.inproc(tool, sync=True)
    env.write(tool)
    turn = await env.send(call(tool, {"mode": mode, "title": "季度总结"}), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == code, o
    expected = "FAILED" if code == UNREACHABLE else "UNKNOWN"
    assert [s for s, _ in statuses(turn, tool)] == [expected]
    assert len(env.calls(tool)) == 1


@pytest.mark.parametrize("kind", kind_params(["rb", "http"]))
async def test_wall_clock_timeout_of_a_read_is_timeout_failed(env: Env, server, kind: str):
    """Issue: wall-clock timeout → TIMEOUT; reads fail. Subprocess skills with exec.timeout 1.5 s sleeping 5 s; the
    HTTP skill with exec.timeout 1 s against a server that answers after 1.6 s (request timeout 5 s)."""
    srv, base = server
    kw: dict[str, Any] = {"wall": 1} if kind == "http" else {}
    tool = add(env, kind, f"{kind}Find", base, **kw)
    env.read(tool)
    turn = await env.send(call(tool, {"mode": "timeout"}), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == TIMEOUT, o
    assert [s for s, _ in statuses(turn, tool)] == ["FAILED"]
    assert executions(env, srv, kind, tool) == 1


@pytest.mark.parametrize("kind", kind_params(["py", "node", "http"]))
async def test_timed_out_write_is_unknown_and_never_run_again(env: Env, server, kind: str):
    """Issue: timeout → a write becomes UNKNOWN; writes are never retried; §14.2 an identical write with an
    uncertain result is refused (WRITE_PENDING_VERIFY) without running; §14.3 the node cannot finish
    (FINISH_OPEN_EVIDENCE)."""
    srv, base = server
    kw: dict[str, Any] = {"wall": 1} if kind == "http" else {}
    tool = add(env, kind, f"{kind}Save", base, **kw)
    env.write(tool)
    args = {"mode": "timeout", "title": "季度总结"}
    turn = await env.send(call(tool, args), call(tool, args), finish("已保存"), say())
    assert [o.code for o in obs(turn, tool)] == [TIMEOUT, PENDING_VERIFY], turn.observations
    assert [s for s, _ in statuses(turn, tool)] == ["UNKNOWN"]
    assert [o.code for o in obs(turn, "builtin_node_finish")] == ["agent_runtime.42251"]
    assert executions(env, srv, kind, tool) == 1
    assert_coded(turn)


async def test_http_request_timeout_of_a_write_is_unknown(env: Env, server):
    """The same for a write: UNKNOWN, one request, the identical second call is WRITE_PENDING_VERIFY."""
    srv, base = server
    tool = add(env, "http", "httpSave", base, timeout=0.5)
    env.write(tool)
    args = {"mode": "slow", "title": "季度总结"}
    turn = await env.send(call(tool, args), call(tool, args), say())
    assert [o.code for o in obs(turn, tool)] == [TIMEOUT, PENDING_VERIFY]
    assert [s for s, _ in statuses(turn, tool)] == ["UNKNOWN"]
    assert len(srv.of(tool)) == 1


@pytest.mark.parametrize("side", ["read", "write"])
async def test_http_refused_connection_is_unreachable_and_failed(env: Env, side: str):
    """Issue: an HTTP skill's refused connection → UNREACHABLE; FAILED for reads and writes (§14.4 服务不可达)."""
    tool = "httpGone"
    env.http(tool, "", url=f"http://127.0.0.1:{free_port()}/gone")
    env.read(tool) if side == "read" else env.write(tool)
    turn = await env.send(call(tool, {"mode": "ok", "title": "季度总结"}), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == UNREACHABLE, o
    assert [s for s, _ in statuses(turn, tool)] == ["FAILED"]
    assert_coded(turn)


async def test_an_unreachable_write_is_failed_so_it_may_run_again(env: Env):
    """§14.4 unreachable writes are FAILED (not uncertain) → §14.2 "失败 → 正常调用": the model's second identical
    call runs again (one execution per model call, none automatic)."""
    tool = add(env, "py", "pySave")
    env.write(tool)
    args = {"mode": "refused", "title": "季度总结"}
    turn = await env.send(call(tool, args), call(tool, args), say())
    assert [o.code for o in obs(turn, tool)] == [UNREACHABLE, UNREACHABLE]
    assert len(env.calls(tool)) == 2


@pytest.mark.parametrize("kind", kind_params(["cli"]))
async def test_subprocess_envelope_reporting_a_refused_connection_is_unreachable(env: Env, server, kind: str):
    """Issue: the class is read from the envelope's `exception_type`: a CLI skill that catches the refusal and
    reports `exception_type: ConnectionRefusedError` in its envelope → UNREACHABLE, FAILED."""
    _srv, base = server
    tool = add(env, kind, "cliSave", base)
    env.write(tool)
    turn = await env.send(call(tool, {"mode": "report_refused", "title": "季度总结"}), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == UNREACHABLE, o
    assert [s for s, _ in statuses(turn, tool)] == ["FAILED"]


@pytest.mark.parametrize(
    "kind,side", [("py", "read"), ("py", "write"), ("sh", "write"), ("http", "read")], ids=lambda v: str(v)
)
async def test_schema_rejection_is_a_params_error_and_failed(env: Env, server, kind: str, side: str):
    """Issue: a schema rejection of the input → params error (MCP_INVALID_PARAMS), FAILED for reads and writes.
    `count` is declared an integer; the model sends text (the arg policy checks only `required`, so the platform's
    input validation rejects it). The skill never runs."""
    srv, base = server
    tool = add(env, kind, f"{kind}Tool", base)
    env.read(tool) if side == "read" else env.write(tool)
    turn = await env.send(call(tool, {"mode": "ok", "title": "季度总结", "count": "many"}), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == INVALID_PARAMS, o
    assert [s for s, _ in statuses(turn, tool)] == ["FAILED"]
    assert executions(env, srv, kind, tool) == 0
    assert_coded(turn)


async def test_a_write_rejected_by_the_schema_runs_once_corrected(env: Env):
    """A params error is certain (FAILED), so the corrected write is not blocked and runs exactly once."""
    tool = add(env, "sh", "shSave")
    env.write(tool)
    turn = await env.send(
        call(tool, {"mode": "ok", "title": "季度总结", "count": "many"}),
        call(tool, {"mode": "ok", "title": "季度总结", "count": 3}),
        finish("已保存"),
    )
    assert [o.code for o in obs(turn, tool)] == [INVALID_PARAMS, None]
    assert [s for s, _ in statuses(turn, tool)] == ["FAILED", "SUCCESS"]
    assert turn.status == "DONE"
    assert len(env.calls(tool)) == 1 and env.calls(tool)[0]["input"]["count"] == 3


async def test_http_url_placeholder_without_input_is_a_params_error(env: Env, server):
    """http-skills.md: a URL placeholder without an input field answers `need_param` + recoverable before any
    request; the docs classify that envelope as a params error → MCP_INVALID_PARAMS, FAILED, no request."""
    srv, base = server
    tool = "httpDoc"
    schema = {"type": "object", "properties": {"docId": {"type": "string"}, "mode": {"type": "string"}}}
    env.http(tool, base, url=base + "/httpDoc/{docId}", schema=schema)
    env.read(tool, args={"docId": FREE, "mode": FREE})
    turn = await env.send(call(tool, {"mode": "ok"}), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code == INVALID_PARAMS, o
    assert [s for s, _ in statuses(turn, tool)] == ["FAILED"]
    assert srv.of(tool) == []


async def test_a_missing_schema_required_argument_is_refused_before_the_call(env: Env, server):
    """§13 step 1: the tool's schema `required` is checked by the arg policy: ARG_REJECTED, no evidence, no run —
    the same for a subprocess and an HTTP tool."""
    srv, base = server
    schema = default_schema() | {"required": ["title"]}
    add(env, "sh", "shFind", schema=schema)
    add(env, "http", "httpFind", base, schema=schema)
    env.read("shFind")
    env.read("httpFind")
    turn = await env.send(call("shFind", {"mode": "ok"}), call("httpFind", {"mode": "ok"}), say())
    assert [o.code for o in turn.observations[:2]] == [ARG_REJECTED, ARG_REJECTED], turn.observations
    assert turn.evidence == []
    assert env.calls() == [] and srv.hits == []


# =====================================================================================================================
# 3. what the skill sees: the idempotency key and the caller identity
# =====================================================================================================================

TITLE_KEY = hashlib.sha256("季度总结".encode()).hexdigest()
SEEN_IDENTITY = {
    "user_id": "42",
    "org_id": "7",
    "actor_name": "Ada",
    "actor_id": "m-9",
    "org_name": "Acme",
    "actor_department_path": "/HQ/Sales/",
}


@pytest.mark.parametrize("kind", kind_params(["py", "cli", "go"]))
async def test_a_write_receives_the_idempotency_key_in_its_runtime_context(env: Env, server, kind: str):
    """Issue: the idempotency key is passed as runtime_context["idempotency_key"]; docs: the hex SHA-256 of the key
    paths' values (`title` only here). Subprocess skills see the runtime context as SKILL_CONTEXT (authoring.md:
    the JSON-serializable part, no `_` keys), so the key is there too."""
    _srv, base = server
    tool = add(env, kind, f"{kind}Save", base)
    env.write(tool)
    turn = await env.send(call(tool, {"mode": "ok", "title": "季度总结"}), finish("已保存"))
    assert turn.status == "DONE", turn.as_dict()
    [row] = env.calls(tool)
    assert row["ctx"].get("idempotency_key") == TITLE_KEY, row["ctx"]


async def test_key_without_idempotency_key_paths_is_tool_name_plus_digest(env: Env):
    """§14.2 / docs: without `idempotencyKey` the key is `<tool>:` + the SHA-256 of the canonical JSON of all
    arguments; two different argument sets give two keys, the same set the same key."""
    tool = add(env, "cli", "cliSave")
    env.write(tool, idempotencyKey=None)
    turn = await env.send(
        call(tool, {"mode": "ok", "title": "甲"}), call(tool, {"mode": "ok", "title": "乙"}), finish("好")
    )
    assert turn.status == "DONE", turn.as_dict()
    keys = [r["ctx"].get("idempotency_key") for r in env.calls(tool)]
    assert len(keys) == 2 and keys[0] != keys[1], keys
    for key in keys:
        assert isinstance(key, str) and key.startswith("cliSave:") and len(key.split(":", 1)[1]) == 64, key


@pytest.mark.parametrize("kind", kind_params(["py", "cli"]))
async def test_the_caller_identity_reaches_the_skill(env: Env, server, kind: str):
    """Issue §11: identity comes from runtime_context; docs: the call's context is identity + session_id. In-process
    skills get it as the context argument, subprocess skills as SKILL_CONTEXT (extra keys such as org_name kept)."""
    _srv, base = server
    tool = add(env, kind, f"{kind}Find", base)
    env.read(tool)
    sid = env.sid("who")
    await env.send(call(tool, {"mode": "ok"}), say(), sid=sid)
    [row] = env.calls(tool)
    seen = {k: row["ctx"].get(k) for k in SEEN_IDENTITY}
    assert seen == SEEN_IDENTITY
    assert row["ctx"].get("session_id") == sid


@pytest.mark.parametrize("kind", kind_params(["sh"]))
async def test_subprocess_context_has_no_platform_internals(env: Env, server, kind: str):
    """authoring.md: SKILL_CONTEXT has no `_`-prefixed keys and no db / db_factory / call_skill / abort_signal /
    channel_registry / request."""
    _srv, base = server
    tool = add(env, kind, f"{kind}Save", base)
    env.write(tool)
    await env.send(call(tool, {"mode": "ok", "title": "季度总结"}), say())
    [row] = env.calls(tool)
    ctx = row["ctx"]
    assert not [k for k in ctx if k.startswith("_")], ctx
    assert not {"db", "db_factory", "call_skill", "abort_signal", "channel_registry", "request"} & set(ctx), ctx


async def test_platform_bound_argument_reaches_a_shell_skill_on_argv_as_a_string(env: Env):
    """§11 ids stay strings; authoring.md: each input field is a `--key value` flag and in SKILL_INPUT. `owner`
    (from platform.userId) overrides the model's value."""
    tool = add(env, "sh", "shSave")
    env.write(tool)
    await env.send(call(tool, {"mode": "ok", "title": "季度总结", "owner": "999"}), say())
    [row] = env.calls(tool)
    argv = row["argv"]
    assert argv[argv.index("--owner") + 1] == "42", argv
    assert "999" not in argv
    assert row["input"]["owner"] == "42" and row["input"]["title"] == "季度总结"


async def test_an_http_write_sends_exactly_the_bound_arguments(env: Env, server):
    """http-skills.md: the input fields go to the URL, the query, then the JSON body; the runtime context reaches an
    HTTP skill only through `${VAR}` in headers (configs / declared env). So the body is the bound arguments
    (owner from platform.userId), no identity or idempotency key leaks into it; one request."""
    srv, base = server
    tool = add(env, "http", "httpSave", base)
    env.write(tool)
    turn = await env.send(call(tool, {"mode": "ok", "title": "季度总结"}), finish("已保存"))
    assert turn.status == "DONE", turn.as_dict()
    [hit] = srv.of(tool)
    assert hit["path"] == "/httpSave/ok" and hit["method"] == "POST"
    assert json.loads(hit["body"]) == {"title": "季度总结", "owner": "42"}
    assert TITLE_KEY not in json.dumps(hit["headers"])


async def test_approved_subprocess_write_runs_once_with_its_key(env: Env):
    """§14.1: APPROVAL_REQUIRED runs nothing; after approval + CONFIRM the shell write runs exactly once with the
    approved arguments and its idempotency key in SKILL_CONTEXT."""
    tool = add(env, "sh", "shSave")
    env.write(tool, confirm=True)
    sid = env.sid("appr")
    script = [
        call(tool, {"mode": "ok", "title": "季度总结"}),
        call("builtin_node_approval", {"summary": "保存订单", "toolName": tool}),
        finish("已保存"),
    ]
    first = await env.send(*script, sid=sid)
    assert [o.code for o in obs(first, tool)] == [APPROVAL_REQUIRED]
    assert first.checkpoint and first.checkpoint["type"] == "APPROVAL" and env.calls() == []
    env.build()
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*script))
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    [row] = env.calls(tool)
    assert row["ctx"].get("idempotency_key") == TITLE_KEY and row["input"]["owner"] == "42"


@pytest.mark.parametrize("kind", kind_params(["http"]))
async def test_an_identical_successful_write_returns_the_earlier_result_without_running(env: Env, server, kind: str):
    """Issue (write gate order) / §14.2: an identical write (same tool + key) whose evidence is a business success
    returns the earlier result without calling the tool: one execution for two model calls."""
    srv, base = server
    tool = add(env, kind, f"{kind}Save", base)
    env.write(tool)
    args = {"mode": "ok", "title": "季度总结"}
    turn = await env.send(call(tool, args), call(tool, args), finish("已保存"))
    assert [o.ok for o in obs(turn, tool)] == [True, True], turn.observations
    assert turn.status == "DONE"
    assert executions(env, srv, kind, tool) == 1


async def test_a_failure_envelope_with_a_holding_success_spec_is_still_a_business_failure(env: Env):
    """Issue / docs: a failure envelope (`ok: "false"` counts, authoring.md) is a business failure even when the
    configured success (code == 200) would hold."""
    tool = add(env, "py", "pySave")
    env.write(tool)
    turn = await env.send(call(tool, {"mode": "okfalse_200", "title": "季度总结"}), say())
    [o] = obs(turn, tool)
    assert not o.ok and o.code in (BUSINESS, "200"), o
    assert statuses(turn, tool) == [("SUCCESS", False)]


async def test_a_business_rule_failure_with_need_param_is_a_business_failure(env: Env):
    """Issue: a skill's failure envelope without exception or timeout is a business failure (SUCCESS, businessOk
    false, TOOL_BUSINESS_FAILED); only "a schema rejection of the input" is a params error. authoring.md tells skills
    to answer their own business-rule failures as `need_param` + `error_type: recoverable` (the admin-fill example):
    a skill's own answer is not the platform's schema rejection. It also grounds a bare question (docs)."""
    tool = add(env, "py", "pyFind")
    env.read(tool)
    turn = await env.send(call(tool, {"mode": "self_need_param"}), follow_up("哪个仓库？"), say())
    [o] = obs(turn, tool)
    assert len(env.calls(tool)) == 1
    assert (o.code, statuses(turn, tool)) == (BUSINESS, [("SUCCESS", False)]), o
    assert turn.checkpoint and turn.checkpoint["type"] == "FOLLOW_UP", turn.as_dict()


INLINE = """exec:
  primary:
    type: INLINE_SHELL
    command: |
      echo "{{\\"tool\\": \\"inlSave\\", \\"argv\\": \\"$*\\"}}" >> {log}
      case "$*" in *timeout*) sleep 5;; esac
      echo '{{"code": 200, "data": {{"id": "i1"}}}}'
  timeout: 1.5
"""


async def test_inline_shell_write_success_then_timeout(env: Env):
    """authoring.md INLINE_SHELL (`bash -c command`, input as argv): a success is SUCCESS; a wall-clock timeout of the
    write is TOOL_TIMEOUT / UNKNOWN and the identical call is WRITE_PENDING_VERIFY; one execution per model call."""
    env._skill("inlSave", INLINE.format(log=env.log), {}, None)
    env.write("inlSave")
    turn = await env.send(
        call("inlSave", {"mode": "ok", "title": "甲"}),
        call("inlSave", {"mode": "timeout", "title": "乙"}),
        call("inlSave", {"mode": "timeout", "title": "乙"}),
        say(),
    )
    assert [o.code for o in obs(turn, "inlSave")] == [None, TIMEOUT, PENDING_VERIFY], turn.observations
    assert [s for s, _ in statuses(turn, "inlSave")] == ["SUCCESS", "UNKNOWN"]
    assert len(env.calls("inlSave")) == 2


async def test_idempotency_key_joins_values_in_path_order_skipping_missing_ones(env: Env):
    """docs §14.2: `["spaceId", "title"]` with 7 and "周报" hashes "7周报" — paths in lexicographic order, a
    non-text value as canonical JSON, missing paths skipped. Here ["zone", "title", "count"] with count 7,
    title 周报 and no zone → sha256("7周报"), seen by a CLI skill in SKILL_CONTEXT."""
    tool = add(env, "cli", "cliSave")
    env.write(tool, idempotencyKey=["zone", "title", "count"], args={"mode": FREE, "title": FREE, "count": FREE})
    turn = await env.send(call(tool, {"mode": "ok", "title": "周报", "count": 7}), finish("好"))
    assert turn.status == "DONE", turn.as_dict()
    [row] = env.calls(tool)
    assert row["ctx"].get("idempotency_key") == hashlib.sha256("7周报".encode()).hexdigest(), row["ctx"]


async def test_identical_write_is_judged_by_tool_and_key_not_by_other_arguments(env: Env):
    """§14.2: "工具名 + 幂等键" decides identity: after a business success keyed by title, a call with the same
    title and another `mode` returns the earlier result without running the shell skill."""
    tool = add(env, "sh", "shSave")
    env.write(tool)
    turn = await env.send(
        call(tool, {"mode": "ok", "title": "季度总结"}), call(tool, {"mode": "business", "title": "季度总结"}), say()
    )
    assert [o.ok for o in obs(turn, tool)] == [True, True], turn.observations
    assert len(env.calls(tool)) == 1


# =====================================================================================================================
# 4. never retried; the core's failure budget and loop detection do not apply inside the contract runtime
# =====================================================================================================================


@pytest.mark.parametrize(
    "kind,mode,code",
    [
        ("py", "io", IO_ERROR),
        ("py", "nonretriable", BUSINESS),
        ("http", "s503", BUSINESS),
    ],
)
async def test_repeated_failing_reads_all_run_no_core_ban_or_loop_detection(
    env: Env, server, kind: str, mode: str, code: str
):
    """Issue: only real executions are skill runs; the core's per-turn failure budget (ban after two failures, or one
    non_retriable; loop_detected at the 3rd identical call) does not apply inside the contract runtime, and the
    fingerprint counts only successful calls. Three identical failing reads: three real executions, same code."""
    srv, base = server
    tool = add(env, kind, f"{kind}Find", base)
    env.read(tool)
    args = {"mode": mode}
    turn = await env.send(call(tool, args), call(tool, args), call(tool, args), say())
    assert [o.code for o in obs(turn, tool)] == [code, code, code], turn.observations
    assert executions(env, srv, kind, tool) == 3


@pytest.mark.parametrize("kind", kind_params(["http"]))
async def test_fingerprint_trips_the_fourth_identical_success_of_a_subprocess_or_http_tool(env: Env, server, kind: str):
    """Issue: with the default limit 3, identical successful calls 1–3 run and the 4th trips FINGERPRINT_TRIP and
    fails the node: three executions."""
    srv, base = server
    tool = add(env, kind, f"{kind}Find", base)
    env.read(tool)
    args = {"mode": "ok"}
    turn = await env.send(*[call(tool, args)] * 4, say())
    assert [o.code for o in obs(turn, tool)] == [None, None, None, "agent_runtime.40026"]
    assert turn.status == "FAILED"
    assert executions(env, srv, kind, tool) == 3


@pytest.mark.parametrize("mode,code", [("perm", IO_ERROR)])
async def test_an_uncertain_write_is_not_run_again_by_a_later_message(env: Env, mode: str, code: str):
    """Writes are never retried: an UNKNOWN write (IO / unknown error) without a verify tool is asked about at a
    VERIFY checkpoint when the node reopens (§14.3) — the skill does not run again; one execution in all."""
    tool = add(env, "py", "pySave")
    env.write(tool)
    sid = env.sid("again")
    script = [call(tool, {"mode": mode, "title": "季度总结"}), say("出错了"), finish("好")]
    first = await env.send(*script, sid=sid)
    assert [o.code for o in obs(first, tool)] == [code]
    second = await env.send(*script, sid=sid, message="怎么样了？")
    assert second.status == "SUSPENDED" and second.checkpoint and second.checkpoint["type"] == "VERIFY", second
    assert len(env.calls(tool)) == 1


# =====================================================================================================================
# §14.3: settling the UNKNOWN write of a subprocess / HTTP / in-process tool
# =====================================================================================================================


@pytest.mark.parametrize(
    "verify_mode,status", [("ok", "SUCCESS"), ("business", "FAILED"), ("io", "UNKNOWN")], ids=["found", "absent", "err"]
)
async def test_unknown_write_is_verified_by_its_verify_tool_when_the_node_reopens(
    env: Env, verify_mode: str, status: str
):
    """§14.3 / §6.4: the node reopens on the next message → the verify tool runs once (its success → the write
    SUCCESS, its business failure → FAILED, a failed verify call leaves it UNKNOWN); the write itself never runs
    again. Write: a shell skill timing out; verify: an in-process read whose `success` is code == 200."""
    write = add(env, "sh", "shSave")
    check = add(env, "py", "pyCheck")
    env.write(write, verify=check, verify_mode=verify_mode)
    env.read(check, success=OK200)
    sid = env.sid("ver")
    script = [call(write, {"mode": "timeout", "title": "季度总结"}), say("超时了"), say("再看看")]
    first = await env.send(*script, sid=sid)
    assert [o.code for o in obs(first, write)] == [TIMEOUT]
    second = await env.send(*script, sid=sid, message="保存好了吗？")
    evidence = {e["id"]: e["status"] for e in second.evidence if e["tool"] == write}
    assert list(evidence.values()) == [status], second.evidence
    assert len(env.calls(write)) == 1
    checks = env.calls(check)
    assert len(checks) == 1 and checks[0]["input"].get("title") == "季度总结", checks
    # docs: the automatic verify call emits its label as a progress event like any tool call
    assert {"type": "tool", "tool": check, "label": f"正在查询{check}"} in second.events, second.events


async def test_unknown_http_write_is_verified_by_an_http_read(env: Env, server):
    """The same across HTTP: an HTTP write timing out, an HTTP verify tool (GET) whose success is `found` TRUTHY;
    the server says found → the write is SUCCESS; one write request, one verify request."""
    srv, base = server
    srv.found = True
    add(env, "http", "httpSave", base, timeout=0.5)
    add(env, "http", "httpCheck", base, method="GET", url=base + "/httpCheck/check")
    env.write("httpSave", verify="httpCheck")
    env.read("httpCheck", success={"path": "found", "op": "TRUTHY"}, extracts=None)
    sid = env.sid("hv")
    script = [call("httpSave", {"mode": "slow", "title": "季度总结"}), say("超时了"), finish("已保存")]
    first = await env.send(*script, sid=sid)
    assert [o.code for o in obs(first, "httpSave")] == [TIMEOUT]
    second = await env.send(*script, sid=sid, message="保存好了吗？")
    assert [e["status"] for e in second.evidence if e["tool"] == "httpSave"] == ["SUCCESS"], second.evidence
    assert second.status == "DONE", second.as_dict()
    assert len(srv.of("httpSave")) == 1 and len(srv.of("httpCheck")) == 1


@pytest.mark.parametrize("kind", kind_params(["cli", "http"]))
async def test_unknown_write_without_verify_asks_at_a_verify_checkpoint(env: Env, server, kind: str):
    """§14.3: no verify → a VERIFY checkpoint when the node reopens; CONFIRM = it took effect (SUCCESS) and the node
    continues to finish; the write ran once."""
    srv, base = server
    kw: dict[str, Any] = {"wall": 1} if kind == "http" else {}
    tool = add(env, kind, f"{kind}Save", base, **kw)
    env.write(tool)
    sid = env.sid("vc")
    script = [call(tool, {"mode": "timeout", "title": "季度总结"}), say("超时了"), finish("已保存")]
    first = await env.send(*script, sid=sid)
    assert [o.code for o in obs(first, tool)] == [TIMEOUT]
    second = await env.send(*script, sid=sid, message="保存好了吗？")
    assert second.status == "SUSPENDED" and second.checkpoint and second.checkpoint["type"] == "VERIFY", second
    question = second.checkpoint["question"]  # docs: names the write (its label), lists its arguments
    assert f"不确定「正在保存{tool}」是否已经生效" in question and "title：季度总结" in question, question
    assert "所有者" not in question, question  # platform-injected arguments are hidden, as in an approval
    env.build()
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*script))
        done = await agent.resume(sid, "CONFIRM")
    assert done.status == "DONE", done.as_dict()
    assert [e["status"] for e in done.evidence if e["tool"] == tool] == ["SUCCESS"]
    assert executions(env, srv, kind, tool) == 1


async def test_verify_reject_makes_the_write_failed_and_a_new_identical_call_runs_once(env: Env):
    """Issue: VERIFY REJECT = it did not take effect (FAILED), the node continues; §14.2 a FAILED write may be called
    again: the model's identical call runs the skill a second time (once)."""
    tool = add(env, "sh", "shSave")
    env.write(tool)
    sid = env.sid("vr")
    script = [
        call(tool, {"mode": "timeout", "title": "季度总结"}),
        say("超时了"),
        call(tool, {"mode": "ok", "title": "季度总结"}),
        finish("已保存"),
    ]
    await env.send(*script, sid=sid)
    second = await env.send(*script, sid=sid, message="保存好了吗？")
    assert second.checkpoint and second.checkpoint["type"] == "VERIFY"
    env.build()
    async with SkillYard() as yard:
        agent = await yard.agent(env.dir, model=env.script(*script))
        done = await agent.resume(sid, "REJECT")
    assert done.status == "DONE", done.as_dict()
    assert [e["status"] for e in done.evidence if e["tool"] == tool] == ["FAILED", "SUCCESS"]
    assert len(env.calls(tool)) == 2


# =====================================================================================================================
# 5. subcommand skills (`cli_commands`, fanned out as `<skill>__<sub>`) as business tools
# =====================================================================================================================

SUB_CLI = """
import argparse, json, os, pathlib, sys, time

LOG = pathlib.Path({log!r})


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd")
    add = sub.add_parser("add")
    add.add_argument("--text")
    add.add_argument("--mode", default="ok")
    lst = sub.add_parser("list")
    lst.add_argument("--mode", default="ok")
    args, _ = parser.parse_known_args()
    data = json.loads(os.environ.get("SKILL_INPUT") or "{{}}")
    ctx = json.loads(os.environ.get("SKILL_CONTEXT") or "{{}}")
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": "notes", "cmd": args.cmd, "input": data, "ctx": ctx, "argv": sys.argv[1:]}},
                           ensure_ascii=False) + "\\n")
    if args.mode == "timeout":
        time.sleep(5)
    if args.mode == "business":
        print(json.dumps({{"ok": False, "code": "E42", "msg": "no such note"}}))
        return
    if args.cmd == "list":
        print(json.dumps({{"code": 200, "data": {{"records": [] if args.mode == "empty" else [{{"id": "n1"}}]}}}}))
        return
    print(json.dumps({{"code": 200, "data": {{"id": "n2", "text": args.text}}}}))


if __name__ == "__main__":
    main()
"""

SUB_INPROC = """
import asyncio, json, pathlib

LOG = pathlib.Path({log!r})


async def execute(input, ctx):
    with LOG.open("a", encoding="utf-8") as f:
        f.write(json.dumps({{"tool": "memo", "input": input, "ctx": {{"idempotency_key": ctx.get("idempotency_key"),
                            "user_id": ctx.get("user_id")}}}}, ensure_ascii=False) + "\\n")
    if input.get("mode") == "timeout":
        await asyncio.sleep(5)
    if input.get("mode") == "io":
        raise PermissionError("read-only volume")
    return {{"code": 200, "data": {{"records": [{{"id": "m1", "sub": input.get("_subcommand")}}]}}}}
"""

CLI_COMMANDS = """cli_commands:
  add:
    properties: {text: {type: string}, mode: {type: string}, count: {type: integer}}
    required: [text]
  list:
    properties: {mode: {type: string}}
"""


def notes_skill(env: Env, kind: str = "cli", base: str | None = None) -> None:
    """`notes` fanned out as notes__add (a WRITE keyed by text) and notes__list (a read)."""
    if kind == "cli":
        code = textwrap.dedent(SUB_CLI).format(log=str(env.log))
        env._skill("notes", "exec: {config: tool.py, timeout: 1.5}\n" + CLI_COMMANDS, {"tool.py": code}, {})
    elif kind == "py":
        code = textwrap.dedent(SUB_INPROC).format(log=str(env.log))
        env._skill("memo", "exec: {timeout: 1}\n" + CLI_COMMANDS, {"handler.py": code}, {})
        (env.skills / "memo" / "schema.json").unlink()
    else:
        assert base
        toml = f'[request]\nmethod = "POST"\nurl = "{base}/notes/ok"\ntimeout = 5\n'
        env._skill("notes", "exec: {config: api.toml}\n" + CLI_COMMANDS, {"api.toml": toml}, {})
    if kind == "cli":
        (env.skills / "notes" / "schema.json").unlink()
    if kind == "http":
        (env.skills / "notes" / "schema.json").unlink()
    skill = "memo" if kind == "py" else "notes"
    env.write(
        f"{skill}__add",
        idempotencyKey=["text"],
        args={"text": FREE, "mode": FREE, "count": FREE},
        error=ERROR_CODE,
    )
    env.read(f"{skill}__list", args={"mode": FREE})


async def test_cli_subcommand_read_runs_with_the_subcommand_first_on_argv(env: Env):
    """authoring.md: running a fan-out tool name restores `_subcommand`; a subprocess gets it as its first
    argument, then the flags; `_subcommand` never becomes a flag. The read succeeds through the chain."""
    notes_skill(env)
    turn = await env.send(call("notes__list", {"mode": "ok"}), finish("查到了"))
    [o] = obs(turn, "notes__list")
    assert o.ok and o.code is None, o
    assert turn.status == "DONE" and statuses(turn, "notes__list") == [("SUCCESS", True)]
    [row] = env.calls("notes")
    assert row["argv"][0] == "list" and row["cmd"] == "list", row
    assert "--_subcommand" not in row["argv"]


async def test_cli_subcommand_write_gets_its_flags_and_idempotency_key(env: Env):
    """A fanned-out WRITE (`notes__add`): argv `add --text …`, and the idempotency key (SHA-256 of `text`) in
    SKILL_CONTEXT; evidence SUCCESS; one execution."""
    notes_skill(env)
    turn = await env.send(call("notes__add", {"text": "买牛奶"}), finish("记下了"))
    assert turn.status == "DONE", turn.as_dict()
    [row] = env.calls("notes")
    assert row["argv"][:3] == ["add", "--text", "买牛奶"], row["argv"]
    assert row["ctx"].get("idempotency_key") == hashlib.sha256("买牛奶".encode()).hexdigest()


async def test_subcommand_required_field_is_checked_by_the_arg_policy(env: Env):
    """§13 step 1 against the subcommand's own schema (`add` requires `text`): ARG_REJECTED, nothing runs."""
    notes_skill(env)
    turn = await env.send(call("notes__add", {"mode": "ok"}), say())
    assert [o.code for o in obs(turn, "notes__add")] == [ARG_REJECTED]
    assert turn.evidence == [] and env.calls() == []


async def test_cli_subcommand_write_timeout_is_unknown_and_not_rerun(env: Env):
    """A fanned-out subprocess WRITE that times out: TOOL_TIMEOUT, UNKNOWN, the identical call WRITE_PENDING_VERIFY;
    one execution."""
    notes_skill(env)
    args = {"text": "买牛奶", "mode": "timeout"}
    turn = await env.send(call("notes__add", args), call("notes__add", args), say())
    assert [o.code for o in obs(turn, "notes__add")] == [TIMEOUT, PENDING_VERIFY]
    assert [s for s, _ in statuses(turn, "notes__add")] == ["UNKNOWN"]
    assert len(env.calls("notes")) == 1


async def test_cli_subcommand_business_failure_and_empty_list(env: Env):
    """Business failure of a subcommand write (error.code E42, SUCCESS / businessOk false) and an empty subcommand
    read (a success that grounds a bare question)."""
    notes_skill(env)
    turn = await env.send(
        call("notes__add", {"text": "买牛奶", "mode": "business"}), call("notes__list", {"mode": "empty"}), follow_up()
    )
    assert [o.code for o in obs(turn, "notes__add")] == ["E42"]
    assert statuses(turn, "notes__add") == [("SUCCESS", False)]
    assert statuses(turn, "notes__list") == [("SUCCESS", True)]
    assert turn.checkpoint and turn.checkpoint["type"] == "FOLLOW_UP", turn.as_dict()


async def test_inprocess_subcommand_tool_sees_its_subcommand_and_key(env: Env):
    """authoring.md: running a fan-out tool name restores input["_subcommand"] — an in-process handler sees it; the
    write gets its idempotency key."""
    notes_skill(env, "py")
    turn = await env.send(call("memo__list", {"mode": "ok"}), call("memo__add", {"text": "买牛奶"}), finish("好"))
    assert turn.status == "DONE", turn.as_dict()
    rows = env.calls("memo")
    assert [r["input"].get("_subcommand") for r in rows] == ["list", "add"], rows
    assert rows[0]["ctx"]["idempotency_key"] is None
    assert rows[1]["ctx"]["idempotency_key"] == hashlib.sha256("买牛奶".encode()).hexdigest()


@pytest.mark.parametrize("mode,code,status", [("io", IO_ERROR, "UNKNOWN")])
async def test_inprocess_subcommand_write_failure_classes(env: Env, mode: str, code: str, status: str):
    """§14.4 for a fanned-out in-process write: timeout / PermissionError → UNKNOWN; one execution."""
    notes_skill(env, "py")
    turn = await env.send(call("memo__add", {"text": "买牛奶", "mode": mode}), say())
    assert [o.code for o in obs(turn, "memo__add")] == [code]
    assert [s for s, _ in statuses(turn, "memo__add")] == [status]
    assert len(env.calls("memo")) == 1


async def test_http_subcommand_tool_never_sends_the_subcommand(env: Env, server):
    """http-skills.md: fields starting with `_` (such as `_subcommand`) are never sent: the fanned-out HTTP write
    posts exactly its own fields."""
    srv, base = server
    notes_skill(env, "http", base)
    turn = await env.send(call("notes__add", {"text": "买牛奶"}), finish("记下了"))
    assert turn.status == "DONE", turn.as_dict()
    [hit] = srv.of("notes")
    assert json.loads(hit["body"]) == {"text": "买牛奶"}


async def test_a_model_supplied_subcommand_cannot_turn_a_read_tool_into_the_write(env: Env):
    """authoring.md: running a fan-out tool name *restores* `_subcommand` from the name. The model calling the read
    `notes__list` with `_subcommand: "add"` must not run `add` (a WRITE the contract gates): the skill runs `list`
    or the call is refused — never `add` without approval."""
    notes_skill(env)
    env.tools["notes__add"]["confirm"] = True  # the write needs approval
    turn = await env.send(call("notes__list", {"_subcommand": "add", "text": "买牛奶"}), say())
    ran = [r["cmd"] for r in env.calls("notes")]
    assert "add" not in ran, (ran, turn.observations)
