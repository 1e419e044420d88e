"""Real skill corpora from the package registries, fetched once and cached under ``tests/.cache/corpus/<name>``.

* ``openclaw``: the npm package (``npm pack``); its ``skills/``, ``custodian-skills/`` and the skills bundled with
  its extensions (``dist/extensions/<ext>/skills/``).
* ``hermes-agent``: the PyPI source distribution (``pip download --no-binary :all:``); its ``skills/`` and
  ``optional-skills/``.

Versions are pinned so the assertions about specific skills stay true; set ``SKILLYARD_CORPUS_OPENCLAW`` or
``SKILLYARD_CORPUS_HERMES`` to another version (or ``latest``) to try a newer corpus, and
``SKILLYARD_CORPUS_REFRESH=1`` to fetch again. ``RegistryUnreachable`` means the registry could not be reached
(tests skip); ``CorpusError`` is any other failure (tests fail).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "corpus"
OPENCLAW_VERSION = "2026.9.6"
HERMES_VERSION = "0.19.0"
FETCH_TIMEOUT = 600
_MARKER = ".corpus.json"

#: Client output that means the registry was not reached (as opposed to a package or tool problem).
_NETWORK_ERRORS = re.compile(
    r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|ERR_SOCKET"
    r"|network request to .* failed|request to https?://\S+ failed|getaddrinfo"
    r"|NewConnectionError|Failed to establish a new connection|Max retries exceeded|ConnectTimeout"
    r"|ReadTimeout|ProxyError|Temporary failure in name resolution|Name or service not known"
    r"|Network is unreachable|Connection refused|No route to host|nodename nor servname"
    r"|Could not fetch URL .*(connection error|timed out)",
    re.IGNORECASE,
)


class RegistryUnreachable(Exception):
    """The package registry could not be reached from this machine."""


class CorpusError(Exception):
    """Fetching or unpacking a corpus failed for a reason other than the network."""


@dataclass(frozen=True)
class Corpus:
    """An unpacked corpus: where it lives, which version, and the skill roots inside it."""

    name: str
    path: Path
    version: str
    roots: tuple[Path, ...]

    def root(self, rel: str) -> Path:
        return self.path / rel


def openclaw() -> Corpus:
    """OpenClaw's shipped skills, from the npm package."""
    version = os.environ.get("SKILLYARD_CORPUS_OPENCLAW", OPENCLAW_VERSION)
    return _cached("openclaw", version, _fetch_openclaw, ("skills", "custodian-skills", "dist/extensions"))


def hermes_agent() -> Corpus:
    """Hermes Agent's shipped and optional skills, from the PyPI source distribution."""
    version = os.environ.get("SKILLYARD_CORPUS_HERMES", HERMES_VERSION)
    return _cached("hermes-agent", version, _fetch_hermes, ("skills", "optional-skills"))


CORPORA = {"openclaw": openclaw, "hermes-agent": hermes_agent}


def _cached(name: str, version: str, fetch: object, root_names: tuple[str, ...]) -> Corpus:
    """The corpus from the cache, fetched first when missing; test workers (pytest-xdist) fetch one at a time, so
    none replaces a tree another is reading."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        refresh = bool(os.environ.get("SKILLYARD_CORPUS_REFRESH"))
        return _cached_locked(name, version, fetch, root_names, refresh)


def _cached_locked(name: str, version: str, fetch: object, root_names: tuple[str, ...], refresh: bool) -> Corpus:
    target = CACHE / name
    marker = target / _MARKER
    if marker.is_file() and not refresh:
        info = json.loads(marker.read_text(encoding="utf-8"))
        if version in ("latest", info.get("requested"), info.get("version")):
            return _corpus(name, target, info["version"], root_names)
    with tempfile.TemporaryDirectory(prefix=f"{name}-", dir=CACHE) as tmp:
        work = Path(tmp)
        staging = work / "corpus"
        staging.mkdir()
        resolved = fetch(version, work, staging)  # type: ignore[operator]
        for root in root_names:
            if not (staging / root).is_dir():
                raise CorpusError(f"{name} {resolved}: the package has no {root}/ folder")
        (staging / _MARKER).write_text(
            json.dumps({"name": name, "requested": version, "version": resolved}), encoding="utf-8"
        )
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    return _corpus(name, target, resolved, root_names)


def _corpus(name: str, path: Path, version: str, root_names: tuple[str, ...]) -> Corpus:
    return Corpus(name, path, version, tuple(path / r for r in root_names))


def _run(argv: list[str], cwd: Path, what: str) -> str:
    """Run a registry client; unreachable registries raise RegistryUnreachable, anything else CorpusError."""
    tool = shutil.which(argv[0]) if argv[0] != sys.executable else sys.executable
    if tool is None:
        raise RegistryUnreachable(f"cannot fetch {what}: {argv[0]!r} is not installed on this machine")
    try:
        proc = subprocess.run(
            [tool, *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=FETCH_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise RegistryUnreachable(f"cannot fetch {what}: {argv[0]} timed out after {FETCH_TIMEOUT}s") from None
    output = f"{proc.stdout}\n{proc.stderr}".strip()
    if proc.returncode != 0:
        tail = "\n".join(output.splitlines()[-15:])
        network = next((line for line in output.splitlines() if _NETWORK_ERRORS.search(line)), None)
        if network is not None:
            raise RegistryUnreachable(f"cannot fetch {what}: the registry is unreachable: {network.strip()[:500]}")
        raise CorpusError(f"fetching {what} failed ({' '.join(argv)} exited {proc.returncode}):\n{tail}")
    return proc.stdout


#: npm's default retry schedule spends over a minute before admitting the registry is unreachable.
_NPM_RETRIES = ["--fetch-retries=1", "--fetch-retry-mintimeout=2000", "--fetch-retry-maxtimeout=10000"]


def _fetch_openclaw(version: str, work: Path, staging: Path) -> str:
    # A bare "openclaw" spec lets npm pick the newest version whose engines match the local node, which can be an
    # old placeholder without skills; resolve the version first and pack exactly that one.
    spec = "openclaw@latest" if version == "latest" else f"openclaw@{version}"
    resolved = json.loads(_run(["npm", "view", spec, "version", "--json", *_NPM_RETRIES], work, spec) or "null")
    if isinstance(resolved, list):
        resolved = resolved[-1] if resolved else None
    if not isinstance(resolved, str):
        raise CorpusError(f"npm view {spec} printed no version")
    out = _run(
        ["npm", "pack", f"openclaw@{resolved}", "--json", "--pack-destination", str(work), *_NPM_RETRIES], work, spec
    )
    try:
        filename = json.loads(out)[0]["filename"]
    except (ValueError, LookupError, TypeError) as exc:
        raise CorpusError(f"npm pack printed unexpected output: {out[:300]!r}") from exc
    tarball = work / Path(filename).name
    pattern = re.compile(r"^package/(skills/|custodian-skills/|dist/extensions/[^/]+/skills/)")
    _extract(tarball, staging, lambda name: pattern.match(name) is not None, strip=1)
    return resolved


def _fetch_hermes(version: str, work: Path, staging: Path) -> str:
    spec = "hermes-agent" if version == "latest" else f"hermes-agent=={version}"
    downloads = work / "dist"
    _run(
        # -vv: pip reports an unreachable index ("Could not fetch URL … connection error") only when verbose
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-vv",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--disable-pip-version-check",
            "--dest",
            str(downloads),
            spec,
        ],
        work,
        spec,
    )
    sdists = sorted(downloads.glob("hermes_agent-*.tar.gz")) + sorted(downloads.glob("hermes-agent-*.tar.gz"))
    if not sdists:
        raise CorpusError(f"pip download {spec} left no source distribution in {downloads}")
    match = re.match(r"hermes[_-]agent-(.+)\.tar\.gz$", sdists[0].name)
    resolved = match.group(1) if match else version
    pattern = re.compile(r"^[^/]+/(skills/|optional-skills/)")
    _extract(sdists[0], staging, lambda name: pattern.match(name) is not None, strip=1)
    return resolved


def _extract(tarball: Path, dest: Path, wanted: object, strip: int) -> None:
    """Extract the regular files and folders ``wanted(name)`` selects, dropping ``strip`` leading components."""
    try:
        with tarfile.open(tarball, "r:*") as tar:
            for member in tar:
                if not wanted(member.name) or not (member.isfile() or member.isdir()):  # type: ignore[operator]
                    continue
                parts = Path(member.name).parts[strip:]
                if not parts or any(p in ("..", "") or p.startswith("/") for p in parts):
                    continue
                target = dest.joinpath(*parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                if source is None:
                    continue
                with source, open(target, "wb") as fh:
                    shutil.copyfileobj(source, fh)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise CorpusError(f"cannot unpack {tarball.name}: {exc}") from exc


if __name__ == "__main__":  # python tests/support/corpus.py: fetch both and print where they are
    for corpus_name, getter in CORPORA.items():
        c = getter()
        counts = {r.name: sum(1 for _ in r.rglob("SKILL.md")) for r in c.roots}
        print(f"{corpus_name} {c.version} at {c.path}: {counts}")
