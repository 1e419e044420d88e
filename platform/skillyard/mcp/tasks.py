"""MCP tasks (protocol 2025-11-25) over the background runs of async skills.

An async skill's tool declares ``execution.taskSupport: "optional"``. A ``tools/call`` that carries ``task`` runs the
skill as ``yard.run`` runs it (a job on the queue) and answers with a task whose id is the run id; ``tasks/get``
reads the run's status and ``tasks/result`` waits for its end and answers what the call would have, both from
PostgreSQL, so any serve process answers, for the identity that owns the run's session only. A client without
tasks gets the acknowledgement and ``skillyard_run_status`` instead (2026-07-28 clients too: there tasks are an
extension the SDK does not carry yet).

The SDK's ``tools/call`` surface of 2025-11-25 knows only ``CallToolResult`` and would strip a task from the
answer, so the handler raises :class:`TaskCreated` and :func:`answer_created_tasks`, a server middleware above
that surface, answers with it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server

from ..chains.background_runs import KEEP_DAYS, RUNNING, BackgroundRun

#: The protocol version whose clients may ask for tasks.
TASKS_VERSION = "2025-11-25"
#: How long a run's task is kept (the background run's row), in milliseconds.
TTL_MS = KEEP_DAYS * 24 * 3600 * 1000
POLL_INTERVAL_MS = 1000
#: How long ``tasks/result`` waits for a run's end before it answers that the run still works.
RESULT_WAIT_S = 300.0
RELATED_TASK = "io.modelcontextprotocol/related-task"


class TaskCreated(Exception):
    """A task-augmented call was accepted: the answer is this ``CreateTaskResult``."""

    def __init__(self, result: types.CreateTaskResult) -> None:
        super().__init__(result.task.task_id)
        self.result = result


async def answer_created_tasks(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: the ``CreateTaskResult`` of an accepted task-augmented call, as the wire carries it."""
    try:
        return await call_next(ctx)
    except TaskCreated as created:
        return created.result.model_dump(by_alias=True, mode="json", exclude_none=True)


def wants_task(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> bool:
    """Whether a call asks for a task on a connection whose protocol has them (elsewhere ``task`` is ignored)."""
    return params.task is not None and ctx.protocol_version == TASKS_VERSION


def _iso(moment: dt.datetime | None) -> str:
    return (moment or dt.datetime.now(dt.UTC)).isoformat()


def task_of(run: BackgroundRun) -> types.Task:
    """A run as a task: ``working`` while it runs, then ``completed``, or ``failed`` when its envelope failed (the
    tool result is an error), with the error as the status message."""
    if run.status == RUNNING:
        status, message = "working", f"{run.skill} is running in the background"
    elif run.status == "succeeded":
        status, message = "completed", None
    else:
        error = (run.envelope or {}).get("error")
        status, message = "failed", str(error) if error else f"{run.skill} failed"
    return types.Task(
        task_id=run.run_id,
        status=status,
        status_message=message,
        created_at=_iso(run.created_at),
        last_updated_at=_iso(run.finished_at or run.created_at),
        ttl=TTL_MS,
        poll_interval=POLL_INTERVAL_MS,
    )


def created(run_id: str, skill: str) -> TaskCreated:
    """The answer to an accepted call: a working task named by the run id."""
    now = dt.datetime.now(dt.UTC)
    run = BackgroundRun(run_id, skill, "", RUNNING, None, now, None)
    return TaskCreated(types.CreateTaskResult(task=task_of(run)))


async def wait_for_end(
    read: Callable[[], Awaitable[BackgroundRun | None]], wait_s: float = RESULT_WAIT_S
) -> BackgroundRun | None:
    """Poll a run until it ended or ``wait_s`` passed (bounded: one read per poll interval); the last read."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    run = await read()
    while run is not None and run.status == RUNNING and loop.time() < deadline:
        await asyncio.sleep(min(POLL_INTERVAL_MS / 1000, max(0.0, deadline - loop.time())))
        run = await read()
    return run


class TaskServer(Server[Any]):
    """The SDK's low-level server, advertising task-augmented ``tools/call`` once ``tasks/get`` is served."""

    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        if "tasks/get" not in self._request_handlers:
            return capabilities
        requests = types.ServerTasksRequestsCapability(
            tools=types.TasksToolsCapability(call=types.TasksCallCapability())
        )
        return capabilities.model_copy(update={"tasks": types.ServerTasksCapability(requests=requests)})
