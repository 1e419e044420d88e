"""The skill contract (contract spec §2–§9) as frozen values. ``contract_parse`` builds them and checks §16.

Enum values are the spec's case-sensitive strings. JSON-valued attributes that may legitimately be ``null``
(``args.*.const``, ``outputs.*.constant``) use the ``UNSET`` sentinel for "not configured".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any, Final

from .expressions import Expression


class _Unset(Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


#: "Not configured", distinct from a JSON ``null`` constant.
UNSET: Final = _Unset.UNSET


class ResultView(StrEnum):
    """Which view of an MCP tool's result a tool contract's paths read (``resultView``; MCP tools only)."""

    TEXT = "TEXT"  # the JSON parsed from the text blocks: what contracts written for JSON-text tools read
    STRUCTURED = "STRUCTURED"  # the tool's structuredContent


class Mode(StrEnum):
    """§3 ``mode``."""

    REACT = "REACT"
    PLAN = "PLAN"


class SideEffect(StrEnum):
    """§4 ``sideEffect``."""

    NONE = "NONE"
    WRITE = "WRITE"


class When(StrEnum):
    """§5.4 ``args.*.when``: when a ``from`` binding applies."""

    ALWAYS = "ALWAYS"
    UNIQUE = "UNIQUE"


class SourceType(StrEnum):
    """§5.3 / §8 ``sources``: where a value may come from."""

    USER = "USER"
    EVIDENCE = "EVIDENCE"
    NODE_OUTPUT = "NODE_OUTPUT"
    SHARED = "SHARED"
    SESSION = "SESSION"
    PRIOR_TASK = "PRIOR_TASK"
    MODEL = "MODEL"
    CONTRACT = "CONTRACT"
    PLATFORM = "PLATFORM"
    EVENT = "EVENT"  # the payload of an external event a node waited for (builtin_node_wait_event)


class MissingAction(StrEnum):
    """§5.5 ``args.*.missing.action``."""

    ASK_USER = "ASK_USER"
    CALL_TOOL = "CALL_TOOL"
    FAIL = "FAIL"


class SuccessOp(StrEnum):
    """§6.1 ``success.op``."""

    EQ = "EQ"
    NE = "NE"
    IN = "IN"
    NOT_IN = "NOT_IN"
    TRUTHY = "TRUTHY"
    EXISTS = "EXISTS"


class OutputType(StrEnum):
    """§8 ``outputs.*.type``."""

    VALUE = "VALUE"
    LIST = "LIST"


class ShareScope(StrEnum):
    """§8 ``outputs.*.share``: ``TASK`` → ``shared.<key>``, ``SESSION`` → ``session.<key>``."""

    TASK = "TASK"
    SESSION = "SESSION"


@dataclass(frozen=True)
class MissingSpec:
    """§5.5: what a required argument without a value does."""

    action: MissingAction = MissingAction.ASK_USER
    tool: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class ArgContract:
    """§5: the contract of one argument path (``title``, ``orderInfo.taxNo``, ``lines[].goodsCode``)."""

    path: str
    from_expr: Expression | None = None
    #: A JSON constant; ``UNSET`` when not configured (``None`` is the JSON ``null`` constant).
    const: Any = UNSET
    when: When = When.ALWAYS
    sources: tuple[SourceType, ...] = ()
    required: bool = True
    enum: tuple[Any, ...] = ()
    missing: MissingSpec = field(default_factory=MissingSpec)
    sensitive: bool = False
    label: str | None = None

    @property
    def has_const(self) -> bool:
        return self.const is not UNSET

    @property
    def leaf(self) -> str:
        """The last segment of the path, without ``[]`` (``lines[].goodsCode`` → ``goodsCode``)."""
        return self.path.rsplit(".", 1)[-1].replace("[]", "")


@dataclass(frozen=True)
class SuccessSpec:
    """§6.1: the business-success condition on the response JSON. ``op`` may be unset (preflight reports it)."""

    path: str | None = None
    op: SuccessOp | None = None
    value: Any = None


@dataclass(frozen=True)
class ErrorSpec:
    """§6.2: where the business error code and message sit in the response."""

    code: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class EntitySpec:
    """§6.3 / §8: how a value becomes an entity (``id``/``name`` are field names; ``scalar`` names a bare value)."""

    type: str
    id: str = "id"
    name: str = "name"
    scalar: str | None = None


@dataclass(frozen=True)
class Extract:
    """§6.3: one semantic extract of a tool result."""

    path: str
    key: str | None = None
    fields: tuple[str, ...] = ()
    entity: EntitySpec | None = None


@dataclass(frozen=True)
class VerifyArg:
    """§6.4: one argument of the verify call: a constant or ``call.<path>`` of the original write request."""

    const: Any = UNSET
    from_expr: Expression | None = None


@dataclass(frozen=True)
class VerifySpec:
    """§6.4: how an uncertain write is checked with a read-only tool. Empty ``args``: pass the original request."""

    tool: str
    args: dict[str, VerifyArg] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolContract:
    """§4: the contract of one business tool (the key equals the tool name in ``toolNames``)."""

    name: str
    label: str | None = None
    side_effect: SideEffect = SideEffect.NONE
    #: Default: ``True`` for WRITE tools, ``False`` otherwise.
    confirm: bool = False
    idempotency_key: tuple[str, ...] = ()
    args: dict[str, ArgContract] = field(default_factory=dict)
    success: SuccessSpec | None = None
    error: ErrorSpec | None = None
    extracts: tuple[Extract, ...] = ()
    verify: VerifySpec | None = None
    #: ``callOnly: true`` (orchestration P0): a read tool that is callable with no business contract, on purpose.
    call_only: bool = False
    #: ``resultView``: the root that success / error / extracts paths read in an MCP tool's result.
    result_view: ResultView = ResultView.TEXT

    @property
    def is_write(self) -> bool:
        return self.side_effect is SideEffect.WRITE


@dataclass(frozen=True)
class InputSpec:
    """§7: one node input. ``from_expr`` stays text: unknown prefixes fall back to the upstream output of that name."""

    name: str
    from_expr: str | None = None
    required: bool = True
    provider: str | None = None


@dataclass(frozen=True)
class OutputSpec:
    """§8: one node output the model may write with ``builtin_output_set``."""

    key: str
    type: OutputType = OutputType.VALUE
    fields: tuple[str, ...] = ()
    min_items: int = 1
    hint: str | None = None
    required: bool = True
    share: ShareScope | None = None
    entity: EntitySpec | None = None
    sources: tuple[SourceType, ...] = ()
    #: A JSON constant for ``CONTRACT``-sourced values; ``UNSET`` when not configured.
    constant: Any = UNSET
    sensitive: bool = False


@dataclass(frozen=True)
class EventSpec:
    """``events.<NAME>``: an external event a node may wait for; its payload's ``extracts`` (§6.3 shape) are what
    ``evidence.<key>`` expressions and the ``EVENT`` source read."""

    name: str
    label: str | None = None
    extracts: tuple[Extract, ...] = ()


@dataclass(frozen=True)
class Contract:
    """§2–§3: a whole skill contract."""

    mode: Mode = Mode.REACT
    delegatable: bool = False
    target: str | None = None
    inputs: dict[str, InputSpec] = field(default_factory=dict)
    outputs: dict[str, OutputSpec] = field(default_factory=dict)
    tools: dict[str, ToolContract] = field(default_factory=dict)
    #: ``events``: the external events this skill's nodes wait for (optional; undeclared events carry no extracts).
    events: dict[str, EventSpec] = field(default_factory=dict)

    @property
    def write_tools(self) -> tuple[str, ...]:
        return tuple(name for name, tool in self.tools.items() if tool.is_write)
