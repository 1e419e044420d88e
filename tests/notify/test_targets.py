"""Which targets notify may reach: raw Apprise URLs only where the role's admin allowed them, URLs Apprise itself
accepts, public hosts only (unless SKILLYARD_ALLOW_PRIVATE_URLS=1), never a redirect."""

from __future__ import annotations

import asyncio

import pytest

from support.cli import invoke
from support.local_http import QuietHandler, serve


def _port(receiver) -> str:
    return receiver.base.rsplit(":", 1)[1]


async def test_a_raw_url_is_refused_until_the_admin_allows_it(host, receiver):
    url = f"json://127.0.0.1:{_port(receiver)}/raw"
    refused = await host.notify(message="x", target=url)
    assert refused["need_param"] == "target" and refused["error_type"] == "config"  # no alias either: nothing usable
    assert "skillyard config set notify allow_raw_urls=true --role ROLE" in refused["error"]
    await host.alias("ops", f"json://127.0.0.1:{_port(receiver)}/ops")
    with_alias = await host.notify(message="x", target=url)
    assert with_alias["error_type"] == "recoverable" and "use an alias (ops)" in with_alias["error"]
    out = await asyncio.to_thread(invoke, "config", "set", "notify", "allow_raw_urls=true", "--role", host.role)
    assert out.exit_code == 0, out.output
    host.yard.configs.invalidate()
    allowed = await host.notify(message="x", target=url)
    assert allowed["sent"] is True and allowed["targets"][0]["target"].startswith("json://127.0.0.1")
    assert len(receiver.sent("/raw")) == 1 and receiver.sent("/ops") == []


@pytest.mark.parametrize(
    ("url", "needle"), [("nosuch://host/x", "unknown scheme 'nosuch'"), ("json://", "not a usable Apprise URL")]
)
async def test_an_unknown_scheme_or_a_malformed_url_is_recoverable(host, url, needle):
    await host.yard.configs.set(host.role, "notify", {"allow_raw_urls": "1"})
    result = await host.notify(message="x", target=url)
    assert result["need_param"] == "target" and result["error_type"] == "recoverable" and needle in result["error"]


async def test_private_hosts_are_refused_without_the_switch(host, receiver, monkeypatch):
    monkeypatch.delenv("SKILLYARD_ALLOW_PRIVATE_URLS")
    await host.alias("ops", f"json://127.0.0.1:{_port(receiver)}/ops")
    await host.alias("mail", "mailto://10.1.2.3?from=a@example.com&to=b@example.com")
    for target in ("ops", "mail"):
        result = await host.notify(message="x", target=target)
        assert result["need_param"] == "target" and "address; only public addresses are notified" in result["error"]
    assert receiver.requests == []


async def test_no_target_without_a_default_alias_is_a_config_failure(host):
    result = await host.notify(message="x")
    assert result["error_type"] == "config" and result["non_retriable"] is True
    assert "skillyard notify alias set NAME URL --role ROLE" in result["error"]


async def test_redirects_are_never_followed(host):
    hits = []

    class Redirect(QuietHandler):
        def do_POST(self):
            hits.append(self.path)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.startswith("/start"):
                self.send_response(307)
                self.send_header("Location", "/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self._send(200, b"{}", "application/json")

    with serve(Redirect) as base:
        await host.alias("hop", f"json://127.0.0.1:{base.rsplit(':', 1)[1]}/start?redirect=yes")
        result = await host.notify(message="x", target="hop")
    assert hits == ["/start"] and result["sent"] is False
