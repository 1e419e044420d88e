"""Stage 6 (§13 ResponseContract, §6.1–§6.2): did the business succeed, and if not, which code and message.

* a failure envelope (``success``/``ok`` false without exception or timeout) is a business failure;
* ``success`` configured and the response empty → business failure;
* ``success`` not configured → success whenever the call layer did not fail;
* ``EQ`` compares numerically when both sides are numbers (``200`` equals ``"200"``), else as text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from ..codes import ErrorCode
from ..contract import SuccessOp, SuccessSpec, ToolContract
from ..paths import get_path, has_value
from .invoke import failed

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
    """No value in the payload (see :func:`payload`).

    A plain dict envelope with a value under a key other than the flags and ``result`` is not empty, found without
    building the payload: that key makes the payload the envelope's other keys (not a bare result), value included.
    """
    if type(envelope) is dict:
        for key, value in envelope.items():
            if key not in ENVELOPE_FLAGS and key != "result" and has_value(value):
                return False
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


def _eq(found: bool, value: Any, expected: Any) -> bool:
    return found and equal(value, expected)


def _ne(found: bool, value: Any, expected: Any) -> bool:
    return not (found and equal(value, expected))


def _among(found: bool, value: Any, expected: Any) -> bool:
    options = expected if isinstance(expected, list) else [expected]
    return found and any(equal(value, option) for option in options)


def _not_among(found: bool, value: Any, expected: Any) -> bool:
    return not _among(found, value, expected)


def _truthy(found: bool, value: Any, expected: Any) -> bool:
    return found and truthy(value)


def _exists(found: bool, value: Any, expected: Any) -> bool:
    return found


#: §6.1 per op: whether the value at the success path (``found`` or not) meets the expected value.
OP_TESTS: dict[SuccessOp, Callable[[bool, Any, Any], bool]] = {
    SuccessOp.EQ: _eq,
    SuccessOp.NE: _ne,
    SuccessOp.IN: _among,
    SuccessOp.NOT_IN: _not_among,
    SuccessOp.TRUTHY: _truthy,
    SuccessOp.EXISTS: _exists,
}

SuccessCheck = Callable[[Any], bool]


def success_check(spec: SuccessSpec) -> SuccessCheck:
    """The §6.1 condition of ``spec`` as one function of the response, its op looked up once (the plan keeps it).
    An unset op (preflight warns) reads as TRUTHY: a truthy value counts as success."""
    test = OP_TESTS[spec.op or SuccessOp.TRUTHY]
    path, expected = spec.path, spec.value

    def check(response: Any) -> bool:
        found, value = get_path(response, path)
        return test(found, value, expected)

    return check


def business_ok(success: SuccessCheck | None, envelope: Any) -> bool:
    """``success``: the plan's check of the tool's success spec (None: no spec)."""
    if failed(envelope):
        return False
    return success_holds(success, envelope)


def success_holds(success: SuccessCheck | None, envelope: Any) -> bool:
    """:func:`business_ok` of an envelope already known not to be a failure envelope (``failed`` is False)."""
    if success is None:
        return True
    if is_empty_response(envelope):
        return False
    return success(envelope)


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
