"""The result envelope (§6.1), the vocabulary every layer speaks: normalize, failure, add_warning, redact, is_empty."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import enum
import math
import uuid
from collections.abc import Mapping
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

#: Failure fields the platform keeps as they are.
FAILURE_FIELDS = ("user_message", "need_param", "error_type", "non_retriable", "redirect", "action_note")
_FALSE_STRINGS = {"false", "no", "0"}


def is_failure(value: Any) -> bool:
    """``success``/``ok`` set to False (or a false-looking string) means failure; missing or None does not."""
    if value is None:
        return False
    if isinstance(value, str):
        return value.strip().lower() in _FALSE_STRINGS
    return not bool(value)


#: Deepest nesting of a result a skill may return: deeper than any input may be (MAX_NESTING), well within the
#: recursion limit of everything that walks a result after (this module, json, the run record, the agent runtime).
MAX_RESULT_NESTING = 128


class NestedTooDeep(ValueError):
    """A result nested deeper than :data:`MAX_RESULT_NESTING` (a dropped-in skill's output, say)."""


def jsonable(value: Any, depth: int = 0) -> Any:
    """Turn what a skill returned into plain JSON values (dates as ISO text, bytes as base64, sets as lists);
    NestedTooDeep past :data:`MAX_RESULT_NESTING` levels of objects and arrays."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (Mapping, list, tuple, set, frozenset)) and depth >= MAX_RESULT_NESTING:
        raise NestedTooDeep(f"is nested more than {MAX_RESULT_NESTING} levels deep")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, depth + 1) for v in value]
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID, PurePath)):
        return str(value)
    if isinstance(value, enum.Enum):
        return jsonable(value.value, depth)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value), depth)
    return repr(value)


if TYPE_CHECKING:
    from .credentials import Masker


def failure(skill: str, error: str, **fields: Any) -> dict[str, Any]:
    """A failure envelope made by the platform itself."""
    return {"ok": False, "success": False, "error": error, "skill": skill, **fields}


def input_rejected(skill: str, error: str, field: str) -> dict[str, Any]:
    """The platform refused the input before the skill ran (a schema, a required field, the subcommand, a path, an
    HTTP URL field): ``need_param`` names the field, and ``invalid_input`` tells this apart from a skill's own
    recoverable failure, which carries ``need_param`` too (the agent runtime classifies the two differently)."""
    return failure(skill, error, need_param=field, error_type="recoverable", invalid_input=True)


def normalize(raw: Any, skill: str) -> dict[str, Any]:
    """Normalize a raw result: a dict with ``ok``/``success`` booleans and, on failure, a specific ``error``."""
    if not isinstance(raw, Mapping):
        raw = {"result": raw}
    try:
        env: dict[str, Any] = jsonable(raw)
    except NestedTooDeep as exc:
        return failure(skill, f"skill {skill!r} returned a result that {exc}; return flatter data")
    failed = is_failure(env.get("success")) or is_failure(env.get("ok"))
    env["ok"] = env["success"] = not failed
    if failed:
        env["skill"] = env.get("skill") or skill
        error = env.get("error")
        if isinstance(error, int | float) and not isinstance(error, bool):
            env["error"] = error = str(error)
        if not _has_reason(error):
            detail = env.get("user_message") or env.get("message")
            keys = ", ".join(sorted(k for k in env if k not in ("ok", "success", "skill"))) or "no other fields"
            env["error"] = f"skill {skill!r} reported failure without an error message" + (
                f": {detail}" if isinstance(detail, str) and detail.strip() else f" (it returned {keys})"
            )
    return env


def _has_reason(error: Any) -> bool:
    """Whether a failure's ``error`` says something: a non-blank text, or a non-empty structure such as ``{"code":
    …, "message": …}``, which is kept as the skill gave it (an agent contract may read ``error.code``, §6.2)."""
    if isinstance(error, str):
        return bool(error.strip())
    return isinstance(error, dict | list) and bool(error)


def exception_family(cls: type[BaseException]) -> str:
    """The name of the nearest built-in exception class ``cls`` derives from (``URLError`` → ``OSError``, a skill's
    ``class DiskFull(OSError)`` → ``OSError``), so callers can classify exceptions they cannot import."""
    return next(c.__name__ for c in cls.__mro__ if c.__module__ == "builtins")


def from_exception(exc: BaseException, skill: str) -> dict[str, Any]:
    """An exception raised inside a skill, as a failure envelope (the traceback goes to the log only)."""
    message = str(exc).strip() or exc.__class__.__name__
    return failure(
        skill,
        f"skill {skill!r} raised {exc.__class__.__name__}: {message}",
        exception_type=exc.__class__.__name__,
        exception_family=exception_family(exc.__class__),
        error_type="transient" if isinstance(exc, OSError) else "recoverable",
    )


def timed_out(skill: str, seconds: float) -> dict[str, Any]:
    """A run stopped by its wall clock."""
    return failure(
        skill,
        f"skill {skill!r} did not finish within its wall clock of {seconds:g} s and was stopped",
        timed_out=True,
        error_type="transient",
    )


def blocked(skill: str, seconds: float, elapsed: float | None, sync: bool) -> dict[str, Any]:
    """An in-process run past its wall clock that Python could not stop: an async handler that blocked the event
    loop (every other run waited with it), or a sync handler whose worker thread runs on."""
    if sync:
        what = (
            f"skill {skill!r} did not finish within its wall clock of {seconds:g} s; its sync handler runs in a "
            "thread Python cannot stop, so it may still be running"
        )
    else:
        what = (
            f"skill {skill!r} blocked the event loop for {elapsed or seconds:.1f} s, past its wall clock of "
            f"{seconds:g} s: its async handler called blocking code (time.sleep, blocking I/O), and every other run "
            "waited meanwhile"
        )
    return failure(
        skill,
        f"{what}; blocking work belongs in a subprocess skill (a Python CLI handler), or await it (asyncio.to_thread)",
        timed_out=True,
        blocked=True,
        error_type="transient",
    )


def redact(envelope: dict[str, Any], masker: Masker | None) -> dict[str, Any]:
    """The envelope with the run's credentials masked in every field, nested (credentials.Masker); as it is when
    the run has none."""
    return envelope if masker is None else masker.value(envelope)


def add_warning(envelope: dict[str, Any], message: str) -> None:
    """Add a line to ``envelope["warnings"]`` (a list; an earlier single warning is kept), once."""
    warnings = envelope.get("warnings")
    if isinstance(warnings, list):
        if message not in warnings:  # a second run that fails the same way says it once
            warnings.append(message)
    else:
        envelope["warnings"] = [message] if warnings in (None, "") else [warnings, message]


def is_empty(value: Any) -> bool:
    """Missing for ``required``: None, "", whitespace, [] and {}; 0 and false are values."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    return isinstance(value, (list, dict)) and not value


#: Deepest nesting of objects and arrays an input, a schema or a contract may have: far more than real data needs,
#: far less than the recursion limit of the readers that walk them (jsonschema, copy, json).
MAX_NESTING = 64


def nesting_problem(value: Any, limit: int = MAX_NESTING) -> str | None:
    """The problem with a JSON-like value from outside: objects and arrays nested deeper than ``limit``, or text
    that is no Unicode (half of a surrogate pair, which nothing downstream can encode); measured without
    recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return f"it is nested more than {limit} levels deep; flatten it"
        if isinstance(node, dict):
            for key, child in node.items():
                if isinstance(key, str) and not _is_text(key):
                    return f"the key {key!r} is not valid Unicode (half of a surrogate pair); send valid text"
                if isinstance(child, (dict, list)):
                    stack.append((child, depth + 1))
                elif isinstance(child, str) and not _is_text(child):
                    return f"{child[:40]!r} is not valid Unicode (half of a surrogate pair); send valid text"
        elif isinstance(node, list):
            for child in node:
                if isinstance(child, (dict, list)):
                    stack.append((child, depth + 1))
                elif isinstance(child, str) and not _is_text(child):
                    return f"{child[:40]!r} is not valid Unicode (half of a surrogate pair); send valid text"
    return None


def _is_text(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
