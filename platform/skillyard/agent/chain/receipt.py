"""Reading a declared receipt and its structured error (doc-runtime-contracts "写操作状态", "错误").

Only a result that declares the receipt is read here: ``contractVersion: "doc.operation.v1"`` in the result, or a
tool contract with ``"receipt"``. Every other result keeps the judgment of §6.1 (plenty of APIs return an
unrelated ``status``). :func:`read` turns a receipt into a :class:`Reading`: one of the five statuses and the facts
the chain stores with the evidence. It never reads invented fields (``suggestedAction``, ``nextCommand``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..contract import ReceiptKind
from ..paths import has_value
from .plan import ToolPlan

if TYPE_CHECKING:
    from .base import ChainCall

V1 = ReceiptKind.OPERATION.value  # "doc.operation.v1"

SUCCESS, PARTIAL, UNKNOWN, RETRYABLE, FAILED = "success", "partial_success", "unknown", "retryable", "failed"
STATUSES = frozenset({SUCCESS, PARTIAL, UNKNOWN, RETRYABLE, FAILED})
#: ``error.kind`` values of a structured error; any other ``kind`` is not a structured error.
ERROR_KINDS = frozenset(
    {
        "validation",
        "not_found",
        "ambiguous",
        "type_mismatch",
        "revision_conflict",
        "confirmation_required",
        "permission_denied",
        "partial_success",
        "commit_unknown",
    }
)
#: The kinds that say the action certainly did not happen (permission, auth and argument errors fail at once).
FAILING_KINDS = ERROR_KINDS - {"partial_success", "commit_unknown"}
#: The fields a successful ``+import`` receipt must all carry.
IMPORT_FIELDS = ("taskId", "documentUrl", "documentName", "documentType")
MAX_RETRY_DELAY = 60.0


@dataclass(slots=True)
class Reading:
    """What a declared receipt says: ``status`` is one of :data:`STATUSES` (for writes ``retryable`` only when the
    service said the execution had not started), the rest are the facts that come with it."""

    kind: ReceiptKind
    status: str
    error_kind: str | None = None
    stage: str | None = None
    retryable: bool | None = None
    execution_started: bool | None = None
    retry_after: float = 0.0
    actions: Any = None
    steps: Any = None
    compensation: Any = None
    details: Mapping[str, Any] | None = None
    why: str = ""  # why a write that reported success is not counted as one


def declared(plan: ToolPlan, root: Any) -> ReceiptKind | None:
    """The receipt a result is read as: the contract's ``receipt``, else a result's ``contractVersion``."""
    doc = plan.doc
    if doc is not None and doc.receipt is not None:
        return doc.receipt
    if type(root) is dict and root.get("contractVersion") == V1:
        return ReceiptKind.OPERATION
    return None


def announced(call: ChainCall, envelope: Any) -> bool:
    """A result that declares the receipt itself (``contractVersion``) although its contract does not: at the
    envelope's top level, or in an MCP tool's view (one dict lookup for any other result)."""
    if type(envelope) is not dict:
        return False
    if envelope.get("contractVersion") == V1:
        return True
    skill = call.catalog_skill
    if skill is None or skill.exec.type != "MCP":
        return False
    view = envelope.get("structured" if call.plan.structured else "data")
    return type(view) is dict and view.get("contractVersion") == V1


def structured_error(root: Any) -> Mapping[str, Any] | None:
    """The result's ``error`` when it is a structured error (an object whose ``kind`` is one of ERROR_KINDS)."""
    error = root.get("error") if isinstance(root, Mapping) else None
    if isinstance(error, Mapping) and error.get("kind") in ERROR_KINDS:
        return error
    return None


def flag(root: Mapping[str, Any], error: Mapping[str, Any] | None, key: str) -> bool | None:
    """A boolean the receipt gives at its top level, else in its error (anything but a boolean: not given)."""
    for node in (root, error or {}):
        value = node.get(key)
        if isinstance(value, bool):
            return value
    return None


def retry_delay(root: Mapping[str, Any], error: Mapping[str, Any] | None) -> float:
    """``retry_after_seconds`` (top level, else the error's), capped at :data:`MAX_RETRY_DELAY`; 0 when absent."""
    for node in (root, error or {}):
        value = node.get("retry_after_seconds")
        if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
            return min(float(value), MAX_RETRY_DELAY)
    return 0.0


def execution_started(envelope: Any) -> bool | None:
    """``execution_started`` of a failed call's envelope or its error (None: not said)."""
    if not isinstance(envelope, Mapping):
        return None
    error = envelope.get("error")
    return flag(envelope, error if isinstance(error, Mapping) else None, "execution_started")


def _verified(root: Mapping[str, Any]) -> bool:
    """``verification`` (only when the operation returns one) holds no read-back that failed to match."""
    checks = root.get("verification")
    if checks is None:
        return True
    items = checks if isinstance(checks, list) else [checks]
    for item in items:
        if isinstance(item, Mapping):
            for key in ("matched", "ok", "verified"):
                if item.get(key) is False:
                    return False
        elif item is False:
            return False
    return True


def _not_started(write: bool, reading: Reading) -> str:
    """The status of a write the service says did not start: retryable when replay is allowed, else failed."""
    if reading.retryable is False:
        return FAILED
    return RETRYABLE if write else FAILED


def _from_error(write: bool, failed: bool, reading: Reading, error: Mapping[str, Any] | None) -> str:
    """The status of a receipt without a recognized ``status``: from its structured error, else its flags."""
    kind = reading.error_kind
    if kind == "partial_success" or (reading.details or {}).get("status") == PARTIAL:  # a typed paging error too
        return PARTIAL
    if kind == "commit_unknown":
        if reading.execution_started is False:
            return _not_started(write, reading)
        return UNKNOWN if write else FAILED
    if kind is not None or failed:
        return FAILED
    return UNKNOWN if write else SUCCESS  # a write's receipt that names no status proves nothing


def _operation(write: bool, failed: bool, root: Mapping[str, Any], reading: Reading) -> str:
    status = root.get("status")
    error = structured_error(root)
    if status == SUCCESS:
        if not write:
            return SUCCESS  # a read's complete=false is a listing's page, not a failure (paging reads it)
        if failed or root.get("ok") is False:
            reading.why = "its ok flag is false"
        elif root.get("complete") is False:
            reading.why = "it says complete: false"
        elif not _verified(root):
            reading.why = "a read-back in its verification did not match"
        return UNKNOWN if reading.why else SUCCESS
    if status == PARTIAL:
        return PARTIAL
    if status == UNKNOWN:
        return UNKNOWN if write else FAILED
    if status == RETRYABLE:
        if reading.execution_started is False:
            return _not_started(write, reading)
        return UNKNOWN if write else FAILED  # only an explicit execution_started=false makes a write retryable
    if status == FAILED:
        return PARTIAL if (reading.details or {}).get("status") == PARTIAL else FAILED
    if write and has_value(status) and reading.error_kind is None:
        return UNKNOWN  # a status word the contract does not define proves nothing either way
    return _from_error(write, failed, reading, error)


def _import(write: bool, failed: bool, root: Mapping[str, Any], reading: Reading) -> str:
    if root.get("success") is True and not failed:
        missing = [name for name in IMPORT_FIELDS if not has_value(root.get(name))]
        if not missing:
            return SUCCESS
        reading.why = f"the import receipt lacks {', '.join(missing)}"
        return UNKNOWN if write else FAILED
    return _from_error(write, True, reading, structured_error(root))


def read(kind: ReceiptKind, root: Any, *, write: bool, failed: bool) -> Reading:
    """The status of a declared receipt (``failed``: the envelope's ok/success flag said failure)."""
    node: Mapping[str, Any] = root if isinstance(root, Mapping) else {}
    error = structured_error(node)
    reading = Reading(kind, FAILED)
    if error is not None:
        reading.error_kind = str(error["kind"])
        stage = error.get("stage")
        reading.stage = stage if isinstance(stage, str) else None
        reading.actions = error.get("actions")
        details = error.get("details")
        reading.details = details if isinstance(details, Mapping) else None
    reading.retryable = flag(node, error, "retryable")
    reading.execution_started = flag(node, error, "execution_started")
    reading.retry_after = retry_delay(node, error)
    reading.steps = node.get("steps") if "steps" in node else (reading.details or {}).get("steps")
    reading.compensation = (
        node.get("compensation") if "compensation" in node else (reading.details or {}).get("compensation")
    )
    if kind is ReceiptKind.IMPORT:
        reading.status = _import(write, failed, node, reading)
    else:
        reading.status = _operation(write, failed, node, reading)
    return reading


def message(reading: Reading, root: Any) -> str:
    """The receipt's own words for the model: its error message (or the error), kind, stage and actions."""
    parts = []
    error = structured_error(root)
    if error is not None:
        text = error.get("message")
        parts.append(str(text) if has_value(text) else f"error kind {reading.error_kind}")
        parts.append(f"kind {reading.error_kind}" + (f", stage {reading.stage}" if reading.stage else ""))
    elif isinstance(root, Mapping) and isinstance(root.get("error"), str):
        parts.append(root["error"])
    if has_value(reading.actions):
        parts.append(f"actions the service offers: {short(reading.actions)}")
    return "; ".join(parts)


def short(value: Any, limit: int = 300) -> str:
    """A value as one short text for a message."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
