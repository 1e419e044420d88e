"""Async skills' background runs under ``mcp serve``: started at once, answered by ``skillyard_run_status``.

The result must come back to the MCP client that asked (not to a chat channel, where the job queue delivers), so
the server holds the run as a task of its own process, with the detached policy of every background run (§8: no
default wall clock, nothing of the live request).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from collections.abc import Coroutine
from typing import Any

#: Finished runs whose envelopes are kept for ``skillyard_run_status`` (the oldest go first).
MAX_FINISHED = 1000


class BackgroundRuns:
    """Running and finished background runs, each readable only by the identity that started it."""

    def __init__(self) -> None:
        self._tasks: dict[str, tuple[str, asyncio.Task[dict[str, Any]]]] = {}
        self._finished: OrderedDict[str, tuple[str, dict[str, Any]]] = OrderedDict()

    def start(self, owner: str, run: Coroutine[Any, Any, dict[str, Any]]) -> str:
        run_id = uuid.uuid4().hex
        task = asyncio.get_running_loop().create_task(run)
        self._tasks[run_id] = (owner, task)
        task.add_done_callback(lambda t: self._finish(run_id, owner, t))
        return run_id

    def _finish(self, run_id: str, owner: str, task: asyncio.Task[dict[str, Any]]) -> None:
        self._tasks.pop(run_id, None)
        if task.cancelled():
            envelope = {"ok": False, "success": False, "error": "the run was stopped when the server shut down"}
        elif task.exception() is not None:
            envelope = {"ok": False, "success": False, "error": f"the run failed: {task.exception()}"}
        else:
            envelope = task.result()
        self._finished[run_id] = (owner, envelope)
        while len(self._finished) > MAX_FINISHED:
            self._finished.popitem(last=False)

    def status(self, owner: str, run_id: str) -> dict[str, Any] | None:
        """The envelope, ``{"status": "running"}``, or None for a run this identity did not start (or long gone)."""
        running = self._tasks.get(run_id)
        if running is not None and running[0] == owner:
            return {"status": "running", "run_id": run_id}
        finished = self._finished.get(run_id)
        if finished is not None and finished[0] == owner:
            return finished[1]
        return None

    async def close(self) -> None:
        """Stop what still runs (the server is shutting down)."""
        tasks = [task for _, task in self._tasks.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
