"""Settings from the environment: where skillyard keeps its files, which database, which skill roots, limits."""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SkillyardError


def float_env(name: str, default: float, *, zero_ok: bool = False) -> float:
    """A number of seconds (or megabytes) from the environment: finite and above zero (or zero, when it means off)."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0 or (number == 0 and not zero_ok):
        least = "0 or more" if zero_ok else "more than 0"
        raise SkillyardError(f"{name}={value!r} must be a number, {least}; e.g. {name}={default:g}")
    return number


_SIZE = re.compile(r"\A\s*([0-9]+(?:\.[0-9]+)?)\s*([KMG]i?B?)?\s*\Z", re.IGNORECASE)
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def _size_env(name: str, default: int) -> int:
    """A size in bytes from the environment: a whole number of bytes, or with a KB / MB / GB suffix (1024-based)."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    match = _SIZE.match(value)
    size = int(float(match.group(1)) * _UNITS[(match.group(2) or "")[:1].upper()]) if match else 0
    if size <= 0:
        raise SkillyardError(
            f"{name}={value!r} must be a size above zero: bytes, or with KB, MB or GB (e.g. {name}=16MB)"
        )
    return size


def flag_env(name: str) -> bool:
    """An on/off environment variable: ``1``, ``true``, ``yes`` or ``on`` (any case) is on."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


SETTINGS_FILE = "settings.toml"


def read_settings_file(path: Path) -> dict[str, Any]:
    """``SKILLYARD_HOME/settings.toml`` as a dict (a missing file is empty); a file that cannot be read or parsed
    is an error naming the file and the fix."""
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):  # no file, or a home that is no folder (doctor reports that)
        return {}
    except OSError as exc:
        raise SkillyardError(f"{path}: cannot read the settings file ({exc.strerror}); fix its permissions") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise SkillyardError(f"{path}: not UTF-8 text; save the settings file as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise SkillyardError(f"{path}: invalid TOML ({exc}); fix the syntax at that position") from None


def _table(data: Mapping[str, Any], name: str, path: Path) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise SkillyardError(f"{path}: '{name}' must be a table; write these settings under a [{name}] header")
    return value


SANDBOX_TIERS = ("A", "B", "C")
SANDBOX_CHOICES = ("auto", *SANDBOX_TIERS, "off")
DEFAULT_SANDBOX_USER = "skillyard-sandbox"


@dataclass(frozen=True)
class SandboxSettings:
    """``SKILLYARD_SANDBOX`` and the limits every tier applies (docs/sandbox.md lists each default)."""

    mode: str = "auto"
    user: str = DEFAULT_SANDBOX_USER
    cpu_s: int = 60
    file_mb: int = 1024
    open_files: int = 256
    processes: int = 256
    memory_mb: int = 2048
    workspace_mb: int = 1024
    tmp_mb: int = 512  # the private /tmp (and /dev/shm) of a tier-A sandbox, held in memory
    roles: Mapping[str, str] = field(default_factory=dict)  # role → the weakest tier its runs accept

    @classmethod
    def load(cls, file: Mapping[str, Any] | None = None, path: Path = Path(SETTINGS_FILE)) -> SandboxSettings:
        """``[sandbox]`` of settings.toml (``file``, already read), then the ``SKILLYARD_SANDBOX*`` variables."""
        table = _table(file or {}, "sandbox", path)

        def tier(value: object, where: str, allowed: tuple[str, ...] = SANDBOX_CHOICES) -> str:
            text = str(value).strip()
            normal = text.upper() if text.upper() in SANDBOX_TIERS else text.lower()
            if not isinstance(value, str) or normal not in allowed:
                raise SkillyardError(
                    f"{where}={value!r} is not a sandbox tier; use one of {', '.join(allowed)}"
                    + (" (auto: the best this machine offers)" if "auto" in allowed else "")
                )
            return normal

        def whole(key: str, default: int) -> int:
            variable = f"SKILLYARD_SANDBOX_{key.upper()}"
            if os.environ.get(variable, "").strip():
                return max(1, int(float_env(variable, default)))
            value = table.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SkillyardError(f"{path}: [sandbox] {key} = {value!r} is invalid; write a whole number >= 1")
            return value

        mode = os.environ.get("SKILLYARD_SANDBOX", "").strip()
        roles_table = table.get("roles", {})
        if not isinstance(roles_table, dict) or not all(isinstance(v, dict) for v in roles_table.values()):
            raise SkillyardError(f'{path}: [sandbox.roles.ROLE] tables hold required = "A" | "B" | "C"')
        roles = {
            role: tier(spec.get("required"), f"{path}: [sandbox.roles.{role}] required", SANDBOX_TIERS)
            for role, spec in roles_table.items()
        }
        user = os.environ.get("SKILLYARD_SANDBOX_USER", "").strip() or table.get("user", DEFAULT_SANDBOX_USER)
        if not isinstance(user, str) or not user.strip():
            raise SkillyardError(
                f'{path}: [sandbox] user = {user!r} is invalid; write a user name, e.g. user = "{DEFAULT_SANDBOX_USER}"'
            )
        return cls(
            mode=tier(mode or table.get("tier", "auto"), "SKILLYARD_SANDBOX" if mode else f"{path}: [sandbox] tier"),
            user=user.strip(),
            cpu_s=whole("cpu_s", cls.cpu_s),
            file_mb=whole("file_mb", cls.file_mb),
            open_files=whole("open_files", cls.open_files),
            processes=whole("processes", cls.processes),
            memory_mb=whole("memory_mb", cls.memory_mb),
            workspace_mb=whole("workspace_mb", cls.workspace_mb),
            tmp_mb=whole("tmp_mb", cls.tmp_mb),
            roles=roles,
        )

    def limits(self) -> dict[str, int]:
        """The limits as a skill sees them in ``skill_config.sandbox``."""
        return {
            "cpu_s": self.cpu_s,
            "file_mb": self.file_mb,
            "open_files": self.open_files,
            "processes": self.processes,
            "memory_mb": self.memory_mb,
            "workspace_mb": self.workspace_mb,
            "tmp_mb": self.tmp_mb,
        }


def _skills_table(file: Mapping[str, Any], path: Path) -> tuple[tuple[Path, ...], str]:
    """``[skills] untrusted_roots`` (folders) and ``default_trust`` (``trusted`` | ``untrusted``)."""
    table = _table(file, "skills", path)
    roots = table.get("untrusted_roots", [])
    if not isinstance(roots, list) or not all(isinstance(r, str) and r.strip() for r in roots):
        raise SkillyardError(
            f"{path}: [skills] untrusted_roots must be a list of folders, "
            'e.g. untrusted_roots = ["~/downloaded-skills"]'
        )
    trust = table.get("default_trust", "trusted")
    if trust not in ("trusted", "untrusted"):
        raise SkillyardError(f'{path}: [skills] default_trust = {trust!r} is invalid; write "trusted" or "untrusted"')
    return tuple(Path(r).expanduser() for r in roots), trust


@dataclass(frozen=True)
class Settings:
    """Resolved once per SkillYard; environment variables override defaults."""

    home: Path
    database_url: str | None
    skills_path: tuple[Path, ...] = ()
    subprocess_timeout: float = 60.0
    wall_clock: float = 240.0
    rescan_interval: float = 0.0
    allow_private_urls: bool = False
    max_download_bytes: int = 200 * 1024 * 1024
    stdout_limit: int = 16 * 1024 * 1024  # what a subprocess skill may print before it is stopped
    stderr_tail: int = 64 * 1024  # how much of a subprocess skill's stderr is kept (the end of it)
    embedded_db_memory: int = 2 * 1024**3  # the address space of each embedded PostgreSQL process
    secret_key: str | None = field(default=None, repr=False)
    secret_keys: str | None = field(default=None, repr=False)  # comma-separated, newest first; wins over secret_key
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    untrusted_roots: tuple[Path, ...] = ()  # [skills] untrusted_roots: their in-process skills run sandboxed
    default_trust: str = "trusted"  # [skills] default_trust: of --skills-dir and SKILLYARD_SKILLS_PATH roots

    @classmethod
    def from_env(cls) -> Settings:
        home = Path(os.environ.get("SKILLYARD_HOME") or Path.home() / ".skillyard").expanduser()
        path = os.environ.get("SKILLYARD_SKILLS_PATH", "")
        file_path = home / SETTINGS_FILE
        file = read_settings_file(file_path)
        untrusted, trust = _skills_table(file, file_path)
        return cls(
            home=home,
            database_url=os.environ.get("SKILLYARD_DATABASE_URL") or None,
            skills_path=tuple(Path(p).expanduser() for p in path.split(os.pathsep) if p.strip()),
            subprocess_timeout=float_env("SKILLYARD_SUBPROCESS_TIMEOUT", 60.0),
            wall_clock=float_env("SKILLYARD_WALL_CLOCK", 240.0),
            rescan_interval=float_env("SKILLYARD_RESCAN_INTERVAL", 0.0, zero_ok=True),
            allow_private_urls=flag_env("SKILLYARD_ALLOW_PRIVATE_URLS"),
            max_download_bytes=int(float_env("SKILLYARD_MAX_DOWNLOAD_MB", 200.0) * 1024 * 1024),
            stdout_limit=_size_env("SKILLYARD_STDOUT_LIMIT", 16 * 1024 * 1024),
            stderr_tail=_size_env("SKILLYARD_STDERR_TAIL", 64 * 1024),
            embedded_db_memory=_size_env("SKILLYARD_EMBEDDED_DB_MEMORY", 2 * 1024**3),
            secret_key=os.environ.get("SKILLYARD_SECRET_KEY") or None,
            secret_keys=os.environ.get("SKILLYARD_SECRET_KEYS") or None,
            sandbox=SandboxSettings.load(file, file_path),
            untrusted_roots=untrusted,
            default_trust=trust,
        )

    @property
    def embedded_pgdata(self) -> Path:
        return self.home / "pg"

    @property
    def workspaces_root(self) -> Path:
        return self.home / "workspaces"

    def workspace_for(self, session_id: str) -> Path:
        return self.workspaces_root / session_id
