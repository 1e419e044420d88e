"""``skillyard mcp serve``: the exposed skills as MCP tools over the SDK's low-level server (stdio or streamable
HTTP), their files as resources, the catalog watched for ``tools/list_changed``.

Every call runs through ``yard.run`` with the caller's identity (its token, or the server's ``--context``) in the
MCP session's skillyard session; a client's cancellation sets the run's ``abort_signal``, its progress token
receives what the skill reports through ``runtime_context["progress"]``. Async skills answer as MCP tasks where the
client asks for one (:mod:`.tasks`), else with an acknowledgement and ``skillyard_run_status``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from pydantic import AnyHttpUrl
from starlette.applications import Starlette

from ..catalog.skill import Skill
from ..chains import background_runs
from ..errors import SkillyardError
from ..tokens.store import TokenStore
from ..yard import SkillYard
from .auth import StoreTokenVerifier, identity_of
from .resources import ResourceProblem, read_resource, session_resources, skill_resources
from .session import (
    CHANNEL,
    SESSION_META_KEY,
    Caller,
    SessionRefused,
    Sessions,
    default_session,
    named_session,
    new_connection_session,
    session_from_mcp,
)
from .tasks import RELATED_TASK, TaskServer, answer_created_tasks, created, task_of, wait_for_end, wants_task
from .tools import RUN_STATUS_TOOL, ExposedTool, call_result, error_result, exposed_tools, tool_list

log = logging.getLogger("skillyard.mcp")
#: How long a cancelled run may take to honour its abort_signal before its task is cancelled.
ABORT_GRACE_S = 5.0
#: How often the skill roots are read again for ``tools/list_changed``.
DEFAULT_RESCAN_S = 2.0
#: How many times a rescan's own duration the watcher waits before the next (see SkillServer._watch).
RESCAN_BACKOFF = 10
#: How long one ``list_changed`` notification may take to reach a client.
NOTIFY_TIMEOUT_S = 2.0
#: Connections remembered for notifications (the most recently seen ones).
MAX_CONNECTIONS = 1000
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class SkillServer:
    """One MCP server over one host: its sessions, background runs and the connections to notify."""

    def __init__(self, yard: SkillYard, server_caller: Caller | None, *, rescan_s: float = DEFAULT_RESCAN_S) -> None:
        """``server_caller``: who tokenless requests run as (stdio, ``--no-auth``); None refuses them."""
        self.yard = yard
        self.server_caller = server_caller
        self.rescan_s = rescan_s
        self.sessions = Sessions(yard.database)
        self.verifier = StoreTokenVerifier(TokenStore(yard.database))
        self.stdio_session = new_connection_session()
        self._connections: OrderedDict[str, ServerSession] = OrderedDict()
        self.tools: dict[str, ExposedTool] = exposed_tools(yard)
        self.changes = InMemorySubscriptionBus()  # 2026-07-28 clients hear of changes on subscriptions/listen
        self.lowlevel = TaskServer(
            "skillyard",
            version=_version(),
            instructions="skillyard skills as tools; each skill's SKILL.md and references/ are resources.",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
            on_subscriptions_listen=ListenHandler(self.changes),
        )
        self.lowlevel.add_request_handler("tasks/get", types.GetTaskRequestParams, self._get_task)
        self.lowlevel.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, self._task_result)
        self.lowlevel.middleware.append(answer_created_tasks)

    def initialization_options(self) -> Any:
        return self.lowlevel.create_initialization_options(NotificationOptions(tools_changed=True))

    # who and where ---------------------------------------------------------------------------------------
    def _caller(self, ctx: ServerRequestContext[Any]) -> Caller:
        request = ctx.request
        user = request.scope.get("user") if request is not None else None
        if isinstance(user, AuthenticatedUser):
            identity = identity_of(user.access_token)
            if identity is not None:
                return Caller.from_token(identity)
        if self.server_caller is None:  # the bearer middleware refuses these first; never run as nobody
            raise MCPError(types.INVALID_REQUEST, "a token is required: send 'Authorization: Bearer <token>'")
        return self.server_caller

    async def _session(self, ctx: ServerRequestContext[Any], caller: Caller) -> tuple[str, Any]:
        """The skillyard session of a request and its turn: named in ``_meta``, else the MCP session's, else the
        stdio connection's, else (sessionless HTTP) the caller's own."""
        named = (ctx.meta or {}).get(SESSION_META_KEY)
        request = ctx.request
        header = request.headers.get("mcp-session-id") if request is not None else None
        if named is not None:
            session_id = named_session(named, caller, *([session_from_mcp(header)] if header else []))
        elif header:
            session_id = session_from_mcp(header)
        elif request is None:
            session_id = self.stdio_session
        else:
            session_id = default_session(caller)
        turn = await self.sessions.claim(session_id, caller)
        self._connections[session_id] = ctx.session
        self._connections.move_to_end(session_id)
        while len(self._connections) > MAX_CONNECTIONS:
            self._connections.popitem(last=False)
        return session_id, turn

    # handlers --------------------------------------------------------------------------------------------
    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        try:
            await self._session(ctx, self._caller(ctx))  # remembered: this connection hears of changes to the list
        except SessionRefused as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        return types.ListToolsResult(tools=tool_list(self.tools))

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        caller = self._caller(ctx)
        try:
            session_id, turn = await self._session(ctx, caller)
        except SessionRefused as exc:
            return error_result(str(exc))
        arguments = params.arguments or {}
        tool = self.tools.get(params.name)
        as_task = wants_task(ctx, params)
        if as_task and (tool is None or not tool.skill.is_async):
            raise MCPError(
                types.METHOD_NOT_FOUND,
                f"tool {params.name!r} does not run as a task (its execution.taskSupport is forbidden); call it "
                "without task",
            )
        if params.name == RUN_STATUS_TOOL:
            return await self._run_status(caller, arguments)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}; tools/list shows the tools")
        context = {**caller.context, "session_id": session_id, "channel": CHANNEL}
        try:
            if tool.skill.is_async:  # yard.run defers it to the job queue and answers with its run id
                envelope = await self.yard.run(tool.name, arguments, context)
                if as_task:
                    raise created(await self._task_run(tool.name, session_id, envelope), tool.name)
                if envelope.get("async") and envelope.get("run_id"):
                    envelope = _acknowledgement(tool.name, envelope["run_id"])
                return call_result(envelope, session_id)
            abort = asyncio.Event()
            context["abort_signal"] = abort
            context["progress"] = ctx.session.report_progress
            envelope = await self._run_abortable(tool.name, arguments, context, turn, abort)
        except SkillyardError as exc:  # refused at the host's edge (bad context, unreachable database)
            return error_result(str(exc))
        return call_result(envelope, session_id)

    async def _run_abortable(
        self, name: str, arguments: dict[str, Any], context: dict[str, Any], turn: Any, abort: asyncio.Event
    ) -> dict[str, Any]:
        """Run a skill; when the client cancels, set its ``abort_signal`` and give it a moment to stop itself."""
        task = asyncio.ensure_future(self.yard.run(name, arguments, context, turn=turn))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            abort.set()
            with anyio.CancelScope(shield=True):
                await asyncio.wait({task}, timeout=ABORT_GRACE_S)
            task.cancel()
            raise

    async def _own_run(self, caller: Caller, run_id: object) -> background_runs.BackgroundRun | None:
        """A background run from PostgreSQL (any process answers), when the caller owns the session it ran in."""
        if not isinstance(run_id, str) or not run_id or len(run_id) > 64:
            return None
        run = await background_runs.read(self.yard, run_id)
        owner = await self.sessions.owners.owner(run.session_id) if run is not None else None
        return run if run is not None and owner is not None and owner[0] == caller.owner else None

    async def _task_run(self, tool: str, session_id: str, envelope: dict[str, Any]) -> str:
        """The run id of a task-augmented call; a call that failed before it was queued (bad input) gets a run
        record of its own, already failed, so its task says so."""
        if envelope.get("async") and isinstance(envelope.get("run_id"), str):
            return str(envelope["run_id"])
        run_id = uuid.uuid4().hex
        await background_runs.started(self.yard, run_id, tool, session_id)
        await background_runs.finished(self.yard, run_id, envelope)
        return run_id

    async def _run_status(self, caller: Caller, arguments: dict[str, Any]) -> types.CallToolResult:
        """A background run's envelope, or ``{"status": "running"}``, for the identity that owns its session."""
        run_id = arguments.get("run_id")
        if not isinstance(run_id, str) or not run_id or len(run_id) > 64:
            return error_result(f'{RUN_STATUS_TOOL} needs {{"run_id": "..."}}, the id an async skill answered with')
        run = await self._own_run(caller, run_id)
        if run is None:
            return error_result(f"no background run {run_id!r} of yours; use the run_id an async skill answered with")
        status = run.envelope if run.envelope is not None else {"status": "running", "run_id": run_id}
        return types.CallToolResult(
            content=[types.TextContent(text=_json(status))],
            structured_content=status,
            is_error=status.get("ok") is False,
        )

    async def _get_task(self, ctx: ServerRequestContext[Any], params: types.GetTaskRequestParams) -> types.Task:
        run = await self._own_run(self._caller(ctx), params.task_id)
        if run is None:
            raise MCPError(types.INVALID_PARAMS, f"no task {params.task_id!r} of yours")
        return task_of(run)

    async def _task_result(
        self, ctx: ServerRequestContext[Any], params: types.GetTaskPayloadRequestParams
    ) -> types.CallToolResult:
        """What the task's ``tools/call`` would have answered, once its run ended (waiting a bounded time)."""
        caller = self._caller(ctx)
        run = await wait_for_end(lambda: self._own_run(caller, params.task_id))
        if run is None:
            raise MCPError(types.INVALID_PARAMS, f"no task {params.task_id!r} of yours")
        if run.envelope is None:
            raise MCPError(types.INTERNAL_ERROR, f"task {params.task_id!r} is still working; ask tasks/result again")
        result = call_result(run.envelope, run.session_id)
        return result.model_copy(update={"meta": {RELATED_TASK: {"taskId": run.run_id}}})

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        caller = self._caller(ctx)
        resources = skill_resources(_skills(self.tools))
        try:
            session_id, _ = await self._session(ctx, caller)
        except SessionRefused as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None
        if self.yard.database.exists:  # a session's files live in the database: never start one to list none
            resources += await session_resources(self.yard, session_id)
        return types.ListResourcesResult(resources=resources)

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        caller = self._caller(ctx)
        try:
            session_id, _ = await self._session(ctx, caller)
            skills = {skill.name: skill for skill in _skills(self.tools)}
            return await read_resource(self.yard, str(params.uri), session_id, skills)
        except (SessionRefused, ResourceProblem) as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc)) from None

    # the catalog -----------------------------------------------------------------------------------------
    async def refresh(self) -> bool:
        """Read the skill roots again; when the tools changed, tell every known handshake-era connection and every
        2026-07-28 listener. True if they did."""
        self.yard.rescan()
        tools = exposed_tools(self.yard)
        before = {name: tool.definition() for name, tool in self.tools.items()}
        self.tools = tools
        if before == {name: tool.definition() for name, tool in tools.items()}:
            return False
        for session_id, session in list(self._connections.items()):
            try:
                with anyio.fail_after(NOTIFY_TIMEOUT_S):
                    await session.send_tool_list_changed()
            except Exception as exc:  # a client gone, or one without a notification stream
                log.info("tools/list_changed not delivered to session %s (%s)", session_id, exc.__class__.__name__)
        await self.changes.publish(ToolsListChanged())
        return True

    async def _watch(self) -> None:
        """Rescan every ``rescan_s``, or less often when a rescan is slow (thousands of folders): the next one
        waits :data:`RESCAN_BACKOFF` times as long as the last took, so rescans never hold the loop most of the time."""
        wait = self.rescan_s
        while True:
            await asyncio.sleep(wait)
            started = time.monotonic()
            try:
                await self.refresh()
            except Exception:  # a bad folder must not stop the watcher; the catalog reports per skill
                log.exception("rescan for tools/list_changed failed")
            wait = max(self.rescan_s, RESCAN_BACKOFF * (time.monotonic() - started))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[SkillServer]:
        """The host open, the catalog watched; the host closed after (closing waits for its background runs)."""
        async with self.yard:
            watcher = asyncio.get_running_loop().create_task(self._watch())
            try:
                yield self
            finally:
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)

    # transports ------------------------------------------------------------------------------------------
    def http_app(
        self, host: str, port: int, require_token: bool, path: str = "/mcp", stateless: bool = False
    ) -> Starlette:
        """The streamable HTTP app at ``path``; with ``require_token`` the SDK's bearer middleware refuses tokenless
        requests and binds each MCP session to its token. DNS-rebinding protection is on for every host.
        ``stateless``: no ``Mcp-Session-Id`` sessions held in this process (the SDK keeps those in memory), so any
        process behind a load balancer answers any request. ``skillyard serve`` mounts it at ``/mcp`` with
        ``path="/"``."""
        security = None
        if host not in LOOPBACK:
            security = TransportSecuritySettings(allowed_hosts=[f"{host}:*"], allowed_origins=[f"http://{host}:*"])
        common: dict[str, Any] = {
            "streamable_http_path": path,
            "host": host,
            "transport_security": security,
            "stateless_http": stateless,
        }
        if not require_token:
            return self.lowlevel.streamable_http_app(**common)
        return self.lowlevel.streamable_http_app(
            **common,
            token_verifier=self.verifier,
            auth=AuthSettings(issuer_url=AnyHttpUrl(f"http://{_host_port(host, port)}"), resource_server_url=None),
        )

    async def serve_stdio(self) -> None:
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await self.lowlevel.run(read, write, self.initialization_options())


def _acknowledgement(tool: str, run_id: str) -> dict[str, Any]:
    """An async skill's immediate answer (§8), pointing at the run-status tool."""
    return {
        "ok": True,
        "success": True,
        "async": True,
        "run_id": run_id,
        "message": f"{tool} is running in the background; call {RUN_STATUS_TOOL} with "
        f'{{"run_id": "{run_id}"}} for its result.',
    }


def _skills(tools: dict[str, ExposedTool]) -> list[Skill]:
    """The skills behind the tools, once each (a fanned-out skill has several tools)."""
    seen: dict[str, Skill] = {}
    for tool in tools.values():
        seen.setdefault(tool.skill.name, tool.skill)
    return list(seen.values())


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("skillyard")
    except PackageNotFoundError:
        return ""
