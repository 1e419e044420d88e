"""External events for waiting nodes: ``builtin_node_wait_event``, ``yard.agent_event`` and ``skillyard agent event``.

Two tables (migration 0009): ``agent_event_waits``, one row per wait of a node (org, event, correlation key,
deadline, status), and ``agent_events``, one row per event received (its payload, and until when it waits for a
node when nobody waits for it yet). Both sides take one transaction-level advisory lock per (org, event, key), so
an event and a wait that cross never miss each other:

* an event with waiters goes to all of them: each wait becomes ``DELIVERED`` and gets a resume job;
* an event for nobody is kept for :data:`EVENT_KEPT_FOR` and claimed by the first node that starts waiting for it
  later, which gets it at once, without suspending (the callback that arrives before the wait);
* a wait without its event times out at its deadline: a job scheduled then on the waiting host's queue (a worker's
  recovery moves it to the shared queue should that host be gone), or the next time the session is touched.

Events are scoped by org: a node waits in the org of its session's identity, and an event reaches only the nodes of
the org it names. Resumes are queued jobs (never run inside the caller's request) of this host's queue, or of the
shared queue for a ``skillyard worker`` with ``detach``; each runs under the session's lock (store.py), so two
deliveries never run one node at once. Job arguments hold the wait id only; payloads stay in the table.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ..credentials import masked_logger
from ..errors import SkillyardError
from .chain.evidence import fill
from .chain.plan import ToolPlan
from .contract_parse import EVENT_NAME
from .plugin import DELIVER_JOB, TIMEOUT_JOB
from .state import EVENT_TOOL_PREFIX, Evidence, EvidenceStatus

if TYPE_CHECKING:
    from psycopg import AsyncConnection

    from ..yard import SkillYard
    from .context import NodeContext

log = masked_logger("skillyard.agent.events")

#: How long an event nobody waits for is kept for a node that starts waiting later.
EVENT_KEPT_FOR = dt.timedelta(hours=24)
#: A wait's timeout when the model gives none, and the longest one it may give.
DEFAULT_TIMEOUT_S = 24 * 3600.0
MAX_TIMEOUT_S = 30 * 24 * 3600.0
MAX_KEY_CHARS = 200
MAX_ORG_CHARS = 200
#: The JSON text of one payload (it is stored, and read by the model as evidence).
MAX_PAYLOAD_CHARS = 256 * 1024
#: Finished waits and claimed events are deleted this long after they ended.
KEEP_FINISHED = dt.timedelta(days=7)

WAITING, DELIVERED, TIMED_OUT, CANCELLED = "WAITING", "DELIVERED", "TIMED_OUT", "CANCELLED"


class EventError(SkillyardError):
    """An event or a wait that cannot be taken (a bad name, key, org or payload); the message names the fix."""


@dataclass(frozen=True)
class Claimed:
    """A stored event the new wait took at once."""

    event_id: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Waiting:
    """A wait registered for a later event (or its timeout)."""

    wait_id: str
    deadline: float


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not EVENT_NAME.match(name):
        raise EventError(
            f"event name {name!r} is not valid: use 1-100 letters, digits, '_', '-', '.' or ':' (e.g. order.paid)"
        )
    return name


def check_key(key: Any) -> str:
    if isinstance(key, int) and not isinstance(key, bool):
        key = str(key)
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_CHARS or "\x00" in key:
        raise EventError(
            f"correlation key {key!r} is not valid: give non-empty text of at most {MAX_KEY_CHARS} characters "
            "(e.g. the order number the event is about)"
        )
    return key.strip()


def check_org(org_id: Any) -> str:
    if isinstance(org_id, int) and not isinstance(org_id, bool):
        org_id = str(org_id)
    if not isinstance(org_id, str) or len(org_id) > MAX_ORG_CHARS or "\x00" in org_id:
        raise EventError(f"org id {org_id!r} is not valid: give the org's id as text (--org 7)")
    return org_id.strip()


def check_payload(payload: Any) -> dict[str, Any]:
    if payload is None:
        return {}
    if not isinstance(payload, Mapping):
        raise EventError(f"the event payload must be a JSON object, not {type(payload).__name__}")
    try:
        text = json.dumps(payload, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise EventError(f"the event payload cannot be stored as JSON: {exc}") from None
    if len(text) > MAX_PAYLOAD_CHARS:
        raise EventError(f"the event payload is {len(text):,} characters of JSON; send at most {MAX_PAYLOAD_CHARS:,}")
    if "\\u0000" in text:
        raise EventError("the event payload holds a NUL character (\\u0000), which PostgreSQL cannot store")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def check_timeout(seconds: Any) -> float:
    if seconds is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds <= MAX_TIMEOUT_S:
        raise EventError(f"timeoutSeconds must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:.0f}")
    return float(seconds)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


async def _lock(conn: AsyncConnection[Any], org_id: str, event: str, key: str) -> None:
    """The transaction's lock on one (org, event, key): waits and events of it are taken one at a time."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [json.dumps(["agent-event", org_id, event, key])]
    )


async def start_wait(
    yard: SkillYard,
    *,
    org_id: str,
    event: str,
    key: str,
    session_id: str,
    task_id: str,
    node_id: str,
    timeout_s: float,
) -> Claimed | Waiting:
    """Take a stored event for (org, event, key) at once, or register a wait and schedule its timeout."""
    engine = await yard.background.engine()
    wait_id = _new_id("wait")
    async with engine.transaction() as conn, conn.cursor(row_factory=dict_row) as cur:
        await _lock(conn, org_id, event, key)
        await cur.execute(
            """SELECT id, payload FROM skillyard.agent_events
               WHERE org_id = %s AND event = %s AND key = %s AND claimed_at IS NULL AND expires_at > now()
               ORDER BY created_at LIMIT 1""",
            [org_id, event, key],
        )
        stored = await cur.fetchone()
        if stored is not None:
            await cur.execute(
                "UPDATE skillyard.agent_events SET claimed_at = now(), claimed_by = %s WHERE id = %s",
                [wait_id, stored["id"]],
            )
            return Claimed(stored["id"], stored["payload"])
        deadline = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=timeout_s)
        await cur.execute(
            """INSERT INTO skillyard.agent_event_waits
                   (id, org_id, event, key, session_id, task_id, node_id, status, deadline)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)""",
            [wait_id, org_id, event, key, session_id, task_id, node_id, WAITING, deadline],
        )
        deferrer = engine.app_task(TIMEOUT_JOB).configure(
            queue=yard.background.queue, connection=conn, schedule_at=deadline, lock=session_id
        )
        await deferrer.defer_async(wait_id=wait_id)  # not tracked: closing the host does not wait for a deadline
    return Waiting(wait_id, deadline.timestamp())


async def publish(
    yard: SkillYard,
    event: str,
    key: str,
    payload: Mapping[str, Any] | None,
    *,
    org_id: str,
    detach: bool = False,
    wait: bool = False,
) -> dict[str, Any]:
    """Deliver an event to every node of ``org_id`` waiting for (event, key), or keep it for a later wait.

    Each delivery is a resume job: on this host's queue (it runs at once; ``yard.close()`` waits for it; ``wait``
    waits here and adds each session's ``status`` and ``checkpoint``) or, with ``detach``, on the shared queue for
    a ``skillyard worker``. Returns ``{event_id, event, key, org_id, stored, deliveries: [{wait_id, session_id,
    task_id, node_id, job_id}]}``."""
    if detach and wait:
        raise EventError("a detached event is resumed by a worker; it cannot also be waited for here")
    event, key, org_id, body = check_name(event), check_key(key), check_org(org_id), check_payload(payload)
    engine = await yard.background.engine()
    from ..chains.engine import QUEUE

    queue = QUEUE if detach else yard.background.queue
    event_id = _new_id("event")
    deliveries: list[dict[str, Any]] = []
    async with engine.transaction() as conn, conn.cursor(row_factory=dict_row) as cur:
        await _prune(conn)
        await _lock(conn, org_id, event, key)
        await cur.execute(
            """SELECT id, session_id, task_id, node_id FROM skillyard.agent_event_waits
               WHERE org_id = %s AND event = %s AND key = %s AND status = %s ORDER BY created_at FOR UPDATE""",
            [org_id, event, key, WAITING],
        )
        waits = await cur.fetchall()
        expires = dt.datetime.now(dt.UTC) + EVENT_KEPT_FOR
        await cur.execute(
            """INSERT INTO skillyard.agent_events (id, org_id, event, key, payload, expires_at, claimed_at, claimed_by)
               VALUES (%s, %s, %s, %s, %s, %s, CASE WHEN %s THEN now() END, %s)""",
            [event_id, org_id, event, key, Jsonb(body), expires, bool(waits), "waiters" if waits else None],
        )
        for wait in waits:
            await cur.execute(
                "UPDATE skillyard.agent_event_waits SET status = %s, event_id = %s, updated_at = now() WHERE id = %s",
                [DELIVERED, event_id, wait["id"]],
            )
            deferrer = engine.app_task(DELIVER_JOB).configure(queue=queue, connection=conn, lock=wait["session_id"])
            job_id = int(await deferrer.defer_async(wait_id=wait["id"]))
            deliveries.append(
                {"wait_id": wait["id"], "job_id": job_id, **{k: wait[k] for k in ("session_id", "task_id", "node_id")}}
            )
    if not detach:
        for delivery in deliveries:
            yard.background.track(delivery["job_id"])
    if wait:
        await yard.background.wait({d["job_id"] for d in deliveries})
        for delivery in deliveries:
            delivery.update(await _task_state(yard, delivery["session_id"], delivery["task_id"]))
    log.info("event %s (%s) of org %r: %d waiting node(s)", event, event_id, org_id, len(deliveries))
    return {
        "event_id": event_id,
        "event": event,
        "key": key,
        "org_id": org_id,
        "stored": not deliveries,
        "deliveries": deliveries,
    }


async def _task_state(yard: SkillYard, session_id: str, task_id: str) -> dict[str, Any]:
    """Where a resumed task stands: its status, and the type of its open checkpoint."""
    from .store import AgentStore

    store = AgentStore(yard.database)
    task = await store.load_task(task_id)
    session = await store.load_session(session_id)
    node = await store.load_node(session.node_id) if session is not None and session.node_id else None
    checkpoint = node.checkpoint.type.value if node is not None and node.checkpoint is not None else None
    return {"status": task.status.value if task is not None else None, "checkpoint": checkpoint}


async def _prune(conn: AsyncConnection[Any]) -> None:
    """Expired unclaimed events, and waits and events that ended a while ago (bounded by the index scan)."""
    await conn.execute("DELETE FROM skillyard.agent_events WHERE expires_at < now() - %s", [KEEP_FINISHED])
    await conn.execute(
        "DELETE FROM skillyard.agent_event_waits WHERE status <> %s AND updated_at < now() - %s",
        [WAITING, KEEP_FINISHED],
    )


async def settle_wait(yard: SkillYard, wait_id: str, status: str) -> dict[str, Any] | None:
    """Move a WAITING wait to ``status`` (TIMED_OUT, CANCELLED); its row, or None when it was no longer waiting."""
    engine = await yard.background.engine()
    async with engine.transaction() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            """UPDATE skillyard.agent_event_waits SET status = %s, updated_at = now()
               WHERE id = %s AND status = %s RETURNING *""",
            [status, wait_id, WAITING],
        )
        row: dict[str, Any] | None = await cur.fetchone()
    return row


async def delivered(yard: SkillYard, wait_id: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(the wait, its event) of a DELIVERED wait, or None."""
    engine = await yard.background.engine()
    async with engine.transaction() as conn, conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            """SELECT w.*, e.payload FROM skillyard.agent_event_waits w
               JOIN skillyard.agent_events e ON e.id = w.event_id WHERE w.id = %s AND w.status = %s""",
            [wait_id, DELIVERED],
        )
        row = await cur.fetchone()
    if row is None:
        return None
    return row, {"id": row["event_id"], "payload": row["payload"]}


def event_record(ctx: NodeContext, name: str, key: str, payload: dict[str, Any], event_id: str | None) -> Evidence:
    """The evidence of an event a node received: pseudo-tool ``event:<NAME>``, its payload as the response and the
    extracts of the contract's ``events.<NAME>`` (the ``EVENT`` source and ``evidence.<key>`` read them)."""
    spec = ctx.skill.contract.events.get(name)
    extracts = tuple((e.key or e.path, e) for e in spec.extracts) if spec is not None else ()
    record = Evidence.started(
        ctx.store.new_evidence_id(),
        ctx.task.id,
        ctx.node.id,
        EVENT_TOOL_PREFIX + name,
        {"event": name, "correlationKey": key, "event_id": event_id},
        False,
    )
    record.status, record.business_ok, record.response = EvidenceStatus.SUCCESS, True, payload
    fill(ctx, ToolPlan(False, frozenset(), (), (), None, extracts), record, payload)
    return record


# -- the resume jobs (registered through register_jobs by the agent plugin) --------------------------------------


async def deliver_job(yard: SkillYard, wait_id: str) -> None:
    """Resume the node of a DELIVERED wait with its event's payload."""
    found = await delivered(yard, wait_id)
    if found is None:
        log.info("wait %s is no longer delivered (cancelled meanwhile): nothing to resume", wait_id)
        return
    wait, event = found
    from .runner import agent_for_session

    agent = await agent_for_session(yard, wait["session_id"])
    turn = await agent.event_arrived(wait["session_id"], wait_id, event["payload"], event["id"])
    log.info("event %s resumed session %s: %s", event["id"], wait["session_id"], turn.status if turn else "not waiting")


async def timeout_job(yard: SkillYard, wait_id: str) -> None:
    """At a wait's deadline: resume its node with EVENT_TIMEOUT, unless the event came first."""
    wait = await settle_wait(yard, wait_id, TIMED_OUT)
    if wait is None:
        return  # delivered or cancelled before its deadline
    from .runner import agent_for_session

    agent = await agent_for_session(yard, wait["session_id"])
    turn = await agent.event_arrived(wait["session_id"], wait_id, None)
    log.info("wait %s timed out: session %s %s", wait_id, wait["session_id"], turn.status if turn else "not waiting")
