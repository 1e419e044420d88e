"""The console's pages: skills (state, gating, a run form from the input schema), runs, a chat with an agent on the
``web`` channel (display blocks per §6.2, checkpoints as buttons, progress over SSE), a session's artifacts, chains
and schedules, and a datatable browser. A person signs in with a token, kept in an HttpOnly SameSite=Strict cookie;
every page checks it as the API checks a bearer token."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from ...errors import SkillyardError
from ..api.deps import service_of
from ..auth import COOKIE, Principal
from ..display import turn_display
from ..errors import ApiError
from ..sessions import check_session
from .render import FormError, form_fields, input_from_form, markdown

HERE = Path(__file__).parent
templates = Jinja2Templates(directory=str(HERE / "templates"))
templates.env.filters["markdown"] = markdown
templates.env.filters["pretty"] = lambda v: json.dumps(v, ensure_ascii=False, indent=2, default=str)
router = APIRouter(prefix="/console", include_in_schema=False)
CHANNEL = "web"


class SignIn(Exception):
    pass


async def _principal(request: Request) -> Principal:
    service = service_of(request)
    if request.method == "POST":  # the cookie is SameSite=Strict; refuse a cross-site form all the same
        origin = request.headers.get("origin")
        if origin and origin.split("://", 1)[-1] != request.headers.get("host"):
            raise ApiError(403, "forbidden", "a console form was posted from another site", "use the console itself")
    try:
        principal = await service.auth.principal(request, cookie=True)
    except ApiError as exc:
        if exc.status == 401:
            raise SignIn from None
        raise
    await service.limiter.check(principal.name)
    return principal


def _page(request: Request, name: str, principal: Principal | None, **values: Any) -> HTMLResponse:
    return templates.TemplateResponse(request, name, {"principal": principal, **values})


@router.get("/login")
async def login_form(request: Request, error: str = "") -> HTMLResponse:
    return _page(request, "login.html", None, error=error)


@router.post("/login")
async def login(request: Request) -> Response:
    form = await request.form()
    token = str(form.get("token") or "").strip()
    if await service_of(request).auth.verify(token) is None:
        return _page(request, "login.html", None, error="That token is not a live token.")
    response = RedirectResponse("/console/skills", status_code=303)
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return response


@router.post("/logout")
async def logout() -> Response:
    response = RedirectResponse("/console/login", status_code=303)
    response.delete_cookie(COOKIE)
    return response


@router.get("/skills")
async def skills(request: Request) -> HTMLResponse:
    principal = await _principal(request)
    from ...catalog.describe import describe_entry

    rows = [describe_entry(e) for e in service_of(request).yard.entries]
    return _page(request, "skills.html", principal, skills=rows)


def _skill(request: Request, name: str) -> Any:
    found = service_of(request).yard.resolve(name)
    if found is None:
        raise ApiError(404, "not_found", f"no skill named {name!r}", "pick one from the skills page")
    return found[0]


@router.get("/skills/{name}")
async def skill_page(request: Request, name: str) -> HTMLResponse:
    principal = await _principal(request)
    skill = _skill(request, name)
    return _page(request, "skill.html", principal, skill=skill, fields=form_fields(skill.schema.exposed))


@router.post("/skills/{name}/run")
async def run_skill(request: Request, name: str) -> HTMLResponse:
    principal = await _principal(request)
    service = service_of(request)
    skill = _skill(request, name)
    form = {k: str(v) for k, v in (await request.form()).items()}
    session = form.pop("_session", "") or f"console-{uuid.uuid4().hex[:12]}"
    try:
        check_session(session)
        data = input_from_form(form_fields(skill.schema.exposed), form)
    except (FormError, ApiError) as exc:
        return _page(request, "envelope.html", principal, envelope=None, error=str(exc), session=session)
    await service.owners.claim(session, principal)
    context = {**principal.context, "session_id": session, "channel": CHANNEL}
    try:
        envelope = await service.yard.run(skill.name, data, context)
    except SkillyardError as exc:
        return _page(request, "envelope.html", principal, envelope=None, error=str(exc), session=session)
    return _page(request, "envelope.html", principal, envelope=envelope, error="", session=session)


@router.get("/runs")
async def runs(request: Request) -> HTMLResponse:
    principal = await _principal(request)
    from ..api.skills import runs_of

    return _page(request, "runs.html", principal, runs=await runs_of(request, principal, 100))


@router.get("/chat")
async def chat(request: Request, agent: str = "", session: str = "") -> HTMLResponse:
    principal = await _principal(request)
    service = service_of(request)
    codes = sorted(service.agents.codes())
    code = agent or (codes[0] if codes else "")
    session = session or f"web-{uuid.uuid4().hex[:12]}"
    check_session(session)
    view = await service.agents.session_view(session) if code else None
    return _page(request, "chat.html", principal, codes=codes, code=code, session=session, view=view)


async def _turn_fragment(
    request: Request, principal: Principal, turn: dict[str, Any], code: str, session: str
) -> HTMLResponse:
    markdown_block, replaces = turn_display(turn, CHANNEL)
    return _page(
        request,
        "turn.html",
        principal,
        turn=turn,
        display=markdown_block,
        replaces=replaces,
        code=code,
        session=session,
    )


@router.post("/chat/{code}/{session}/messages")
async def chat_message(request: Request, code: str, session: str) -> HTMLResponse:
    principal = await _principal(request)
    check_session(session)
    text = str((await request.form()).get("message") or "").strip()
    if not text:
        return _page(request, "turn_error.html", principal, error="Type a message first.")
    try:
        turn = await service_of(request).agents.send(code, session, principal, text, {"channel": CHANNEL})
    except ApiError as exc:
        return _page(request, "turn_error.html", principal, error=exc.detail)
    return await _turn_fragment(request, principal, {**turn.as_dict(), "said": text}, code, session)


@router.post("/chat/{code}/{session}/resume")
async def chat_resume(request: Request, code: str, session: str) -> HTMLResponse:
    principal = await _principal(request)
    check_session(session)
    form = await request.form()
    action = str(form.get("action") or "")
    text = str(form.get("text") or "") or None
    service = service_of(request)
    try:
        await service.owners.check(session, principal)
        turn = await service.agents.resume(code, session, principal, action, text)
    except ApiError as exc:
        return _page(request, "turn_error.html", principal, error=exc.detail)
    said = {"CONFIRM": "确认", "REJECT": "拒绝", "CANCEL": "取消"}.get(action.upper(), text or action)
    return await _turn_fragment(request, principal, {**turn.as_dict(), "said": said}, code, session)


@router.get("/chat/{code}/{session}/stream")
async def chat_stream(request: Request, code: str, session: str) -> Response:
    """The API's progress stream of the session, for the signed-in person (htmx's SSE extension reads it)."""
    principal = await _principal(request)
    from fastapi.responses import StreamingResponse

    from ..api.agents import stream_start

    after = await stream_start(request, session, principal)
    return StreamingResponse(_progress_html(request, session, after), media_type="text/event-stream")


async def _progress_html(request: Request, session: str, after: int) -> Any:
    """The stream as htmx's SSE extension swaps it: each event's data is an HTML fragment."""
    from markupsafe import escape

    from ..api.agents import turn_rows

    async for row in turn_rows(request, session, after):
        if row is None:
            yield ": ping\n\n"
            continue
        event = row["event"]
        if row["kind"] == "tool":
            label, tool = escape(event.get("label") or ""), escape(event.get("tool") or "")
            html = f'<li class="progress-item">{label} <code>{tool}</code></li>'
        elif row["kind"] == "started":
            html = '<li class="progress-item">…</li>'
        else:
            html = f'<li class="progress-item">{escape(event.get("status") or "")}</li>'
        yield f"event: progress\nid: {row['id']}\ndata: {html}\n\n"


@router.get("/sessions/{session}/artifacts")
async def artifacts(request: Request, session: str) -> HTMLResponse:
    principal = await _principal(request)
    service = service_of(request)
    await service.owners.check(session, principal)
    items = [a.as_dict() for a in await service.yard.attachments.for_session(session)]
    return _page(request, "artifacts.html", principal, session=session, items=items)


@router.get("/sessions/{session}/files/{ref}")
async def download(request: Request, session: str, ref: str) -> Response:
    principal = await _principal(request)
    from ..api.skills import download as api_download

    return await api_download(request, session, ref, principal)


@router.get("/chains")
async def chains(request: Request) -> HTMLResponse:
    principal = await _principal(request)
    if not principal.is_admin:
        return _page(request, "chains.html", principal, chains=None, schedules=[], runs={})
    from ..api import chains as api

    listing = await api.list_chains(request, principal)
    found = {c["name"]: await api.chain_runs(request, c["name"], principal, 10) for c in listing}
    schedules = await api.list_schedules(request, principal)
    return _page(request, "chains.html", principal, chains=listing, schedules=schedules, runs=found)


async def _datatable(request: Request, principal: Principal, input: dict[str, Any]) -> dict[str, Any]:
    context = {**principal.context, "session_id": f"console-data-{principal.org_id or 'none'}", "channel": CHANNEL}
    return await service_of(request).yard.run("datatable", input, context)


@router.get("/data")
async def data(request: Request) -> HTMLResponse:
    principal = await _principal(request)
    answer = await _datatable(request, principal, {"action": "list_tables"})
    return _page(request, "data.html", principal, answer=answer, tables=answer.get("data") or [])


@router.get("/data/{table}")
async def table(request: Request, table: str, field: str = "", op: str = "eq", value: str = "") -> HTMLResponse:
    principal = await _principal(request)
    columns = await _datatable(request, principal, {"action": "list_columns", "table_name": table})
    query: dict[str, Any] = {"action": "query", "table_name": table, "limit": 100}
    if field:
        item: dict[str, Any] = {"field": field, "op": op}
        if op not in ("is_null", "not_null"):
            item["value"] = value
        query["filters"] = [item]
    rows = await _datatable(request, principal, query)
    return _page(
        request,
        "table.html",
        principal,
        table=table,
        columns=columns.get("data") or [],
        columns_answer=columns,
        rows=rows,
        filter={"field": field, "op": op, "value": value},
        ops=["eq", "ne", "gt", "gte", "lt", "lte", "contains", "is_null", "not_null"],
    )


def mount_console(app: FastAPI) -> None:
    """The console's routes, its static files, and sign-in redirects for pages."""
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    @app.get("/", include_in_schema=False)
    async def home() -> Response:
        return RedirectResponse("/console/skills", status_code=303)

    @app.exception_handler(SignIn)
    async def _sign_in(request: Request, exc: SignIn) -> Response:
        if request.headers.get("hx-request"):
            return HTMLResponse('<p role="alert">Your sign-in ended: <a href="/console/login">sign in</a>.</p>')
        return RedirectResponse("/console/login", status_code=303)
