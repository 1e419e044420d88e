"""Session attachments in PostgreSQL: uploads and artifacts with stable reference ids (img_1, file_2, …).

Every run sees its session's attachments, so reading them is on every run's path. They are cached per session in
the process; a registration in any process rewrites the session's generation file under ``SKILLYARD_HOME``
(``attachments/<session>``, after its transaction commits), and a cached list is used only while that file
still holds the generation it held when the list was read. A plain run thus costs one small file read, not a
database round trip, and a file another process registered is visible to this process's next run. Processes
sharing a database share ``SKILLYARD_HOME`` for this, as they already do for the workspaces the files live in.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import secrets
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, text

from .database import Database
from .tables import attachments

log = logging.getLogger("skillyard.attachments")
#: Sessions whose attachments a process keeps in memory (the least recently read ones go first).
CACHED_SESSIONS = 1024
#: The generation of a session whose file could not be read: never equal to a cached one.
_UNREADABLE = b"\x00unreadable"

#: Reference-id prefix per attachment type.
REF_PREFIX = {"image": "img", "video": "video", "audio": "audio", "file": "file"}
MEDIA_TYPES = tuple(REF_PREFIX)


@dataclass(frozen=True)
class Attachment:
    """One attachment of a session."""

    ref: str
    type: str
    filename: str
    local_path: str | None
    url: str | None
    size: int | None
    sha256: str | None
    skill: str
    created_at: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def as_context_item(self) -> dict[str, Any]:
        """The §4.7 shape of ``runtime_context["attachments"]`` items, plus ``ref``."""
        return {
            "type": self.type,
            "att_type": self.type,
            "filename": self.filename,
            "local_path": self.local_path or "",
            "url": self.url or "",
            "ref": self.ref,
        }


@dataclass(frozen=True)
class NewAttachment:
    """An attachment to register: a local file, a URL, or both."""

    type: str
    filename: str
    local_path: str | None = None
    url: str | None = None
    size: int | None = None
    sha256: str | None = None
    skill: str = ""


def describe_file(path: Path, media: str, skill: str = "", url: str | None = None) -> NewAttachment:
    """Size and sha256 of a local file, as a NewAttachment."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
            size += len(chunk)
    media = media if media in REF_PREFIX else "file"
    return NewAttachment(media, path.name, str(path), url, size, digest.hexdigest(), skill)


def _row(row: Any) -> Attachment:
    created = row.created_at.astimezone(dt.UTC).isoformat() if row.created_at else ""
    return Attachment(
        row.ref, row.type, row.filename, row.local_path, row.url, row.size, row.sha256, row.skill, created
    )


class AttachmentStore:
    """Reads and registers a session's attachments; reference ids are allocated under a per-session lock.

    ``generations`` is the folder of the per-session generation files (see the module docstring)."""

    def __init__(self, database: Database, generations: Path) -> None:
        self._db = database
        self._generations = generations
        self._generation_prefix = os.path.join(generations, "")  # str paths: a Path per run costs more than the read
        self._cache: dict[str, tuple[bytes | None, list[Attachment]]] = {}

    async def for_session(self, session_id: str) -> list[Attachment]:
        """Every attachment of a session, oldest first (empty when no database exists yet)."""
        if not self._db.exists:
            return []
        generation = self._generation(session_id)  # read before the rows: a later registration changes it
        cached = self._cache.pop(session_id, None)
        if cached is None or cached[0] != generation or generation == _UNREADABLE:
            sessions = await self._db.session_factory()
            async with sessions() as session:
                rows = (
                    await session.execute(
                        select(attachments).where(attachments.c.session_id == session_id).order_by(attachments.c.id)
                    )
                ).all()
            cached = (generation, [_row(r) for r in rows])
        self._cache[session_id] = cached  # re-inserted: the most recently read session is kept longest
        if len(self._cache) > CACHED_SESSIONS:
            del self._cache[next(iter(self._cache))]
        return cached[1]

    def _generation(self, session_id: str) -> bytes | None:
        """The session's generation (None: nothing was ever registered for it through this home)."""
        try:
            fd = os.open(self._generation_prefix + session_id, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError:
            return _UNREADABLE
        try:
            return os.read(fd, 64)
        except OSError:
            return _UNREADABLE
        finally:
            os.close(fd)

    def _advance(self, session_id: str) -> None:
        """A new generation for the session, after its registration committed: every process's cache of it is stale."""
        self._cache.pop(session_id, None)
        path = self._generations / session_id
        temp = path.with_name(f".{session_id}.{secrets.token_hex(4)}")
        try:
            self._generations.mkdir(parents=True, exist_ok=True)
            temp.write_bytes(secrets.token_bytes(16))
            os.replace(temp, path)
        except OSError as exc:  # other processes then see the new files only after their cache is dropped
            temp.unlink(missing_ok=True)
            log.warning("cannot mark the attachments of session %r as changed in %s: %s", session_id, path, exc)

    async def register(self, session_id: str, items: Iterable[NewAttachment]) -> list[Attachment]:
        """Register attachments; a file (or URL) the session already has keeps its existing reference."""
        items = list(items)
        if not items:
            return []
        try:
            return await self._register(session_id, items)
        finally:
            self._advance(session_id)

    async def _register(self, session_id: str, items: list[NewAttachment]) -> list[Attachment]:
        sessions = await self._db.session_factory()
        async with sessions() as session, session.begin():
            # One writer per session at a time, so reference numbers never collide across processes.
            await session.execute(
                text("SELECT pg_advisory_xact_lock(hashtext(:s))"), {"s": "attachments:" + session_id}
            )
            existing = {
                (r.local_path or r.url): r
                for r in (
                    await session.execute(select(attachments).where(attachments.c.session_id == session_id))
                ).all()
            }
            counts: dict[str, int] = dict(
                (
                    await session.execute(
                        select(attachments.c.type, func.count())
                        .where(attachments.c.session_id == session_id)
                        .group_by(attachments.c.type)
                    )
                ).all()
            )
            out: list[Attachment] = []
            for item in items:
                key = item.local_path or item.url
                known = existing.get(key)
                if known is not None and (known.size, known.sha256) != (item.size, item.sha256) and item.sha256:
                    # the same file written again: it keeps its reference, the row describes the current content
                    known = (
                        await session.execute(
                            attachments.update()
                            .where(attachments.c.id == known.id)
                            .values(size=item.size, sha256=item.sha256, skill=item.skill)
                            .returning(*attachments.c)
                        )
                    ).one()
                    existing[key] = known
                if known is not None:
                    out.append(_row(known))
                    continue
                kind = item.type if item.type in REF_PREFIX else "file"
                counts[kind] = counts.get(kind, 0) + 1
                row = (
                    await session.execute(
                        attachments.insert()
                        .values(
                            session_id=session_id,
                            ref=f"{REF_PREFIX[kind]}_{counts[kind]}",
                            type=kind,
                            filename=item.filename,
                            local_path=item.local_path,
                            url=item.url,
                            size=item.size,
                            sha256=item.sha256,
                            skill=item.skill,
                        )
                        .returning(*attachments.c)
                    )
                ).one()
                existing[key or row.ref] = row
                out.append(_row(row))
            return out
