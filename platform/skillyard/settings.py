"""Settings from the environment: where skillyard keeps its files, which database, which skill roots, limits."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

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


def _flag_env(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


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

    @classmethod
    def from_env(cls) -> SandboxSettings:
        mode = os.environ.get("SKILLYARD_SANDBOX", "").strip() or "auto"
        normal = mode.upper() if mode.upper() in SANDBOX_TIERS else mode.lower()
        if normal not in SANDBOX_CHOICES:
            raise SkillyardError(
                f"SKILLYARD_SANDBOX={mode!r} is not a sandbox tier; use one of {', '.join(SANDBOX_CHOICES)} "
                "(auto: the best this machine offers)"
            )

        def whole(name: str, default: int) -> int:
            return max(1, int(float_env(name, default)))

        return cls(
            mode=normal,
            user=os.environ.get("SKILLYARD_SANDBOX_USER", "").strip() or DEFAULT_SANDBOX_USER,
            cpu_s=whole("SKILLYARD_SANDBOX_CPU_S", cls.cpu_s),
            file_mb=whole("SKILLYARD_SANDBOX_FILE_MB", cls.file_mb),
            open_files=whole("SKILLYARD_SANDBOX_OPEN_FILES", cls.open_files),
            processes=whole("SKILLYARD_SANDBOX_PROCESSES", cls.processes),
            memory_mb=whole("SKILLYARD_SANDBOX_MEMORY_MB", cls.memory_mb),
            workspace_mb=whole("SKILLYARD_SANDBOX_WORKSPACE_MB", cls.workspace_mb),
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
        }


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

    @classmethod
    def from_env(cls) -> Settings:
        home = Path(os.environ.get("SKILLYARD_HOME") or Path.home() / ".skillyard").expanduser()
        path = os.environ.get("SKILLYARD_SKILLS_PATH", "")
        return cls(
            home=home,
            database_url=os.environ.get("SKILLYARD_DATABASE_URL") or None,
            skills_path=tuple(Path(p).expanduser() for p in path.split(os.pathsep) if p.strip()),
            subprocess_timeout=float_env("SKILLYARD_SUBPROCESS_TIMEOUT", 60.0),
            wall_clock=float_env("SKILLYARD_WALL_CLOCK", 240.0),
            rescan_interval=float_env("SKILLYARD_RESCAN_INTERVAL", 0.0, zero_ok=True),
            allow_private_urls=_flag_env("SKILLYARD_ALLOW_PRIVATE_URLS"),
            max_download_bytes=int(float_env("SKILLYARD_MAX_DOWNLOAD_MB", 200.0) * 1024 * 1024),
            stdout_limit=_size_env("SKILLYARD_STDOUT_LIMIT", 16 * 1024 * 1024),
            stderr_tail=_size_env("SKILLYARD_STDERR_TAIL", 64 * 1024),
            embedded_db_memory=_size_env("SKILLYARD_EMBEDDED_DB_MEMORY", 2 * 1024**3),
            secret_key=os.environ.get("SKILLYARD_SECRET_KEY") or None,
            secret_keys=os.environ.get("SKILLYARD_SECRET_KEYS") or None,
            sandbox=SandboxSettings.from_env(),
        )

    @property
    def embedded_pgdata(self) -> Path:
        return self.home / "pg"

    @property
    def workspaces_root(self) -> Path:
        return self.home / "workspaces"

    def workspace_for(self, session_id: str) -> Path:
        return self.workspaces_root / session_id
