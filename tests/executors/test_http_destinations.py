"""SSRF in HTTP skills: a host the skill's TOML writes out is the author's choice; a host from the input and every
redirect that leaves the written host go through the address guard of URL materialization."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import pytest

from skillyard import SkillYard
from support.local_http import QuietHandler, serve


class Target(QuietHandler):
    """The loopback-only service an attacker wants to reach; it records every request it gets."""

    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self._send(200, b'{"secret": "internal"}', "application/json")


class Redirector(QuietHandler):
    """The skill's own (literal) host: redirects where ``/to?u=URL`` says, or within itself."""

    target = ""

    def do_GET(self) -> None:
        if self.path.startswith("/away"):
            self._send(302, b"", "text/plain", {"Location": self.target})
        elif self.path.startswith("/home"):
            self._send(302, b"", "text/plain", {"Location": "/landed"})
        elif self.path.startswith("/loop"):
            self._send(302, b"", "text/plain", {"Location": "/loop"})
        else:
            self._send(200, b'{"landed": true}', "application/json")


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("SKILLYARD_ALLOW_PRIVATE_URLS", raising=False)


@pytest.fixture
def target() -> Iterator[str]:
    Target.hits.clear()
    with serve(Target) as url:
        yield url


@pytest.fixture
def redirector(target: str) -> Iterator[str]:
    Redirector.target = f"{target.replace('127.0.0.1', 'localhost')}/internal"
    with serve(Redirector) as url:
        yield url


def http_skill(make_skill, name: str, url: str) -> None:
    make_skill(
        name,
        f"name: {name}\ndescription: d\nexec: {{config: api.toml}}",
        files={"api.toml": f'[request]\nurl = "{url}"\n'},
    )


async def run(skills_root, name: str, input: dict) -> dict:
    async with SkillYard(skills_dirs=[skills_root], include_builtin=False) as yard:
        return await yard.run(name, input)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "0.0.0.0"])
async def test_a_host_from_the_input_is_guarded(make_skill, skills_root, target, host):
    port = target.rsplit(":", 1)[1]
    http_skill(make_skill, "fetcher", "http://{host}:" + port + "/api")
    envelope = await run(skills_root, "fetcher", {"host": host})
    assert envelope["ok"] is False and envelope["invalid_input"] is True and envelope["need_param"] == "host"
    assert "refused the address from its input" in envelope["error"]
    assert Target.hits == []


async def test_a_whole_url_from_the_input_reaches_nothing(make_skill, skills_root, target):
    """Placeholder values are URL-encoded whole, so an input cannot bring its own scheme and host along."""
    http_skill(make_skill, "proxy", "{base}/api")
    envelope = await run(skills_root, "proxy", {"base": target})
    assert envelope["ok"] is False and Target.hits == []


async def test_private_addresses_from_the_input_are_allowed_when_configured(
    make_skill, skills_root, target, monkeypatch
):
    monkeypatch.setenv("SKILLYARD_ALLOW_PRIVATE_URLS", "1")
    port = target.rsplit(":", 1)[1]
    http_skill(make_skill, "fetcher", "http://{host}:" + port + "/api")
    envelope = await run(skills_root, "fetcher", {"host": "127.0.0.1"})
    assert envelope["ok"] is True and envelope["secret"] == "internal" and Target.hits == ["/api"]


async def test_a_written_loopback_host_is_the_authors_choice(make_skill, skills_root, target):
    http_skill(make_skill, "local", f"{target}/api/{{item}}")
    envelope = await run(skills_root, "local", {"item": "../../x"})
    assert envelope["ok"] is True and Target.hits == ["/api/..%2F..%2Fx"]


async def test_a_redirect_away_from_the_written_host_is_refused(make_skill, skills_root, redirector):
    http_skill(make_skill, "hop", f"{redirector}/away")
    envelope = await run(skills_root, "hop", {})
    assert envelope["ok"] is False and envelope["refused_destination"] is True
    assert "redirected away from 127.0.0.1" in envelope["error"] and "loopback" in envelope["error"]
    assert Target.hits == []


async def test_a_redirect_to_an_ipv6_loopback_is_refused(make_skill, skills_root, redirector):
    Redirector.target = "http://[::1]:9/internal"
    http_skill(make_skill, "hop6", f"{redirector}/away")
    envelope = await run(skills_root, "hop6", {})
    assert envelope["ok"] is False and envelope["refused_destination"] is True and "::1" in envelope["error"]


async def test_a_redirect_within_the_written_host_is_followed(make_skill, skills_root, redirector):
    http_skill(make_skill, "home", f"{redirector}/home")
    assert (await run(skills_root, "home", {})) == {"landed": True, "ok": True, "success": True}


async def test_a_redirect_loop_is_bounded(make_skill, skills_root, redirector):
    http_skill(make_skill, "loop", f"{redirector}/loop")
    envelope = await run(skills_root, "loop", {})
    assert envelope["ok"] is False and "more than 10 redirects" in envelope["error"]
