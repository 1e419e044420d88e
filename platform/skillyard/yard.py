"""SkillYard: owns the settings, the catalog, storage, configs and the plugin registries; runs skills."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .catalog.builtin_root import builtin_package
from .catalog.cache import ManifestCache
from .catalog.catalog import Catalog, Entry
from .catalog.roots import Root
from .catalog.skill import Skill
from .chains.background import BackgroundQueue
from .channels.registry import ChannelRegistry
from .configs.crypto import Cipher, load_keys
from .configs.store import ConfigStore
from .directory.directory import Directory
from .errors import InvalidInput, SkillyardError, UnknownSkill
from .executors.loader import register_package_root
from .invoke import pipeline
from .invoke.budget import Turn
from .invoke.policy import DEFAULT_POLICY, RunPolicy
from .invoke.run import check_session_id
from .outputs.media import media_type
from .outputs.safe_write import remove_stale_temp_files
from .plugins import await_me_maybe, load_plugins
from .registry import Registries, collect_registries
from .settings import Settings
from .storage.attachments import AttachmentStore, describe_file
from .storage.database import Database
from .storage.runlog import RunLog

if TYPE_CHECKING:
    from .agent.router import AgentRouter
    from .agent.runner import Agent
    from .chains.engine import ChainEngine
    from .mcp.hub import McpHub

log = logging.getLogger("skillyard")
READ_LIMIT = 40_000
BUILTIN_ROOT_PLUGIN = "skillyard.catalog.builtin_root"
UNKNOWN_NAME_RESCAN = 1.0


def _case_insensitive(base: Path, path: str) -> Path | None:
    """``path`` below ``base`` matched one segment at a time ignoring case (``REFERENCE.md`` → ``reference.md``),
    when every segment matches exactly one entry; None otherwise."""
    current = base
    for part in Path(path).parts:
        if part in ("..", "."):
            current = (current / part).resolve()
            continue
        try:
            matches = [child for child in current.iterdir() if child.name.lower() == part.lower()]
        except OSError:
            return None
        if len(matches) != 1:
            return None
        current = matches[0]
    return current.resolve() if current.is_file() else None


class SkillYard:
    """The host. Use as ``async with SkillYard(skills_dirs=[...]) as yard: await yard.run(name, input)``."""

    def __init__(
        self,
        skills_dirs: Sequence[str | os.PathLike[str]] | None = None,
        *,
        untrusted_skills_dirs: Sequence[str | os.PathLike[str]] | None = None,
        include_builtin: bool = True,
        settings: Settings | None = None,
    ) -> None:
        self.settings = settings or Settings.from_env()
        self.pm = load_plugins()
        self.registries: Registries = collect_registries(self.pm)
        self.database = Database(
            self.settings.database_url, self.settings.embedded_pgdata, self.settings.embedded_db_memory
        )
        self.configs = ConfigStore(
            self.database,
            lambda: Cipher(load_keys(self.settings.home, self.settings.secret_keys, self.settings.secret_key)),
            self._declared_secret_configs,
        )
        self.runlog = RunLog(self.database)
        self.directory = Directory(self.database)
        self.attachments = AttachmentStore(self.database, self.settings.home / "attachments")
        self.background = BackgroundQueue(self)
        self.channels = ChannelRegistry.from_plugins(self.pm, self)
        self.catalog = Catalog(
            self._roots(
                [Path(d) for d in skills_dirs or []], include_builtin, [Path(d) for d in untrusted_skills_dirs or []]
            ),
            ManifestCache(self.settings.home / "cache" / "catalog"),
        )
        self.catalog.scan()
        self._scanned_at = time.monotonic()
        self._opened = False
        self._watcher: asyncio.Task[None] | None = None
        self._workspaces: dict[str, str] = {}

    def _roots(self, explicit: list[Path], include_builtin: bool, untrusted: Sequence[Path] = ()) -> list[Root]:
        """Precedence: explicit dirs (trusted, then untrusted), SKILLYARD_SKILLS_PATH, plugin roots, built-in skills.

        Roots the operator names are trusted unless ``[skills] default_trust = "untrusted"`` or they lie in one of
        ``[skills] untrusted_roots`` (or come from ``untrusted_skills_dirs``); plugin and built-in roots are trusted.
        """
        for path in (*explicit, *untrusted):
            if not path.is_dir():
                raise SkillyardError(f"skills directory {str(path)!r} does not exist or is not a folder")
        roots: list[Root] = []
        seen: set[Path] = set()
        closed = [p.expanduser().resolve() for p in self.settings.untrusted_roots]

        def named_trust(resolved: Path) -> bool:
            if any(resolved == c or resolved.is_relative_to(c) for c in closed):
                return False
            return self.settings.default_trust == "trusted"

        def add(path: Path, source: str, package: str | None = None, trusted: bool | None = None) -> None:
            resolved = path.expanduser().resolve()
            if resolved not in seen and resolved.is_dir():
                seen.add(resolved)
                trust = named_trust(resolved) if trusted is None else trusted
                roots.append(Root(resolved, len(roots), source, package, trust))
                if package is not None:
                    register_package_root(resolved, package)

        for path in explicit:
            add(path, "local")
        for path in untrusted:
            add(path, "local", trusted=False)
        for path in self.settings.skills_path:
            add(path, "local")
        builtin = [p for n, p in self.pm.list_name_plugin() if n == BUILTIN_ROOT_PLUGIN]
        others = [p for n, p in self.pm.list_name_plugin() if n != BUILTIN_ROOT_PLUGIN]
        for result in self.pm.subset_hook_caller("skill_roots", remove_plugins=builtin)(yard=self):
            for path in result or []:
                add(Path(path), "plugin", trusted=True)
        if include_builtin:
            for result in self.pm.subset_hook_caller("skill_roots", remove_plugins=others)(yard=self):
                for path in result or []:
                    add(Path(path), "builtin", builtin_package(Path(path)), trusted=True)
        return roots

    # lifecycle -------------------------------------------------------------------------------------------
    async def open(self) -> SkillYard:
        if not self._opened:
            self._opened = True
            await asyncio.to_thread(self._sweep_temp_files)
            for result in self.pm.hook.startup(yard=self):
                await await_me_maybe(result)
            if self.settings.rescan_interval > 0:
                self._watcher = asyncio.get_running_loop().create_task(self._watch(self.settings.rescan_interval))
        return self

    def _sweep_temp_files(self) -> None:
        """Remove what killed processes left of unfinished writes in the workspaces (hidden ``.part`` files older
        than any run's wall clock), at most once per wall clock across the processes sharing this home."""
        older = max(self.settings.wall_clock, self.settings.subprocess_timeout)
        root = self.settings.workspaces_root
        marker = root / ".temp-files-swept"
        try:
            if time.time() - marker.stat().st_mtime < older:
                return
        except FileNotFoundError:
            if not root.is_dir():
                return
        except OSError:
            return
        removed = remove_stale_temp_files(root, older)
        if removed:
            log.info("removed %d temp file(s) of unfinished writes under %s", removed, root)
        with contextlib.suppress(OSError):
            marker.touch()

    async def _watch(self, interval: float) -> None:
        """A long-running host picks up skill folders dropped in, changed or removed."""
        while True:
            await asyncio.sleep(interval)
            try:
                self.rescan()
            except Exception:  # a bad folder must not stop the watcher; scan() reports per skill
                log.exception("rescan failed")

    async def close(self) -> None:
        await self.background.drain()
        if self._watcher is not None:
            self._watcher.cancel()
            await asyncio.gather(self._watcher, return_exceptions=True)
            self._watcher = None
        if self._opened:
            self._opened = False
            for result in self.pm.hook.shutdown(yard=self):
                await await_me_maybe(result)
        await self.channels.close()
        await self.runlog.close()
        await self.database.close()

    async def __aenter__(self) -> SkillYard:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _declared_secret_configs(self, skill: str) -> tuple[str, ...]:
        """The config keys a skill declares secret (``metadata.skillyard.secret_configs``); none for unknown names."""
        found = self.catalog.resolve(skill)
        return found[0].secret_configs if found is not None else ()

    async def save_config_from_user(
        self, role_id: str, skill: str, key: str, value: Any, raw_input: str
    ) -> dict[str, bool]:
        """Save one config a user gave in chat (§5.2): a credential (the config rule of
        :mod:`skillyard.credentials`, or declared by the skill) is refused with
        :class:`~skillyard.CredentialNotInInput` unless its value, stripped of surrounding whitespace, appears whole
        in ``raw_input``, the text of the user's message of this turn. Other keys are saved without that check; an
        empty value is :class:`~skillyard.InvalidInput`. Returns what ``configs.set`` returns ({key: stored as a
        secret}). Admin paths (``configs.set``, ``skillyard config set``) have no such rule."""
        return await self.configs.set_from_user(role_id, skill, key, value, raw_input)

    # catalog ---------------------------------------------------------------------------------------------
    def rescan(self) -> int:
        """Pick up skill folders added, changed or removed; return how many folders were re-read."""
        parsed = self.catalog.scan()
        self._scanned_at = time.monotonic()
        return parsed

    def resolve(self, name: str) -> tuple[Skill, str | None] | None:
        """A skill by name, alias or tool name; an unknown name triggers one rescan (at most once a second)."""
        found = self.catalog.resolve(name)
        if found is None and time.monotonic() - self._scanned_at > UNKNOWN_NAME_RESCAN:
            self.rescan()
            found = self.catalog.resolve(name)
        return found

    @property
    def entries(self) -> list[Entry]:
        return self.catalog.entries

    def skill(self, name: str) -> Skill:
        """A skill by name, alias or tool name."""
        found = self.resolve(name)
        if found is None:
            raise UnknownSkill(name, list(self.catalog.by_name))
        return found[0]

    def read_skill_file(
        self, name: str, path: str = "SKILL.md", offset: int = 0, *, siblings: bool = False
    ) -> dict[str, Any]:
        """Up to 40,000 characters of a file inside a skill's folder, from ``offset``; binary files get a stub.
        ``siblings``: a link to another catalogued skill's file (``../other/SKILL.md``) reads that file (``skillyard
        read``); without it (an agent reading its manual) the skill's own folder is the limit."""
        skill = self.skill(name)
        base = skill.dir.resolve()
        target = (base / path).resolve() if path != "SKILL.md" else skill.manifest.path.resolve()
        if not target.is_file():
            target = _case_insensitive(base, path) or target
        in_own_folder = target.is_relative_to(base) or target == skill.manifest.path.resolve()
        if not in_own_folder and not (
            siblings and any(target.is_relative_to(e.skill.dir.resolve()) for e in self.catalog.entries if e.active)
        ):
            raise SkillyardError(
                f"{path!r} is outside the folder of skill {skill.name!r}"
                + (" and of every other skill" if siblings else "")
                + f"; use a path inside {base}"
            )
        if not target.is_file():
            raise SkillyardError(f"skill {skill.name!r} has no file {path!r}")
        if type(offset) is not int or offset < 0:
            raise SkillyardError(f"offset must be a whole number, 0 or more (a next_offset), got {offset!r}")
        raw = target.read_bytes()
        if b"\x00" in raw[:8192]:
            return {
                "path": path,
                "binary": True,
                "size": len(raw),
                "content": f"[binary file, {len(raw)} bytes]",
                "offset": 0,
                "next_offset": None,
                "total_chars": 0,
                "truncated": False,
            }
        text = raw.decode("utf-8", "replace")
        chunk = text[offset : offset + READ_LIMIT]
        end = offset + len(chunk)
        return {
            "path": path,
            "binary": False,
            "content": chunk,
            "offset": offset,
            "next_offset": end if end < len(text) else None,
            "total_chars": len(text),
            "truncated": end < len(text),
        }

    # sessions --------------------------------------------------------------------------------------------
    async def attachments_for(self, session_id: str, turn: Turn | None = None) -> list[dict[str, Any]]:
        """A session's attachments as ``runtime_context`` items (§4.7), read once per turn; each run gets its own
        copy, so a skill that changes its list changes nothing for the turn's later runs."""
        if turn is not None and turn.session == session_id and turn.attachments is not None:
            return [dict(item) for item in turn.attachments]
        items = [a.as_context_item() for a in await self.attachments.for_session(session_id)]
        if turn is not None and turn.session == session_id:
            turn.attachments = [dict(item) for item in items]
        return items

    async def attach(self, session_id: str, paths: Sequence[str | os.PathLike[str]]) -> list[dict[str, Any]]:
        """Register files as attachments of a session (uploads); returns their descriptions with ``ref``."""
        check_session_id(session_id)
        new = []
        for raw in paths:
            path = Path(raw).expanduser()
            if not path.is_file():
                raise SkillyardError(f"cannot attach {str(raw)!r}: no such file")
            new.append(describe_file(path.resolve(), media_type(str(path))))
        return [a.as_dict() for a in await self.attachments.register(session_id, new)]

    # running ---------------------------------------------------------------------------------------------
    def workspace(self, session_id: str, given: str | None = None) -> str:
        """The run's workspace folder (the caller's, or the session's), created on first use and remembered,
        so runs do not stat it."""
        key = given or session_id
        path = self._workspaces.get(key)
        if path is None:
            if given and "\x00" in given:
                raise InvalidInput(f"workspace_dir {given!r} contains a NUL byte; give a folder path without it")
            folder = Path(given) if given else self.settings.workspace_for(session_id)
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise (InvalidInput if given else SkillyardError)(
                    f"the workspace folder {str(folder)!r} cannot be created ({exc.strerror or exc}); "
                    + ("give a workspace_dir that can be created" if given else "check SKILLYARD_HOME and its rights")
                ) from None
            path = self._workspaces[key] = str(folder)
        return path

    def new_turn(self, session_id: str = "", channel: str = "", **context: Any) -> Turn:
        """A turn: its runs share a failure budget (and, for chats, chat_mode)."""
        if session_id:
            check_session_id(session_id)
        return Turn(session_id=session_id, channel=channel, context={"chat_mode": True, **context})

    def run(
        self,
        name: str,
        input: Mapping[str, Any] | None = None,
        context: Mapping[str, Any] | None = None,
        turn: Turn | None = None,
        policy: RunPolicy = DEFAULT_POLICY,
    ) -> Coroutine[Any, Any, dict[str, Any]]:
        """Run a skill by name, alias or tool name; await it for the normalized envelope (a JSON-serializable dict).

        ``policy`` (:class:`skillyard.RunPolicy`) says how the run is held: a chain step's is unattended.

        A plain method returning the pipeline's coroutine (one coroutine layer, not two: the agent's tool calls
        come through here too); a context or turn of the wrong type is refused when it is awaited.
        """
        return pipeline.execute(self, name, input, context, turn=turn, policy=policy)

    def chains(self, *, upkeep: bool = False, concurrency: int = 1) -> ChainEngine:
        """The chain engine on this host's database (docs/chains.md): ``async with yard.chains() as chains:``.
        ``upkeep=True`` makes a worker's engine (ticker, recovery, pruning)."""
        from .chains.engine import ChainEngine

        return ChainEngine(self, upkeep=upkeep, concurrency=concurrency)

    async def agent(self, agent_dir: str | os.PathLike[str], *, model: Any = None) -> Agent:
        """Load a contract-driven agent (docs/agents.md) and bind it to a model: see
        :func:`skillyard.agent.open_agent` (imported here on first use: a host that runs no agent loads none of it).
        """
        from .agent.entry import open_agent

        return await open_agent(self, agent_dir, model=model)

    @property
    def mcp(self) -> McpHub:
        """The configured MCP servers, their pooled connections and cached tool lists (docs/mcp.md); made on first
        use, so a host that calls no MCP tool imports none of the SDK."""
        hub = self.__dict__.get("_mcp")
        if hub is None:
            from .mcp.hub import McpHub

            hub = self.__dict__["_mcp"] = McpHub(self)
        return hub

    async def agent_from_db(self, agent_code: str, *, model: Any = None) -> Agent:
        """Load an agent stored in the database (``skillyard agent import``) and bind it to a model."""
        from .agent.entry import open_stored_agent

        return await open_stored_agent(self, agent_code, model=model)

    async def agent_event(
        self,
        name: str,
        key: str,
        payload: Mapping[str, Any] | None = None,
        *,
        org_id: str,
        detach: bool = False,
        wait: bool = False,
    ) -> dict[str, Any]:
        """Deliver an external event to the agent nodes of ``org_id`` waiting for (``name``, ``key``), or keep it
        24 hours for a node that starts waiting later (docs/agents.md "External events").

        Each resume is a queued job: of this host (it starts at once; ``close()`` waits for it; ``wait=True``
        waits here and adds each session's ``status`` and ``checkpoint`` to its delivery), or with ``detach`` of
        the shared queue, for a ``skillyard worker``."""
        from .agent.events import publish

        return await publish(self, name, key, payload, org_id=org_id, detach=detach, wait=wait)

    async def agents(self, agents_dir: str | os.PathLike[str], *, model: Any = None) -> AgentRouter:
        """Load every agent folder under ``agents_dir`` behind a router (§1.2): ``send`` routes a new session to
        one agent by its mission, and the session stays with it."""
        from .agent.entry import open_router

        return await open_router(self, agents_dir, model=model)

    async def run_nested(
        self, name: str, input: Mapping[str, Any], context: Mapping[str, Any], depth: int
    ) -> dict[str, Any]:
        """A call_skill run: no result post-processing, no turn budget."""
        return await pipeline.execute(self, name, input, context, depth=depth)
