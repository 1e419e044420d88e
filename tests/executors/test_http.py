"""The HTTP exec type (executors/http.py) against real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, unquote, urlparse, urlsplit

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
        elif parts.path == "/deep":  # JSON nested past what Python's json reads
            self._send(200, "[" * 5000 + "]" * 5000, "text/plain")
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


class ApiHandler(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _reply(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        url = urlparse(self.path)
        rec = {
            "method": self.command,
            "path": url.path,
            "raw_path": self.path,
            "query": parse_qs(url.query),
            "headers": dict(self.headers),
            "body": raw.decode(),
        }
        ApiHandler.seen.append(rec)
        if url.path.startswith("/fail"):
            self._reply(503, b"upstream exploded: detail-xyz", "text/plain")
        elif url.path.startswith("/text"):
            self._reply(200, b"plain body here", "text/plain")
        else:
            self._reply(200, json.dumps({"data": {"echo": rec, "n": 7}, "meta": {"v": 1}}).encode())

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle


@pytest.fixture
def api():
    ApiHandler.seen = []
    with serve(ApiHandler) as base:
        yield base


def api_skill(make_skill, name: str, toml: str, extra: str = "", schema: dict | None = None) -> Path:
    files = {"api.toml": toml}
    if schema:
        files["schema.json"] = json.dumps(schema)
    return make_skill(
        name, frontmatter=f"name: {name}\ndescription: d\nexec:\n  config: api.toml\n{extra}", files=files
    )


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


async def test_a_response_nested_past_what_json_reads_is_a_failure_naming_it(make_skill, skills_root, server):
    http_skill(make_skill, "deep", f'[request]\nurl = "{server}/deep"\n')
    env = await run_skill(skills_root, "deep")
    assert env["ok"] is False and "nested too deeply" in env["error"] and env["status"] == 200, env
    assert "RecursionError" not in json.dumps(env)


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


async def test_http_get_url_encoding_query_headers_path(make_skill, skills_root, api):
    """Issue HTTP TOML: '`{field}` filled from input, URL-encoded', 'headers ... `${VAR}` from configs', 'query =
    ["limit"]', '[response] path = "data"'."""
    api_skill(
        make_skill,
        "price",
        f"""
        [request]
        method = "GET"
        url = "{api}/price/{{symbol}}"
        headers = {{ Authorization = "Bearer ${{PRICE_API_KEY}}" }}
        query = ["limit"]
        timeout = 10
        [response]
        path = "data"
    """,
        extra="metadata:\n  openclaw:\n    requires:\n      env: [PRICE_API_KEY]",
    )
    env = await run_skill(
        skills_root, "price", {"symbol": "BRK/A b&c", "limit": 5}, skill_configs={"PRICE_API_KEY": "k-123"}
    )
    assert env["ok"] is True, env
    rec = ApiHandler.seen[-1]
    assert rec["raw_path"].startswith("/price/BRK%2FA%20b%26c") or rec["raw_path"].startswith("/price/BRK%2FA+b%26c")
    assert rec["query"] == {"limit": ["5"]}
    assert rec["headers"]["Authorization"] == "Bearer k-123"
    assert env["n"] == 7 and "meta" not in env


async def test_http_header_var_from_environment(make_skill, skills_root, api, monkeypatch):
    """Issue HTTP TOML: '`${VAR}` from configs, then the environment'."""
    monkeypatch.setenv("PRICE_ENV_KEY", "env-456")
    api_skill(
        make_skill,
        "price2",
        f"""
        [request]
        url = "{api}/p"
        headers = {{ X-Key = "${{PRICE_ENV_KEY}}" }}
    """,
        extra="metadata:\n  openclaw:\n    primaryEnv: PRICE_ENV_KEY",
    )
    env = await run_skill(skills_root, "price2", {})
    assert env["ok"] is True and ApiHandler.seen[-1]["headers"]["X-Key"] == "env-456"


async def test_http_post_json_body(make_skill, skills_root, api):
    """Issue HTTP TOML: 'body = "json" # json | form | none: the remaining input fields as the body'."""
    api_skill(
        make_skill,
        "post",
        f"""
        [request]
        method = "POST"
        url = "{api}/items/{{id}}"
        query = ["limit"]
        body = "json"
    """,
    )
    env = await run_skill(skills_root, "post", {"id": "7", "limit": 2, "name": "x", "tags": ["a"]})
    assert env["ok"] is True
    rec = ApiHandler.seen[-1]
    assert rec["method"] == "POST" and rec["path"] == "/items/7"
    assert json.loads(rec["body"]) == {"name": "x", "tags": ["a"]}
    assert "json" in rec["headers"].get("Content-Type", "")


async def test_http_form_body(make_skill, skills_root, api):
    """Issue HTTP TOML: 'body = ... form'."""
    api_skill(
        make_skill,
        "form",
        f"""
        [request]
        method = "PUT"
        url = "{api}/f"
        body = "form"
    """,
    )
    env = await run_skill(skills_root, "form", {"a": "1", "b": "two words"})
    assert env["ok"] is True
    rec = ApiHandler.seen[-1]
    assert rec["method"] == "PUT" and parse_qs(rec["body"]) == {"a": ["1"], "b": ["two words"]}


async def test_http_body_none(make_skill, skills_root, api):
    """Issue HTTP TOML: 'body = ... none'."""
    api_skill(
        make_skill,
        "nob",
        f"""
        [request]
        method = "DELETE"
        url = "{api}/d"
        body = "none"
    """,
    )
    env = await run_skill(skills_root, "nob", {"a": "1"})
    assert env["ok"] is True and ApiHandler.seen[-1]["body"] == ""


async def test_http_non_2xx(make_skill, skills_root, api):
    """Issue: 'Non-2xx → failure envelope with status and a body excerpt'."""
    api_skill(
        make_skill,
        "bad",
        f"""
        [request]
        url = "{api}/fail"
    """,
    )
    env = await run_skill(skills_root, "bad", {})
    assert env["ok"] is False and env["success"] is False
    assert env["status"] == 503 and "detail-xyz" in env["body_excerpt"]


async def test_http_non_json_body_text(make_skill, skills_root, api):
    """Issue: 'a non-JSON body is returned as text'."""
    api_skill(
        make_skill,
        "txt",
        f"""
        [request]
        url = "{api}/text"
    """,
    )
    env = await run_skill(skills_root, "txt", {})
    assert env["ok"] is True and env["output"] == "plain body here"


async def test_http_connection_refused(make_skill, skills_root):
    """Issue: exceptions become envelopes with 'exception_type' ... 'ConnectionRefusedError'; never raises."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    api_skill(
        make_skill,
        "down",
        f"""
        [request]
        url = "http://127.0.0.1:{port}/x"
        timeout = 5
    """,
    )
    env = await run_skill(skills_root, "down", {})
    assert env["ok"] is False and env["error"]


async def test_http_secret_scrubbed_from_body_excerpt(make_skill, skills_root):
    """docs/authoring.md: credential values 'are replaced by `***` in ... `body_excerpt`'."""

    class Echo401(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = f"bad token {self.headers.get('Authorization')}".encode()
            self.send_response(401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serve(Echo401) as base:
        api_skill(
            make_skill,
            "e401",
            f"""
            [request]
            url = "{base}/x"
            headers = {{ Authorization = "Bearer ${{E401_TOKEN}}" }}
        """,
            extra="metadata:\n  openclaw:\n    requires:\n      env: [E401_TOKEN]",
        )
        env = await run_skill(skills_root, "e401", {}, skill_configs={"E401_TOKEN": "tok-very-secret"})
    assert env["ok"] is False and env["status"] == 401
    assert "tok-very-secret" not in json.dumps(env)


async def test_http_schema_credential_not_sent_from_model(make_skill, skills_root, api):
    """Issue: credential parameters: 'a value passed in the input for them is ignored'."""
    api_skill(
        make_skill,
        "hc",
        f"""
        [request]
        url = "{api}/q"
        query = ["q", "api_key"]
    """,
        schema={"type": "object", "properties": {"q": {"type": "string"}, "api_key": {"type": "string"}}},
    )
    env = await run_skill(skills_root, "hc", {"q": "z", "api_key": "from-model"})
    assert env["ok"] is True
    assert ApiHandler.seen[-1]["query"].get("api_key") != ["from-model"]


async def test_http_missing_placeholder_need_param(make_skill, skills_root, api):
    """docs/http-skills.md: 'A placeholder without a matching input field answers a recoverable failure with
    `need_param`.'"""
    api_skill(
        make_skill,
        "ph",
        f"""
        [request]
        url = "{api}/x/{{sym}}"
    """,
    )
    env = await run_skill(skills_root, "ph", {})
    assert env["ok"] is False and env["need_param"] == "sym" and env["error_type"] == "recoverable"


async def test_http_response_path_list_index_and_non_object(make_skill, skills_root, api):
    """docs/http-skills.md: '`data.items.0.id`: keys, and list indexes as numbers' ... 'any other value as `{"result":
    value}`'."""
    api_skill(
        make_skill,
        "idx",
        f"""
        [request]
        url = "{api}/x"
        [response]
        path = "data.echo.query"
    """,
    )
    env = await run_skill(skills_root, "idx", {})
    assert env["ok"] is True and env == {**env, "ok": True}


async def test_http_query_list_repeated(make_skill, skills_root, api):
    """docs/http-skills.md: 'A list value repeats the parameter (`tags=a&tags=b`)'."""
    api_skill(
        make_skill,
        "ql",
        f"""
        [request]
        url = "{api}/x"
        query = ["tags"]
    """,
    )
    env = await run_skill(skills_root, "ql", {"tags": ["a", "b"]})
    assert env["ok"] is True and ApiHandler.seen[-1]["query"] == {"tags": ["a", "b"]}


async def test_http_underscore_fields_never_sent(make_skill, skills_root, api):
    """docs/http-skills.md: 'Fields starting with `_` (such as `_subcommand`) are never sent.'"""
    api_skill(
        make_skill,
        "us",
        f"""
        [request]
        method = "POST"
        url = "{api}/x"
    """,
        extra="cli_commands:\n  go: {}",
    )
    env = await run_skill(skills_root, "us__go", {"a": 1})
    assert env["ok"] is True and json.loads(ApiHandler.seen[-1]["body"]) == {"a": 1}


async def test_http_exec_timeout_is_wall_clock(make_skill, skills_root):
    """Issue: '`exec.timeout` is the wall clock of that skill whatever its exec type'; 'a run stopped by its wall clock
    says `timed_out: true`'."""

    class Slow(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            time.sleep(5)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    with serve(Slow) as base:
        api_skill(
            make_skill,
            "slowhttp",
            f"""
            [request]
            url = "{base}/x"
            timeout = 30
        """,
            extra="  timeout: 0.3",
        )
        env = await run_skill(skills_root, "slowhttp", {})
    assert env["ok"] is False and env["timed_out"] is True
