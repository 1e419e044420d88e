"""An agent whose contract skill lists business tools of every exec type a probe adds (in-process async and sync
Python, CLI subprocesses in Python, shell, node, ruby, go, and HTTP skills against a real server on 127.0.0.1)."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import textwrap
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml

from skillyard import SkillYard
from skillyard.agent import ErrorCode
from skillyard.agent.turn import TurnResult
from support.agent.probes import call

IDENTITY = {
    "user_id": "42",
    "org_id": "7",
    "actor_name": "Ada",
    "actor_id": "m-9",
    "org_name": "Acme",
    "actor_department_path": "/HQ/Sales/",
}


BUSINESS = "agent_runtime.40004"


TIMEOUT = "agent_runtime.40016"


IO_ERROR = "agent_runtime.40018"


ALL_CODES = {str(code) for code in ErrorCode}


FREE = {"sources": ["MODEL"], "required": False}


OK200 = {"path": "code", "op": "EQ", "value": 200}


ERROR_CODE = {"code": "code", "message": "msg"}


PY = sys.executable


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


def ruby_literal(value: Any) -> str:
    """A Ruby hash literal for a JSON value (keys as strings)."""
    return json.dumps(value).replace('": ', '" => ')


class ExecAgent:
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
        # The probes count their runs in a log beside the agent, outside any workspace: tier C keeps the host's view
        # of the files (the sandbox itself is tested in tests/executors/test_sandbox.py).
        monkeypatch.setenv("SKILLYARD_SANDBOX", "C")
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


def add(env: ExecAgent, kind: str, name: str, base: str | None = None, **kw: Any) -> str:
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


def executions(env: ExecAgent, srv: Server, kind: str, tool: str) -> int:
    """Real executions: lines the skill logged, or hits on the HTTP server."""
    return len(srv.of(tool)) if kind == "http" else len(env.calls(tool))


def follow_up(question: str = "要换个条件再查吗？") -> dict[str, Any]:
    return call("builtin_node_follow_up", {"question": question})


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


def notes_skill(env: ExecAgent, kind: str = "cli", base: str | None = None) -> None:
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
