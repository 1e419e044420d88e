"""The download address guard (outputs/address_guard.py): loopback, private, link-local and other non-public
addresses refused, whatever their spelling, redirects included."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, urlsplit

import httpcore
import pytest

from skillyard.outputs.address_guard import private_address_kind
from support.outputs_probes import URLS, files_in, result_skill, sid, url_skill

PUBLIC_IP = "93.184.215.14"  # a global address; connections to it are routed to the local server below


@pytest.fixture
def public_host(monkeypatch, server):
    """Make PUBLIC_IP:port reach the 127.0.0.1 test server, as the internet would reach a real public host: the
    download guard sees a global address; only the socket underneath is pointed at the local server."""
    original = httpcore.AnyIOBackend.connect_tcp

    async def routed(self, host, port, timeout=None, local_address=None, socket_options=None):
        if host == PUBLIC_IP:
            host = "127.0.0.1"
        return await original(
            self, host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", routed)
    return server.replace("127.0.0.1", PUBLIC_IP)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("127.0.0.1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("100.64.0.1", "non-public"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("fc00::1", "private"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("2002:7f00:1::", "loopback"),  # 6to4 around 127.0.0.1
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 around 169.254.169.254
        ("8.8.8.8", None),
        ("1.1.1.1", None),
        ("172.32.0.1", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
    ],
)
def test_address_classifier(address: str, kind: str | None) -> None:
    assert private_address_kind(address) == kind


async def test_private_addresses_refused_by_default(make_skill, yard_for, db_env, server, seen, monkeypatch):
    monkeypatch.delenv("SKILLYARD_ALLOW_PRIVATE_URLS", raising=False)
    url_skill(make_skill)
    target = f"{server}/img/cat.png"
    localhost = target.replace("127.0.0.1", "localhost")
    async with yard_for() as yard:
        env = await yard.run(
            "urls",
            {"result": {"ok": True, "image_url": target, "download_url": localhost}},
            context={"session_id": "mat-1"},
        )
    assert env["ok"] is True
    assert env["image_url"] == target and env["download_url"] == localhost
    assert seen == []
    assert len(env.get("warnings", [])) == 2
    assert "images" not in env and "files" not in env


@pytest.mark.parametrize("target", ["http://127.0.0.1:{port}", "http://localhost:{port}", "http://[::1]:{port}"])
async def test_redirect_from_a_public_host_to_loopback_is_refused(
    db_env, make_skill, yard_for, server, public_host, seen, deny_private, home, target
):
    result_skill(make_skill, "urls", URLS)
    session = sid("ssrf")
    port = urlsplit(server).port
    inner = target.format(port=port) + "/img/internal.png"
    control = f"{public_host}/redirect?to={quote(public_host + '/img/public.png')}"
    evil = f"{public_host}/redirect?to={quote(inner)}"
    async with yard_for() as yard:
        env = await yard.run(
            "urls", {"result": {"ok": True, "image_urls": [control, evil]}}, context={"session_id": session}
        )
    assert "/img/public.png" in seen, seen  # the public host itself is reached (the routing works)
    assert "/img/internal.png" not in seen
    assert [Path(i["local_path"]).name for i in env["images"]] == ["public.png"]
    [warning] = env["warnings"]
    assert "redirect" in warning and "loopback" in warning, warning
    assert files_in(home / "workspaces" / session) == ["public.png"]


@pytest.mark.parametrize(
    "host",
    ["[::1]", "[::ffff:127.0.0.1]", "0.0.0.0", "127.1", "2130706433", "169.254.169.254", "[fe80::1]", "10.0.0.1"],
)
async def test_loopback_private_and_link_local_spellings_are_refused(
    db_env, make_skill, yard_for, server, seen, deny_private, host
):
    result_skill(make_skill, "urls", URLS)
    port = urlsplit(server).port
    url = f"http://{host}:{port}/img/x.png"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "download_url": url}}, context={"session_id": sid("v6")})
    assert seen == [] and "files" not in env and "images" not in env
    [warning] = env["warnings"]
    kinds = ("loopback", "private", "link-local", "unspecified", "non-public", "reserved")
    assert any(kind in warning for kind in kinds), warning


@pytest.mark.parametrize(
    "host",
    ["LOCALHOST", "127.0.0.2", "[0:0:0:0:0:0:0:1]", "[::ffff:7f00:1]", "100.64.0.1", "[fd00::1]"],
)
async def test_more_non_public_spellings_are_refused(db_env, make_skill, yard_for, server, seen, deny_private, host):
    """Issue: "refusing private, loopback and link-local addresses — checked after DNS resolution"; docs: "Private,
    loopback, link-local and other non-public addresses are refused"."""
    result_skill(make_skill, "urls", URLS)
    port = urlsplit(server).port
    url = f"http://{host}:{port}/img/x.png"
    async with yard_for() as yard:
        env = await yard.run("urls", {"result": {"ok": True, "download_url": url}}, context={"session_id": sid("np")})
    assert seen == [] and "images" not in env and "files" not in env
    [warning] = env["warnings"]
    kinds = ("loopback", "private", "link-local", "unspecified", "non-public", "reserved", "shared")
    assert any(kind in warning for kind in kinds), warning
