"""What the chain derives from a tool contract once, not on every call (§13 hot path).

A :class:`ToolContract` is frozen, but it holds dicts, so it cannot be hashed: plans are cached by the contract's
identity, and the cache keeps the contract alive, so an id is never reused while its plan is cached. Every stage
still runs its full check; a plan only saves re-deriving the same facts from the same contract.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..contract import ArgContract, Extract, SourceType, SuccessOp, ToolContract

MODEL = SourceType.MODEL.value  # "MODEL" (an enum's .value is a slow descriptor on Python 3.11)
_MAX_PLANS = 4096


@dataclass(frozen=True, slots=True)
class ArgPlan:
    """One ``args`` entry with the facts the stages ask about it."""

    arg: ArgContract
    template: bool  # "[]" in the path: filled item by item
    model_allowed: bool  # MODEL in sources
    user_allowed: bool  # USER in sources
    #: provenance() of a value binding did not set is MODEL without looking anything up: the arg is bound by
    #: from/const, or it lists no source, or its first source is MODEL (the first matching source wins, MODEL
    #: always matches).
    model_only: bool


@dataclass(frozen=True, slots=True)
class ToolPlan:
    exempt: frozenset[str]  # top-level argument names bound by from/const (exempt from the required check)
    args: tuple[ArgPlan, ...]  # every args entry, in contract order
    binds: tuple[ArgContract, ...]  # the entries with from/const (binding does nothing for the others)
    success_op: SuccessOp | None  # success.op, an unset op read as TRUTHY; None without a success spec
    extracts: tuple[tuple[str, Extract], ...]  # (key or path, extract)


def _arg_plan(arg: ArgContract) -> ArgPlan:
    bindable = arg.from_expr is not None or arg.has_const
    return ArgPlan(
        arg=arg,
        template="[]" in arg.path,
        model_allowed=SourceType.MODEL in arg.sources,
        user_allowed=SourceType.USER in arg.sources,
        model_only=bindable or not arg.sources or arg.sources[0] is SourceType.MODEL,
    )


def _build(contract: ToolContract) -> ToolPlan:
    args = tuple(contract.args.values())
    return ToolPlan(
        exempt=frozenset(
            arg.path.split(".")[0].replace("[]", "") for arg in args if arg.from_expr is not None or arg.has_const
        ),
        args=tuple(_arg_plan(arg) for arg in args),
        binds=tuple(arg for arg in args if arg.from_expr is not None or arg.has_const),
        success_op=None if contract.success is None else (contract.success.op or SuccessOp.TRUTHY),
        extracts=tuple((extract.key or extract.path, extract) for extract in contract.extracts),
    )


_PLANS: dict[int, tuple[ToolContract, ToolPlan]] = {}


def plan(contract: ToolContract) -> ToolPlan:
    """The plan of ``contract``, built on first use."""
    entry = _PLANS.get(id(contract))
    if entry is not None and entry[0] is contract:
        return entry[1]
    built = _build(contract)
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[id(contract)] = (contract, built)
    return built
