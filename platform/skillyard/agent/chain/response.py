"""Stage 6 (§13 ResponseContract, §6.1–§6.2): did the business succeed, and if not, which code and message.

* a failure envelope (``success``/``ok`` false without exception or timeout) is a business failure;
* ``success`` configured and the response empty → business failure;
* ``success`` not configured → success whenever the call layer did not fail;
* ``EQ`` compares numerically when both sides are numbers (``200`` equals ``"200"``), else as text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from ..codes import ErrorCode
from ..contract import SuccessOp, SuccessSpec, ToolContract
from ..paths import MISSING, get_path, has_value
from .invoke import failed
from .plan import plan

MESSAGE_LIMIT = 500
ENVELOPE_FLAGS = ("ok", "success")


def payload(envelope: Any) -> Any:
    """What the skill returned, without the envelope's ok/success flags (a bare result unwrapped)."""
    if not isinstance(envelope, Mapping):
        return envelope
    rest = {k: v for k, v in envelope.items() if k not in ENVELOPE_FLAGS}
    if set(rest) == {"result"}:
        return rest["result"]
    return rest


def is_empty_response(envelope: Any) -> bool:
    """No value in the payload (see :func:`payload`); a plain dict envelope is read in one pass without copying."""
    if type(envelope) is dict:
        others = 0  # keys other than the flags
        result: Any = MISSING  # the value of "result", when present
        filled = False  # some non-flag value has a value
        for key, value in envelope.items():
            if key in ENVELOPE_FLAGS:
                continue
            others += 1
            if key == "result":
                result = value
            if not filled and has_value(value):
                filled = True
        if others == 1 and result is not MISSING:  # a bare result: its own values decide
            data = result
        else:
            return not filled
    else:
        data = payload(envelope)
    if isinstance(data, Mapping):
        return not any(has_value(v) for v in data.values())
    return not has_value(data)


def _number(value: Any) -> Decimal | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float | str):
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            return None
        return number if number.is_finite() else None
    return None


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def equal(a: Any, b: Any) -> bool:
    """§6.1 EQ: numerically when both sides are numbers, else as text."""
    if type(a) is type(b) and (type(a) is int or (type(a) is str and a == b)):
        return bool(a == b)  # two ints compare exactly; equal texts are equal either way (no Decimal needed)
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        return x == y
    return _text(a) == _text(b)


def truthy(value: Any) -> bool:
    """§6.1 TRUTHY: not null/false/0/""/"0"/"false", not an empty container."""
    if value is None or value is False or value == "" or value == [] or value == {}:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
        return False
    return not (isinstance(value, str) and value.strip().lower() in ("0", "false"))


def holds(spec: SuccessSpec, response: Any, op: SuccessOp | None = None) -> bool:
    """``op``: ``spec.op`` as the plan already read it (an unset op read as TRUTHY)."""
    found, value = get_path(response, spec.path)
    if op is None:
        op = spec.op or SuccessOp.TRUTHY  # an unset op (preflight warns): a truthy value counts as success
    if op is SuccessOp.EQ:
        return found and equal(value, spec.value)
    if op is SuccessOp.EXISTS:
        return found
    if op is SuccessOp.TRUTHY:
        return found and truthy(value)
    if op is SuccessOp.NE:
        return not (found and equal(value, spec.value))
    options = spec.value if isinstance(spec.value, list) else [spec.value]
    inside = found and any(equal(value, option) for option in options)
    return inside if op is SuccessOp.IN else not inside


def business_ok(contract: ToolContract | None, envelope: Any) -> bool:
    if failed(envelope):
        return False
    return success_holds(contract, envelope)


def success_holds(contract: ToolContract | None, envelope: Any) -> bool:
    """:func:`business_ok` of an envelope already known not to be a failure envelope (``failed`` is False)."""
    if contract is None or contract.success is None:
        return True
    if is_empty_response(envelope):
        return False
    return holds(contract.success, envelope, plan(contract).success_op)


def business_error(contract: ToolContract | None, envelope: Any) -> tuple[str, str]:
    """(code, message) of a business failure (§6.2)."""
    spec = contract.error if contract is not None else None
    code: str = ErrorCode.TOOL_BUSINESS_FAILED.value
    message = None
    if spec is not None and spec.code:
        found, value = get_path(envelope, spec.code)
        if found and has_value(value):
            code = _text(value)
    if spec is not None and spec.message:
        found, value = get_path(envelope, spec.message)
        if found and has_value(value):
            message = _text(value)
    if message is None:
        message = _text(envelope)[:MESSAGE_LIMIT]
    return code, message
