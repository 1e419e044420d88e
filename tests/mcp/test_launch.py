"""stdio MCP servers in the sandbox of subprocess skills (mcp/launch.py): a real SDK server asked what it can do at
tiers A and C, its folders and network from ``[mcp.servers.NAME.sandbox]``, ``sandbox = false``, and the settings'
bad input."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.executors.mcp import doctor_checks
from skillyard.executors.sandbox import machine
from skillyard.mcp.client import McpUnreachable
from skillyard.mcp.launch import package_root
from skillyard.mcp.settings import load_servers
from skillyard.settings import SandboxSettings

PROBE = Path(__file__).parents[1] / "support" / "mcp_probe_server.py"
AVAILABLE = machine(SandboxSettings().user).available
SECRET = "probe-token-5e1d9a"

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="Linux only")


def requires(tier: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(tier not in AVAILABLE, reason=f"tier {tier}: {machine(SandboxSettings().user).reasons}")


@pytest.fixture
def world() -> Iterator[Path]:
    """Folders every user may traverse (the sandbox user reaches them at tier B without bind mounts)."""
    folder = Path(tempfile.mkdtemp(prefix="skillyard-mcp-sandbox-"))
    folder.chmod(0o755)
    (folder / "private").mkdir()
    (folder / "private" / "secret.txt").write_text("host only\n", encoding="utf-8")
    (folder / "data").mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def listener() -> Iterator[int]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield int(server.getsockname()[1])


def configure(home: Path, extra: str = "") -> None:
    (home / "settings.toml").write_text(
        f"""[mcp.servers.probe]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(PROBE))}]
env = {{ PROBE_TOKEN = "{SECRET}" }}
timeout = 20
{extra}""",
        encoding="utf-8",
    )


async def probe(**arguments: object) -> dict:
    async with SkillYard() as yard:
        envelope = await yard.run("probe__probe", arguments)
        assert envelope["ok"] is True, envelope
        return envelope["structured"] if "structured" in envelope else envelope["data"]


def _running(marker: str) -> list[int]:
    """Host processes whose command line holds ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    if marker.encode() in fh.read():
                        found.append(int(name))
            except OSError:
                continue
    return found


@requires("A")
async def test_tier_a_shows_only_what_the_settings_name(
    home: Path, db_env: str, world: Path, listener: int, monkeypatch
):
    monkeypatch.setenv("SKILLYARD_SANDBOX", "A")
    configure(home, f"[mcp.servers.probe.sandbox]\nnetwork = false\nwrite = [{json.dumps(str(world / 'data'))}]\n")
    seen = await probe(read=str(world / "private" / "secret.txt"), write=str(world / "data"), port=listener)
    assert seen["read"] is False  # a host folder no setting names is not there
    assert seen["write"] is True and (world / "data" / "probe.txt").exists()
    assert seen["connect"] is False  # network = false: its own network namespace, nothing in it
    assert "PROBE_TOKEN" in seen["env"] and "SKILLYARD_SECRET_KEY" not in seen["env"]
    if os.geteuid() == 0:
        assert seen["uid"] != 0  # a root host starts the server as the sandbox user
    assert seen["cpu_s"] is None and seen["data"] == SandboxSettings().memory_mb * 1024 * 1024
    assert not await _outside_writes()


async def _outside_writes() -> bool:
    """Whether the server could write where no setting let it (its code's folder is read-only)."""
    async with SkillYard() as yard:
        envelope = await yard.run("probe__probe", {"write": str(PROBE.parent)})
    return bool(envelope["structured"]["write"]) or (PROBE.parent / "probe.txt").exists()


@requires("A")
async def test_a_tier_a_server_has_the_network_by_default(home: Path, db_env: str, listener: int, monkeypatch):
    monkeypatch.setenv("SKILLYARD_SANDBOX", "A")
    configure(home)
    assert (await probe(port=listener))["connect"] is True


@requires("A")
async def test_read_folders_of_the_profile_are_readable(home: Path, db_env: str, world: Path, monkeypatch):
    monkeypatch.setenv("SKILLYARD_SANDBOX", "A")
    configure(home, f"[mcp.servers.probe.sandbox]\nread = [{json.dumps(str(world / 'private'))}]\n")
    seen = await probe(read=str(world / "private" / "secret.txt"), write=str(world / "private"))
    assert seen["read"] is True and seen["write"] is False


@requires("A")
async def test_the_secret_env_never_reaches_the_process_list(home: Path, db_env: str, monkeypatch):
    monkeypatch.setenv("SKILLYARD_SANDBOX", "A")
    configure(home)
    async with SkillYard() as yard:
        envelope = await yard.run("probe__probe", {})
        assert envelope["ok"] is True, envelope
        assert not _running(SECRET)  # bubblewrap's options (with the environment) travel by a descriptor


@pytest.mark.parametrize("tier", [t for t in ("A", "C") if t in AVAILABLE])
async def test_what_a_server_left_running_ends_with_it(home: Path, db_env: str, monkeypatch, tier: str):
    monkeypatch.setenv("SKILLYARD_SANDBOX", tier)
    configure(home)
    seconds = f"299.{secrets.randbelow(10**6):06d}"
    async with SkillYard() as yard:
        envelope = await yard.run("probe__probe", {"sleep": seconds})
        assert envelope["ok"] is True, envelope
        assert _running(seconds), "the probe's sleeper should run while the server does"
    for _ in range(100):  # bounded: 5 s for the kernel to reap
        if not _running(seconds):
            break
        await asyncio.sleep(0.05)
    assert not _running(seconds)


async def test_sandbox_false_runs_a_trusted_server_on_the_host(home: Path, db_env: str, world: Path):
    configure(home, "sandbox = false\n")
    seen = await probe(read=str(world / "private" / "secret.txt"))
    assert seen["read"] is True and seen["uid"] == os.getuid()
    assert "PROBE_TOKEN" in seen["env"] and "SKILLYARD_SECRET_KEY" not in seen["env"]  # the env list still holds


async def test_a_tier_this_machine_lacks_is_an_unreachable_envelope_naming_why(home: Path, db_env: str, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs a root host: without the sandbox user tier A is refused")
    configure(home)
    async with SkillYard() as yard:
        await yard.mcp.refresh("probe")  # the tool list is cached: the next host only has to start the server
    monkeypatch.setenv("SKILLYARD_SANDBOX", "A")
    monkeypatch.setenv("SKILLYARD_SANDBOX_USER", "no-such-sandbox-user")
    async with SkillYard() as yard:
        envelope = await yard.run("probe__probe", {})
    assert envelope["ok"] is False and envelope["mcp_error"] == "unreachable", envelope
    assert envelope["error_type"] == "transient", envelope
    assert "cannot start in the sandbox: sandbox tier A is not available" in envelope["error"], envelope


async def test_an_unknown_command_is_refused_naming_it(home: Path, db_env: str):
    (home / "settings.toml").write_text('[mcp.servers.probe]\ncommand = "no-such-mcp-server-binary"\n', "utf-8")
    async with SkillYard() as yard:
        with pytest.raises(McpUnreachable, match="'no-such-mcp-server-binary' is not on PATH; give its absolute path"):
            await yard.mcp.refresh("probe")
    (home / "settings.toml").write_text('[mcp.servers.probe]\ncommand = "/nonexistent/bin/server"\n', "utf-8")
    async with SkillYard() as yard:
        with pytest.raises(McpUnreachable, match="'/nonexistent/bin/server' is not an executable file; fix the path"):
            await yard.mcp.refresh("probe")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('sandbox = "yes"', "must be true, false or a table"),
        ("sandbox = { net = true }", "unknown key(s) net"),
        ('sandbox = { network = "on" }', "network must be true or false"),
        ('sandbox = { read = ["relative/dir"] }', "'relative/dir' is not an absolute path"),
        ("sandbox = { write = [1] }", "must be a list of strings"),
    ],
)
def test_a_bad_sandbox_entry_is_a_named_problem(home: Path, entry: str, message: str):
    configure(home, entry + "\n")
    servers, problems = load_servers(home)
    assert "probe" not in servers
    assert len(problems) == 1 and message in problems[0] and "[mcp.servers.probe].sandbox" in problems[0], problems


def test_a_sandbox_on_an_http_server_is_a_named_problem(home: Path):
    (home / "settings.toml").write_text(
        '[mcp.servers.docs]\nurl = "http://127.0.0.1:9/mcp"\nsandbox = { network = true }\n', "utf-8"
    )
    servers, problems = load_servers(home)
    assert not servers and "applies to stdio servers (command) only" in problems[0], problems


def test_package_roots(tmp_path: Path):
    script = tmp_path / "app" / "node_modules" / "@scope" / "pkg" / "dist" / "index.js"
    script.parent.mkdir(parents=True)
    script.write_text("", "utf-8")
    assert package_root(str(script)) == str(tmp_path / "app")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n", "utf-8")
    assert package_root(str(venv / "bin" / "crm-server")) == str(venv)
    plain = tmp_path / "plain" / "server.py"
    plain.parent.mkdir()
    assert package_root(str(plain)) == str(tmp_path / "plain")
    assert package_root("/node_modules/x/index.js") == "/node_modules/x"  # never the whole file system
    assert package_root(str(tmp_path / ".pyenv" / "shims" / "python")) == str(tmp_path / ".pyenv")


@requires("A")
@pytest.mark.skipif(shutil.which("python") is None, reason="no python on PATH")
async def test_a_command_found_on_path_starts_at_tier_a(home: Path, db_env: str, monkeypatch):
    """``command = "python"`` as the settings examples write it: here PATH may give a version manager's shim."""
    monkeypatch.setenv("SKILLYARD_SANDBOX", "A")
    (home / "settings.toml").write_text(
        f'[mcp.servers.probe]\ncommand = "python"\nargs = [{json.dumps(str(PROBE))}]\ntimeout = 20\n', "utf-8"
    )
    seen = await probe()
    assert seen["env"] and (seen["uid"] != 0 or os.geteuid() != 0)


async def test_doctor_says_where_each_stdio_server_runs(home: Path, db_env: str, monkeypatch):
    configure(home)
    async with SkillYard() as yard:
        await yard.mcp.refresh("probe")
        tier = yard.mcp.status()[0]["sandbox"]
        assert tier in AVAILABLE, yard.mcp.status()
        checks = {c["name"]: c for c in doctor_checks(yard) or []}
    assert f"runs at sandbox tier {tier}" in checks["mcp server probe"]["detail"], checks["mcp server probe"]
    configure(home, "sandbox = false\n")
    async with SkillYard() as yard:
        assert yard.mcp.status()[0]["sandbox"] == "host"


@pytest.mark.skipif(os.geteuid() != 0, reason="a root host starts servers as the sandbox user")
@pytest.mark.parametrize("mode", ["auto", "A"])
async def test_a_folder_the_sandbox_user_cannot_read(home: Path, db_env: str, world: Path, monkeypatch, caplog, mode):
    """auto runs the server at tier C, saying why; a tier named in SKILLYARD_SANDBOX refuses it, naming the folder."""
    monkeypatch.setenv("SKILLYARD_SANDBOX", mode)
    closed = world / "closed"
    closed.mkdir(mode=0o700)
    shutil.copy(PROBE, closed / "probe.py")
    script = json.dumps(str(closed / "probe.py"))
    (home / "settings.toml").write_text(
        f"[mcp.servers.probe]\ncommand = {json.dumps(sys.executable)}\nargs = [{script}]\n", "utf-8"
    )
    async with SkillYard() as yard:
        if mode == "A":
            with pytest.raises(McpUnreachable, match=r"cannot read .*closed \(mode 0700\); make it readable"):
                await yard.mcp.refresh("probe")
            return
        await yard.mcp.refresh("probe")
        seen = (await yard.run("probe__probe", {}))["structured"]
    assert seen["uid"] == 0  # tier C: the host's user
    assert "runs at sandbox tier C: the sandbox user 'skillyard-sandbox' cannot read" in caplog.text


@requires("A")
@pytest.mark.parametrize("where", ["cwd", "host"])
async def test_a_relative_script_is_found_from_cwd_or_the_hosts_folder(
    home: Path, db_env: str, world: Path, monkeypatch, where: str
):
    monkeypatch.setenv("SKILLYARD_SANDBOX", "A")
    folder = world / "server"
    folder.mkdir()
    shutil.copy(PROBE, folder / "probe.py")
    cwd = f"cwd = {json.dumps(str(folder))}\n" if where == "cwd" else ""
    if where == "host":
        monkeypatch.chdir(folder)
    (home / "settings.toml").write_text(
        f'[mcp.servers.probe]\ncommand = {json.dumps(sys.executable)}\nargs = ["probe.py"]\n{cwd}', "utf-8"
    )
    seen = await probe(read="probe.py")
    assert seen["read"] is True  # it started where its relative paths mean what they say
