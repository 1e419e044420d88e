"""datatable: no-code tables on PostgreSQL (spec §7) — the entry point.

``execute`` normalizes the request (request/dispatch.py, §3.5), picks the organisation's schema from ``org_id`` (a
blank one is a config error and nothing is created), takes the raw asyncpg connection under the platform's session
``runtime_context["db"]`` (never a connection of its own, §7.8.1) and runs one action (actions/table.py) inside the
session's transaction. It commits when the action returns and rolls back first whenever it fails (§7.8.2–3), so a
failed action leaves nothing behind and the session stays usable. Every failure is a §6.1 envelope whose
``error_type`` says whether changing the parameters helps; ``action_note`` reports every normalization.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import asyncpg

from .actions.call import Call, open_call
from .actions.table import ACTION_TABLE, ActionFunction
from .fields.errors import FieldError
from .request.dispatch import DispatchError, Request, normalize_request
from .rows.errors import RedoAction, classify
from .rows.filters import FilterError
from .sql.errors import SqlChannelError
from .store import schema as store_schema
from .store.owners import schema_of_session

log = logging.getLogger(__name__)

#: Each action's function, resolved once when the skill is loaded.
_FUNCTIONS: dict[str, ActionFunction] = {action.name: action.function for action in ACTION_TABLE}


async def execute(input_data: Any, runtime_context: Mapping[str, Any]) -> dict[str, Any]:
    """Run one datatable action for the platform and answer with its §6.1 envelope (see the module docstring)."""
    try:
        request = normalize_request(input_data)
    except DispatchError as exc:
        return exc.to_envelope()
    session = runtime_context.get("db")
    if session is None:
        return _failure(
            store_schema.StoreError(
                "no database session in runtime_context['db']: datatable runs in-process with the platform's "
                "session (run it through skillyard, not as a subprocess)",
                error_type="config",
                non_retriable=True,
            ),
            request,
            [],
        )
    try:
        schema = await schema_of_session(session, runtime_context.get("org_id"))
    except Exception as exc:
        known = _known(exc)
        if known is None:
            raise
        return _failure(known, request, [])
    call: Call | None = None
    careful = False
    while True:
        try:
            call = await open_call(session, schema, request, runtime_context, careful=careful)
            body = await _FUNCTIONS[request.action](call)
            await session.commit()
        except RedoAction:
            # the fast path cannot finish (a row-level error in a set-based write without its savepoint, or the
            # metadata remembered is gone): roll everything back and run the action once more the careful way
            await _rollback(session)
            if careful:  # cannot happen: the careful way never asks for a redo
                raise
            careful = True
            continue
        except Exception as exc:
            await _rollback(session)
            known = _known(exc)
            if known is None:
                raise  # a bug: the platform logs the traceback and answers with a failure envelope
            return _failure(known, request, call.notes if call else [])
        return _success(body, request, call.notes)


async def _rollback(session: Any) -> None:
    try:
        await session.rollback()
    except Exception:  # the connection may be gone; the session is closed by the platform either way
        log.warning("datatable: rollback failed", exc_info=True)


def _known(exc: Exception) -> Exception | None:
    """The exception as one the envelope can explain, or None for an unexpected one."""
    if isinstance(exc, store_schema.StoreError | SqlChannelError | DispatchError):
        return exc
    if isinstance(exc, FieldError | FilterError):
        return store_schema.StoreError(str(exc))
    if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError | OSError):
        return classify(exc)
    return None


def _note(request: Request, notes: list[str]) -> str | None:
    combined = [*request.notes, *notes]
    return "; ".join(combined) if combined else None


def _success(body: dict[str, Any], request: Request, notes: list[str]) -> dict[str, Any]:
    reply: dict[str, Any] = {"ok": True, "success": True, "action": request.action, **body}
    note = _note(request, notes)
    if note:
        reply["action_note"] = note
    return reply


def _failure(exc: Exception, request: Request, notes: list[str]) -> dict[str, Any]:
    if isinstance(exc, DispatchError):
        envelope = exc.to_envelope()
    else:
        message = exc.message if isinstance(exc, SqlChannelError) else str(exc)
        envelope = {
            "ok": False,
            "success": False,
            "action": request.action,
            "error": message,
            "error_type": getattr(exc, "error_type", "recoverable"),
        }
        if getattr(exc, "non_retriable", False):
            envelope["non_retriable"] = True
        need_param = getattr(exc, "need_param", None) or ("sql" if isinstance(exc, SqlChannelError) else None)
        if need_param:
            envelope["need_param"] = need_param
        if isinstance(exc, SqlChannelError):
            envelope["error_code"] = exc.code
        sqlstate = getattr(exc, "sqlstate", None)
        if sqlstate:
            envelope["sqlstate"] = sqlstate
    note = _note(request, notes)
    if note:
        envelope["action_note"] = note
    return envelope
