"""Every refusal of the service is JSON ``{error, detail, fix}``: a code, what was wrong (the field named), and how
to fix it. Request bodies are validated by FastAPI; its errors, HTTP errors and anything unexpected are mapped here,
so no response ever carries a traceback."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException

from ..credentials import masked_logger
from ..errors import SkillyardError

log = masked_logger("skillyard.service")

_FIXES = {
    400: "correct the request as the detail says",
    401: "send 'Authorization: Bearer <token>' with a token from `skillyard token add`",
    403: "use a token allowed to do this (docs/serve.md#auth)",
    404: "check the path; GET /openapi.json lists every endpoint",
    405: "use the method GET /openapi.json gives for this path",
    409: "wait for the running turn to end and send again (see Retry-After)",
    413: "send a smaller body",
    415: "send the body as application/json",
    429: "wait for Retry-After seconds, then send again",
}
#: SQLSTATE classes of a value the database refuses (22: data exception, 54: program limit such as an index row).
UNSTORABLE_STATES = ("22", "54")
_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "busy",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
}


class ApiError(Exception):
    """A refusal with its status, code, what was wrong and the fix (headers such as Retry-After optional)."""

    def __init__(self, status: int, error: str, detail: str, fix: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.error = error
        self.detail = detail
        self.fix = fix
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        return error_response(self.status, self.error, self.detail, self.fix, self.headers)


def error_response(
    status: int, error: str, detail: str, fix: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail, "fix": fix}, status_code=status, headers=headers)


def not_found(what: str, fix: str) -> ApiError:
    return ApiError(404, "not_found", what, fix)


def refused(detail: str, fix: str) -> ApiError:
    return ApiError(403, "forbidden", detail, fix)


def bad_request(detail: str, fix: str = _FIXES[400]) -> ApiError:
    return ApiError(400, "bad_request", detail, fix)


def _place(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body",)] or ["body"]
    return ".".join(parts)


def validation_detail(exc: RequestValidationError | ValidationError) -> tuple[str, str]:
    """The first problems of a request body (FastAPI's or a model's own), each naming its field, and the fix."""
    problems = []
    for item in list(exc.errors())[:5]:
        place = _place(tuple(item.get("loc", ())))
        message = str(item.get("msg", "invalid"))
        if item.get("type") == "extra_forbidden":
            message = "is not a field of this request"
        problems.append(f"{place}: {message}")
    return "; ".join(problems) or "the request body is invalid", "send the fields GET /openapi.json describes"


def install(app: FastAPI) -> None:
    """Map validation errors, HTTP errors, the library's own refusals and crashes onto the JSON error shape."""

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail, fix = validation_detail(exc)
        return error_response(422, "invalid_request", detail, fix)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        status = exc.status_code
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        code = _CODES.get(status, "error" if status >= 500 else "bad_request")
        return error_response(status, code, detail, _FIXES.get(status, "see the server log"), exc.headers)

    @app.exception_handler(SkillyardError)
    async def _library(request: Request, exc: SkillyardError) -> JSONResponse:
        return error_response(400, "bad_request", str(exc), "correct the request as the detail says")

    @app.exception_handler(DBAPIError)
    async def _unstorable(request: Request, exc: DBAPIError) -> JSONResponse:
        state = str(getattr(exc.orig, "sqlstate", "") or "")
        if not state.startswith(UNSTORABLE_STATES):
            return await _crash(request, exc)
        # The database's message may quote the value (a secret, say): only its SQLSTATE is logged.
        log.info("%s %s: a request value could not be stored (SQLSTATE %s)", request.method, request.url.path, state)
        return error_response(
            422,
            "invalid_request",
            "a value of the request cannot be stored: it holds a NUL character or half of a surrogate pair, or it "
            "is longer than its field allows",
            "send valid text of a reasonable length",
        )

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return error_response(500, "internal", "the server failed on this request", "see the server's log")
