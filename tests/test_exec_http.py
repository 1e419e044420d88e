"""The HTTP exec type against a real HTTP server on 127.0.0.1 (http.server in a thread)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from skillyard import SkillYard
from support.local_http import serve
from support.skills import run_skill


class Recorder(BaseHTTPRequestHandler):
    """Answers by path; every request is recorded so tests see exactly what went over the wire."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        parts = urlsplit(self.path)
        seen = {
            "method": self.command,
            "raw_path": parts.path,
            "query": parse_qs(parts.query),
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": body,
        }
        self.requests.append(seen)
        if parts.path.startswith("/price/"):
            self._send(
                200,
                {
                    "data": {
                        "symbol": unquote(parts.path[len("/price/") :]),
                        "price": 101.5,
                        "quotes": [{"at": "09:00"}, {"at": "10:00"}],
                    },
                    "meta": {"source": "test"},
                },
            )
        elif parts.path == "/echo":
            self._send(200, seen)
        elif parts.path == "/text":
            self._send(200, "plain words, not JSON", "text/plain")
        elif parts.path == "/down":
            self._send(503, "upstream is down: " + "x" * 2000, "text/plain")
        elif parts.path == "/missing":
            self._send(404, {"detail": "no such symbol"})
        elif parts.path == "/slow":
            time.sleep(1.5)
            self._send(200, {"late": True})
        else:
            self._send(500, {"unexpected": parts.path})

    def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        data = (json.dumps(payload) if content_type == "application/json" else payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up first (timeout tests)
            pass

    do_GET = do_POST = do_PUT = do_DELETE = _handle


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve(Recorder) as url:
        yield url


@pytest.fixture
def seen(server: str) -> list[dict[str, Any]]:
    Recorder.requests.clear()
    return Recorder.requests


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy configured on the machine must not sit between the tests and 127.0.0.1."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def http_skill(make_skill, name: str, toml: str, extra: str = "") -> Path:
    return make_skill(
        name, f"name: {name}\ndescription: d\nexec: {{config: api.toml}}\n{extra}", files={"api.toml": toml}
    )


PRICE = """
[request]
method = "GET"
url = "{base}/price/{{symbol}}"
headers = {{ Authorization = "Bearer ${{PRICE_API_KEY}}", X-Client = "skillyard" }}
query = ["limit"]
timeout = 10

[response]
path = "data"
"""


async def test_get_with_url_placeholder_query_header_and_response_path(
    make_skill, skills_root, server, seen, monkeypatch
):
    monkeypatch.setenv("PRICE_API_KEY", "key-from-env")
    http_skill(make_skill, "price", PRICE.format(base=server), "metadata: {openclaw: {primaryEnv: PRICE_API_KEY}}")
    env = await run_skill(skills_root, "price", {"symbol": "BRK/B class A", "limit": 5, "note": "not sent"})
    assert env["ok"] is True, env
    assert env["symbol"] == "BRK/B class A" and env["price"] == 101.5
    assert "meta" not in env
    [request] = seen
    assert request["method"] == "GET"
    assert request["raw_path"] == "/price/BRK%2FB%20class%20A"
    assert request["query"] == {"limit": ["5"]}
    assert request["headers"]["authorization"] == "Bearer key-from-env"
    assert request["headers"]["x-client"] == "skillyard"
    assert request["body"] == ""  # GET: body defaults to none, so 'note' is not sent


async def test_header_variables_never_read_undeclared_host_variables(
    make_skill, skills_root, server, seen, monkeypatch
):
    monkeypatch.setenv("PRICE_API_KEY", "host-secret")
    http_skill(make_skill, "sneaky", PRICE.format(base=server))
    env = await run_skill(skills_root, "sneaky", {"symbol": "X"})
    assert env["ok"] is False and "${PRICE_API_KEY}" in env["error"] and "declare it" in env["error"]
    assert seen == [] and "host-secret" not in json.dumps(env)


async def test_header_variable_from_configs_beats_the_environment(make_skill, skills_root, server, seen, monkeypatch):
    monkeypatch.setenv("PRICE_API_KEY", "key-from-env")
    http_skill(make_skill, "price", PRICE.format(base=server))
    env = await run_skill(skills_root, "price", {"symbol": "AAPL"}, skill_args={"PRICE_API_KEY": "key-from-configs"})
    assert env["ok"] is True, env
    assert seen[0]["headers"]["authorization"] == "Bearer key-from-configs"


async def test_header_variable_from_stored_configs(make_skill, skills_root, server, seen, db_env, monkeypatch):
    monkeypatch.delenv("PRICE_API_KEY", raising=False)
    http_skill(
        make_skill,
        "price",
        PRICE.format(base=server),
        extra="metadata: {openclaw: {primaryEnv: PRICE_API_KEY, requires: {env: [PRICE_API_KEY]}}}",
    )
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        missing = await yard.run("price", {"symbol": "AAPL"}, context={"role_id": "analyst"})
        assert missing["ok"] is False and missing["needs_config"] == ["PRICE_API_KEY"]
        await yard.configs.set("analyst", "price", {"PRICE_API_KEY": "stored-key"})
        env = await yard.run("price", {"symbol": "AAPL"}, context={"role_id": "analyst"})
    assert env["ok"] is True, env
    assert seen[-1]["headers"]["authorization"] == "Bearer stored-key"


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        ("json", "application/json", {"qty": 3, "side": "buy", "tags": ["a", "b"], "rush": True, "meta": {"k": 1}}),
        (
            "form",
            "application/x-www-form-urlencoded",
            {"qty": ["3"], "side": ["buy"], "tags": ["a", "b"], "rush": ["true"], "meta": ['{"k": 1}']},
        ),
        ("none", None, ""),
    ],
)
async def test_body_kinds(make_skill, skills_root, server, seen, body, content_type, expected):
    http_skill(
        make_skill,
        "order",
        f"""
[request]
method = "POST"
url = "{server}/echo"
query = ["account", "ids"]
body = "{body}"
""",
    )
    env = await run_skill(
        skills_root,
        "order",
        {
            "account": "acc 1",
            "ids": [7, 8],
            "qty": 3,
            "side": "buy",
            "tags": ["a", "b"],
            "rush": True,
            "meta": {"k": 1},
        },
    )
    assert env["ok"] is True, env
    [request] = seen
    assert request["method"] == "POST"
    assert request["query"] == {"account": ["acc 1"], "ids": ["7", "8"]}
    if body == "json":
        assert json.loads(request["body"]) == expected
    elif body == "form":
        assert parse_qs(request["body"]) == expected
    else:
        assert request["body"] == expected
    assert request["headers"].get("content-type") == content_type


async def test_post_defaults_to_a_json_body(make_skill, skills_root, server, seen):
    http_skill(make_skill, "create", f'[request]\nmethod = "POST"\nurl = "{server}/echo"\n')
    env = await run_skill(skills_root, "create", {"title": "hello"})
    assert env["ok"] is True
    assert json.loads(seen[0]["body"]) == {"title": "hello"}


async def test_response_path_into_a_list(make_skill, skills_root, server):
    toml = f'[request]\nurl = "{server}/price/{{symbol}}"\n[response]\npath = "data.quotes.1"\n'
    http_skill(make_skill, "quotes", toml)
    env = await run_skill(skills_root, "quotes", {"symbol": "X"})
    assert env == {"at": "10:00", "ok": True, "success": True}


async def test_response_path_missing_from_the_response_is_a_failure(make_skill, skills_root, server):
    toml = f'[request]\nurl = "{server}/price/{{symbol}}"\n[response]\npath = "data.nope"\n'
    http_skill(make_skill, "wrongpath", toml)
    env = await run_skill(skills_root, "wrongpath", {"symbol": "X"})
    assert env["ok"] is False and "'data.nope' is not in the response" in env["error"]


async def test_whole_json_without_response_path(make_skill, skills_root, server):
    http_skill(make_skill, "whole", f'[request]\nurl = "{server}/price/{{symbol}}"\n')
    env = await run_skill(skills_root, "whole", {"symbol": "X"})
    assert env["meta"] == {"source": "test"} and env["data"]["symbol"] == "X"


async def test_non_json_body_is_returned_as_text(make_skill, skills_root, server):
    http_skill(make_skill, "texty", f'[request]\nurl = "{server}/text"\n')
    env = await run_skill(skills_root, "texty")
    assert env["ok"] is True
    assert env["output"] == "plain words, not JSON"


@pytest.mark.parametrize(
    ("path", "status", "fragment"), [("/down", 503, "upstream is down"), ("/missing", 404, "no such symbol")]
)
async def test_non_2xx_is_a_failure_with_status_and_excerpt(make_skill, skills_root, server, path, status, fragment):
    http_skill(make_skill, "failing", f'[request]\nurl = "{server}{path}"\n')
    env = await run_skill(skills_root, "failing")
    assert env["ok"] is False and env["success"] is False
    assert env["status"] == status
    assert fragment in env["body_excerpt"] and fragment in env["error"]
    assert str(status) in env["error"]
    assert len(env["body_excerpt"]) <= 500


async def test_connection_refused(make_skill, skills_root):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    http_skill(make_skill, "nobody", f'[request]\nurl = "http://127.0.0.1:{port}/x"\n')
    env = await run_skill(skills_root, "nobody")
    assert env["ok"] is False
    assert env["exception_type"] == "ConnectionRefusedError"
    assert f"127.0.0.1:{port}" in env["error"]


async def test_request_timeout(make_skill, skills_root, server):
    http_skill(make_skill, "slowpoke", f'[request]\nurl = "{server}/slow"\ntimeout = 0.3\n')
    started = time.monotonic()
    env = await run_skill(skills_root, "slowpoke")
    assert time.monotonic() - started < 1.4
    assert env["ok"] is False and env["timed_out"] is True


async def test_exec_timeout_is_the_wall_clock(make_skill, skills_root, server):
    make_skill(
        "walled",
        "name: walled\ndescription: d\nexec: {config: api.toml, timeout: 0.5}",
        files={"api.toml": f'[request]\nurl = "{server}/slow"\ntimeout = 10\n'},
    )
    env = await run_skill(skills_root, "walled")
    assert env["ok"] is False and env["timed_out"] is True
    assert "wall clock" in env["error"]


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        ('[request\nurl = "http://127.0.0.1/"\n', "cannot read api.toml"),
        ('[response]\npath = "data"\n', "needs a [request] table with url"),
        ('[request]\nurl = "http://127.0.0.1/"\nbody = "xml"\n', "request.body must be one of json, form, none"),
        ('[request]\nurl = "http://127.0.0.1/"\nheaders = "Accept: x"\n', "request.headers must be a table"),
        ('[request]\nurl = "http://127.0.0.1/"\nquery = "limit"\n', "request.query must be a list"),
        ('[request]\nurl = "http://127.0.0.1/"\ntimeout = "soon"\n', "request.timeout must be a positive number"),
    ],
)
async def test_bad_spec_is_a_clear_config_failure(make_skill, skills_root, toml, fragment):
    http_skill(make_skill, "badspec", toml)
    env = await run_skill(skills_root, "badspec")
    assert env["ok"] is False
    assert env["error_type"] == "config" and env["non_retriable"] is True
    assert fragment in env["error"] and "badspec" in env["error"]


async def test_missing_url_field_asks_for_it(make_skill, skills_root, server, seen):
    http_skill(make_skill, "needs_symbol", f'[request]\nurl = "{server}/price/{{symbol}}"\n')
    env = await run_skill(skills_root, "needs_symbol", {"limit": 1})
    assert env["ok"] is False
    assert env["need_param"] == "symbol" and env["error_type"] == "recoverable"
    assert "symbol" in env["error"]
    assert seen == []
