"""What travels through the tool-call chain (§13): one :class:`ChainCall` per business-tool call."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from ..codes import ErrorCode
from ..state import Observation
from .plan import ToolPlan, plan

if TYPE_CHECKING:
    from ...catalog.skill import Skill
    from ..context import NodeContext
    from ..contract import ToolContract


_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def canonical(value: Any) -> str:
    """Stable JSON text of a value (sorted keys, no spaces): what fingerprints and idempotency keys hash.

    The same text as ``json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)``,
    through one encoder built once; a self-referencing value is reported as the circular reference it is.
    """
    return _CANONICAL.encode(value)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """A deep copy of plain JSON values (str-keyed dicts, lists, exact scalars); anything else raises TypeError.
    Scalar items are taken as they are, without a call each."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(key)
            out[key] = item if type(item) in _SCALARS else _plain(item)
        return out
    if kind is list:
        return [item if type(item) in _SCALARS else _plain(item) for item in value]
    raise TypeError(kind)


def json_copy(value: Any) -> Any:
    """``json.loads(json.dumps(value, default=str))``: a private deep copy as plain JSON values.

    Plain JSON values (the usual case) are copied directly, which is several times faster; anything else (tuples,
    non-str keys, dates, subclasses) or a self-referencing value goes through the JSON round trip itself.
    """
    try:
        return _plain(value)
    except (TypeError, RecursionError):
        return json.loads(json.dumps(value, default=str))


class ChainCall:
    """One business-tool call on its way through the stages; each stage reads and fills it.

    A plain class with slots and its own ``__init__``: built once per call, it costs half of what the same
    dataclass (default factories, ``__post_init__``) did.
    """

    __slots__ = (
        "approved",
        "args",
        "bound",
        "call_id",
        "canonical_args",
        "catalog_skill",
        "contract",
        "ctx",
        "fingerprint",
        "idempotency_key",
        "plan",
        "raw_arguments",
        "sources",
        "tool",
    )

    def __init__(
        self,
        ctx: NodeContext,
        tool: str,
        raw_arguments: Any,
        call_id: str | None = None,
        approved: bool = False,
        contract: ToolContract | None = None,
        args: dict[str, Any] | None = None,
    ) -> None:
        self.ctx = ctx
        self.tool = tool
        self.raw_arguments: Any = raw_arguments  # as the model sent them (dict or text)
        self.call_id = call_id
        self.approved = approved  # the CONFIRM path of §14.1 step 3: no approval, no fingerprint check
        self.contract = contract  # None: a tool without a contract (read-only, no checks, §1.3)
        self.plan: ToolPlan = plan(contract)  # what the stages read from the contract, derived once per contract
        self.catalog_skill: Skill | None = None
        self.args: dict[str, Any] = {} if args is None else args  # after arg policy: the object; then bound
        self.sources: dict[str, str] = {}  # arg path (or "lines.0.code") → source type
        self.bound: set[str] = set()  # contract arg paths whose from/const took effect
        self.fingerprint = ""
        self.canonical_args: str | None = None  # canonical(args) as the fingerprint hashed them (write gate reuses)
        self.idempotency_key: str | None = None

    @property
    def label(self) -> str:
        return (self.contract.label if self.contract else None) or self.tool

    def observation(
        self,
        ok: bool,
        content: Any,
        *,
        code: str | None = None,
        next_step: str | None = None,
        evidence_id: str | None = None,
    ) -> Observation:
        # positional, in field order: a class called with keywords costs twice as much, on every call of the chain
        return Observation(
            self.tool, self.raw_arguments, ok, content, code, next_step, dict(self.sources), evidence_id, self.call_id
        )

    def refuse(
        self, code: ErrorCode | str, message: str, next_step: str, *, evidence_id: str | None = None
    ) -> Observation:
        """A refusal the model reads: the full ``agent_runtime.NNNNN`` code (or a business code) and the next step."""
        return self.observation(False, message, code=str(code), next_step=next_step, evidence_id=evidence_id)
