"""``yard.directory``: the people of each organisation, read once per process and per import, and the context
fields they fill (§4.2, §4.5, §4.8).

Every import bumps the organisation's version; a lookup reads that one number and reloads the organisation only
when it changed, so a second process sees an import at its next lookup. A run that names no person costs nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert

from ..errors import SkillyardError
from ..invoke.identity import identity_org_id
from ..storage.tables import directory_accounts, directory_departments, directory_orgs, directory_people
from .importer import Change, Plan, Record, Snapshot, plan, read_records
from .paths import Department, path_for

if TYPE_CHECKING:
    from ..storage.database import Database

MAX_ORG = 200
BATCH = 1000  # rows per INSERT: PostgreSQL takes at most 32,767 parameters a statement


@dataclass
class _Org:
    version: int
    snapshot: Snapshot
    by_key: dict[str, str] = field(default_factory=dict)  # actor_key → emp_no


def check_org(org: object) -> str:
    text = org.strip() if isinstance(org, str) else ""
    if not text or len(text) > MAX_ORG or not text.isprintable() or text.startswith("-"):
        raise SkillyardError(
            f"organisation {org!r} is not an organisation id: pass --org with 1 to {MAX_ORG} characters"
        )
    return text


class Directory:
    """People, departments and channel accounts per organisation, in the platform's PostgreSQL."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self._orgs: dict[str, _Org] = {}
        self._lock = asyncio.Lock()

    # reading --------------------------------------------------------------------------------------------------
    async def _org(self, org: str) -> _Org:
        sessions = await self._db.session_factory()
        async with sessions() as session:
            version = await session.scalar(select(directory_orgs.c.version).where(directory_orgs.c.org_id == org))
            cached = self._orgs.get(org)
            if cached is not None and cached.version == (version or 0):
                return cached
            departments = {
                r.dept_id: Department(r.name, r.parent_id, r.disabled)
                for r in await session.execute(
                    select(directory_departments).where(directory_departments.c.org_id == org)
                )
            }
            people = {
                r.emp_no: {k: v for k, v in r._mapping.items() if k != "org_id"}
                for r in await session.execute(select(directory_people).where(directory_people.c.org_id == org))
            }
            accounts = {
                (r.channel, r.account): r.emp_no
                for r in await session.execute(select(directory_accounts).where(directory_accounts.c.org_id == org))
            }
        loaded = _Org(version or 0, Snapshot(departments, people, accounts))
        loaded.by_key = {p["actor_key"]: e for e, p in people.items() if p["actor_key"]}
        self._orgs[org] = loaded
        return loaded

    async def snapshot(self, org: str) -> Snapshot:
        return (await self._org(check_org(org))).snapshot

    async def person(
        self,
        org: str,
        *,
        emp_no: str = "",
        actor_key: str = "",
        channel: str = "",
        account: str = "",
    ) -> dict[str, Any] | None:
        """The §4.2 fields of an active person found by ``actor_key``, ``emp_no`` or a channel account (in that
        order), or None."""
        loaded = await self._org(org)
        snap = loaded.snapshot
        found = (
            (loaded.by_key.get(actor_key) if actor_key else None)
            or (emp_no if emp_no in snap.people else None)
            or (snap.accounts.get((channel, account)) if account else None)
        )
        record = snap.people.get(found) if found else None
        if record is None or not record["active"]:
            return None
        department, path = path_for(record["department"], snap.departments)
        return {
            "actor_name": record["name"],
            "actor_emp_no": record["emp_no"],
            "actor_department": department,
            "actor_department_path": path,
            "actor_position": record["position"],
            "actor_title": record["title"],
            "actor_phone": record["phone"],
            "actor_email": record["email"],
            "actor_tags": list(record["tags"] or []),
            "actor_key": record["actor_key"],
            "actor_id": record["actor_id"],
        }

    async def fill(self, given: Mapping[str, Any]) -> Mapping[str, Any]:
        """The caller's context with the directory's fields of the person it names (§4.8: the directory wins);
        unchanged when it names nobody, when the person is not found, or when the lookup fails."""
        actor_key = _text(given.get("actor_key"))
        emp_no = _text(given.get("actor_emp_no"))
        account = _text(given.get("channel_account"))
        if not (actor_key or emp_no or account) or not self._db.exists:
            return given  # names nobody, or no database holds a directory: nothing to look up (and nothing copied)
        try:
            found = await self.person(
                identity_org_id(given),
                emp_no=emp_no,
                actor_key=actor_key,
                channel=_text(given.get("channel")),
                account=account,
            )
        except SkillyardError:
            found = None
        return {**given, **found} if found else given

    # writing --------------------------------------------------------------------------------------------------
    async def plan_import(self, org: str, path: Path, kind: str | None = None) -> Plan:
        """What importing ``path`` would change (raises ImportProblems naming each bad line)."""
        records = read_records(path, kind)
        return plan(records, await self.snapshot(org))

    async def apply(self, org: str, changes: Plan) -> None:
        """Write a checked plan in one transaction and bump the organisation's version."""
        org = check_org(org)
        rows: dict[str, list[dict[str, Any]]] = {"department": [], "person": [], "account": []}
        for change in changes.changes:
            if change.action != "same" and change.record is not None:
                rows[change.kind].append(change.record.values)
        async with self._lock:
            sessions = await self._db.session_factory()
            async with sessions() as session, session.begin():
                for chunk in _chunks(rows["department"]):
                    values = [
                        {
                            "org_id": org,
                            "dept_id": v["id"],
                            "name": v["name"],
                            "parent_id": v["parent"],
                            "disabled": v["disabled"],
                        }
                        for v in chunk
                    ]
                    stmt = insert(directory_departments).values(values)
                    await session.execute(
                        stmt.on_conflict_do_update(
                            index_elements=["org_id", "dept_id"],
                            set_={c: stmt.excluded[c] for c in ("name", "parent_id", "disabled")},
                        )
                    )
                for chunk in _chunks(rows["person"]):
                    stmt = insert(directory_people).values([{"org_id": org, **v} for v in chunk])
                    columns = [c for c in chunk[0] if c != "emp_no"]
                    await session.execute(
                        stmt.on_conflict_do_update(
                            index_elements=["org_id", "emp_no"], set_={c: stmt.excluded[c] for c in columns}
                        )
                    )
                for chunk in _chunks(rows["account"]):
                    stmt = insert(directory_accounts).values([{"org_id": org, **v} for v in chunk])
                    await session.execute(
                        stmt.on_conflict_do_update(
                            index_elements=["org_id", "channel", "account"], set_={"emp_no": stmt.excluded.emp_no}
                        )
                    )
                stmt = insert(directory_orgs).values(org_id=org, version=1)
                await session.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["org_id"],
                        set_={"version": directory_orgs.c.version + 1, "updated_at": func.now()},
                    )
                )
        self._orgs.pop(org, None)

    async def link(self, org: str, channel: str, account: str, emp_no: str) -> None:
        """Map a channel account to a person who is in the directory."""
        org = check_org(org)
        for name, value in (("--channel", channel), ("--account", account), ("--person", emp_no)):
            if not value.strip() or "\x00" in value or len(value) > 300:
                raise SkillyardError(f"{name} {value!r} is empty or not a name; pass 1 to 300 characters")
        if emp_no not in (await self.snapshot(org)).people:
            raise SkillyardError(
                f"person {emp_no!r} is not in the directory of {org!r}; import them first (skillyard directory import)"
            )
        record = Record("account", 0, {"channel": channel.strip(), "account": account.strip(), "emp_no": emp_no})
        await self.apply(org, Plan([Change("add", "account", f"{channel}/{account}", record=record)], []))


def _chunks(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [rows[i : i + BATCH] for i in range(0, len(rows), BATCH)]


def _text(value: object) -> str:
    return value.strip() if isinstance(value, str) else ""
