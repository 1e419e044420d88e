"""``skillyard doctor``: health checks of the host (home folder, database, skills) plus the plugins' ``doctor_checks``.

A check is a plain dict ``{name, status, detail, fix, plugin}``: ``status`` is ``ok``, ``warn`` or ``fail``,
``detail`` one line saying what was found, ``fix`` how to fix a warn or fail (None when ok) and ``plugin`` who made
it (``core`` for the host's own checks). Docs: docs/cli.md#skillyard-doctor, docs/hooks.md#doctor_checksyard.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import DuplicateRegistration
from .plugins import await_me_maybe
from .settings import Settings
from .storage.database import Database

STATUSES = ("ok", "warn", "fail")
CORE = "core"
#: Seconds a check may take (starting the embedded server the first time takes a few).
TIMEOUT = 60.0
_SHAPE = 'return a list of dicts {"name": str, "status": "ok" | "warn" | "fail", "detail": str, "fix": str | None}'


def check(name: str, status: str, detail: str, fix: str | None = None, plugin: str = CORE) -> dict[str, Any]:
    """One check result, with ``detail`` and ``fix`` on one line."""
    assert status in STATUSES, status
    return {
        "name": name,
        "status": status,
        "detail": one_line(detail),
        "fix": one_line(fix) if fix else None,
        "plugin": plugin,
    }


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def _error(exc: BaseException) -> str:
    return one_line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def worst(checks: Sequence[Mapping[str, Any]]) -> str:
    """The worst status among the checks (``ok`` when there are none)."""
    return max((c["status"] for c in checks), key=STATUSES.index, default="ok")


def check_home(settings: Settings) -> dict[str, Any]:
    """SKILLYARD_HOME exists (created when missing, as the host would) and a file can be written in it."""
    home = settings.home
    fix = f"set SKILLYARD_HOME to a folder this user can write, or fix the permissions of {home}"
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".doctor-", delete=True) as probe:
            probe.write(b"ok")
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        return check("home", "fail", f"SKILLYARD_HOME {home} is not writable ({_error(exc)})", fix)
    return check("home", "ok", f"SKILLYARD_HOME {home} is writable")


async def check_database(database: Database, settings: Settings) -> dict[str, Any]:
    """The database answers and the ``skillyard`` schema is at the newest migration (opening it migrates it)."""
    from alembic.script import ScriptDirectory
    from sqlalchemy import text

    from .storage.migrate import alembic_config
    from .storage.tables import SCHEMA

    if settings.database_url:
        where = "SKILLYARD_DATABASE_URL"
        fix = (
            "check SKILLYARD_DATABASE_URL (host, port, user, password, database name) and that the server runs, "
            "or unset it to use the embedded server"
        )
    else:
        where = f"the embedded PostgreSQL in {settings.embedded_pgdata}"
        fix = f"check that {settings.embedded_pgdata} is writable and not in use by another server; run with -v"
    try:
        engine = await asyncio.wait_for(database.engine(), TIMEOUT)
        async with engine.connect() as conn:
            version = await conn.scalar(text("SHOW server_version"))
            current = set((await conn.execute(text(f"SELECT version_num FROM {SCHEMA}.alembic_version"))).scalars())
    except TimeoutError:
        return check("database", "fail", f"{where} did not answer within {TIMEOUT:g} s", fix)
    except Exception as exc:  # any driver or migration error is the check's result
        return check("database", "fail", f"cannot open {where}: {_error(exc)}", fix)
    heads = set(ScriptDirectory.from_config(alembic_config()).get_heads())
    shown = engine.url.render_as_string(hide_password=True) if settings.database_url else where
    if current != heads:
        return check(
            "database",
            "fail",
            f"{shown}: schema {SCHEMA} is at revision {', '.join(sorted(current)) or '(none)'}, this skillyard "
            f"expects {', '.join(sorted(heads))}",
            "upgrade skillyard if a newer version migrated this database; otherwise check that the database user "
            f"may create tables in schema {SCHEMA}",
        )
    return check(
        "database",
        "ok",
        f"PostgreSQL {version} reachable at {shown}; migrations applied (revision {', '.join(sorted(heads))})",
    )


def check_skills(yard: Any) -> dict[str, Any]:
    """How many skill folders were found and how many cannot be read."""
    entries = yard.entries
    broken = sorted(e.skill.name for e in entries if e.skill.error)
    found = f"{len(entries)} skill folder(s) found in {len(yard.catalog.roots)} root(s)"
    if broken:
        listed = ", ".join(broken[:5]) + (f" and {len(broken) - 5} more" if len(broken) > 5 else "")
        return check(
            "skills",
            "warn",
            f"{found}; {len(broken)} with errors: {listed}",
            "run `skillyard list` (or `skillyard validate FOLDER`) to see each error and fix the skill folders",
        )
    if not entries:
        return check(
            "skills",
            "warn",
            "no skill folders found",
            "pass --skills-dir DIR or set SKILLYARD_SKILLS_PATH to folders of skills",
        )
    return check("skills", "ok", f"{found}; none with errors")


def _plugin_results(value: Any, plugin: str) -> list[dict[str, Any]]:
    """Validate what one plugin's ``doctor_checks`` gave; a malformed item becomes a failed check naming it."""
    if value is None:
        return []
    if isinstance(value, Mapping) or not isinstance(value, list | tuple):
        return [
            check(f"{plugin}.doctor_checks", "fail", f"plugin {plugin} returned {type(value).__name__}", _SHAPE, plugin)
        ]
    results = []
    for item in value:
        ok = (
            isinstance(item, Mapping)
            and isinstance(item.get("name"), str)
            and item["name"].strip()
            and item.get("status") in STATUSES
            and isinstance(item.get("detail", ""), str)
            and isinstance(item.get("fix"), str | None)
        )
        if not ok:
            results.append(
                check(
                    f"{plugin}.doctor_checks",
                    "fail",
                    f"plugin {plugin} returned a malformed check: {item!r:.200}",
                    _SHAPE,
                    plugin,
                )
            )
            continue
        results.append(check(item["name"].strip(), item["status"], item.get("detail") or "", item.get("fix"), plugin))
    return results


async def plugin_checks(yard: Any) -> list[dict[str, Any]]:
    """Every plugin's ``doctor_checks``, one plugin at a time, so one that raises or hangs does not hide the others."""
    results: list[dict[str, Any]] = []
    for impl in yard.pm.hook.doctor_checks.get_hookimpls():
        plugin = impl.plugin_name
        try:
            value = await asyncio.wait_for(await_me_maybe(impl.function(yard=yard)), TIMEOUT)
        except TimeoutError:
            results.append(
                check(
                    f"{plugin}.doctor_checks",
                    "fail",
                    f"plugin {plugin}'s checks did not finish within {TIMEOUT:g} s",
                    "leave the plugin out with SKILLYARD_LOAD_PLUGINS, or report it to its authors",
                    plugin,
                )
            )
            continue
        except Exception as exc:  # a plugin's bug is a failed check, not a crashed doctor
            results.append(
                check(
                    f"{plugin}.doctor_checks",
                    "fail",
                    f"plugin {plugin}'s doctor_checks raised {_error(exc)}",
                    "report it to the plugin's authors; leave the plugin out with SKILLYARD_LOAD_PLUGINS",
                    plugin,
                )
            )
            continue
        results.extend(_plugin_results(value, plugin))
    return results


async def run_checks(skills_dirs: Sequence[Path] = ()) -> list[dict[str, Any]]:
    """All checks, in order: home, (plugins loading), database, skills, then each plugin's checks.

    Raises :class:`~skillyard.errors.SkillyardError` for bad arguments (a ``--skills-dir`` that does not exist, an
    invalid setting), which are usage errors rather than health problems.
    """
    from .yard import SkillYard

    settings = Settings.from_env()
    checks = [check_home(settings)]
    try:
        yard = SkillYard(skills_dirs=list(skills_dirs), settings=settings)
    except DuplicateRegistration as exc:
        checks.append(
            check("plugins", "fail", one_line(exc), "leave one of the two plugins out with SKILLYARD_LOAD_PLUGINS")
        )
        database = Database(settings.database_url, settings.embedded_pgdata, settings.embedded_db_memory)
        try:
            checks.append(await check_database(database, settings))
        finally:
            await database.close()
        return checks
    try:
        try:
            await yard.open()
        except Exception as exc:
            checks.append(
                check(
                    "plugins",
                    "fail",
                    f"a plugin's startup hook raised {_error(exc)}",
                    "run `skillyard -vv doctor`; leave the plugin out with SKILLYARD_LOAD_PLUGINS",
                )
            )
        checks.append(await check_database(yard.database, settings))
        checks.append(check_skills(yard))
        checks.extend(await plugin_checks(yard))
    finally:
        await yard.close()
    return checks
