"""What the chain derives from a tool contract once, not on every call (§13 hot path).

A :class:`ToolContract` is frozen, but it holds dicts, so it cannot be hashed: plans are cached by the contract's
identity, and the cache keeps the contract alive, so an id is never reused while its plan is cached. Every stage
still runs its full check; a plan only saves re-deriving the same facts from the same contract.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..contract import (
    ArgContract,
    AsyncTaskSpec,
    ExportSpec,
    Extract,
    PagingSpec,
    ReceiptKind,
    ResultView,
    SourceType,
    ToolContract,
)
from .response import SuccessCheck, success_check

MODEL = SourceType.MODEL.value  # "MODEL" (an enum's .value is a slow descriptor on Python 3.11)
_MAX_PLANS = 4096


@dataclass(frozen=True, slots=True)
class ArgPlan:
    """One ``args`` entry with the facts the stages ask about it."""

    arg: ArgContract
    const: bool  # has a const (arg.has_const)
    template: bool  # "[]" in the path: filled item by item
    model_allowed: bool  # MODEL in sources
    user_allowed: bool  # USER in sources
    #: provenance() of a value binding did not set is MODEL without looking anything up: the arg is bound by
    #: from/const, or it lists no source, or its first source is MODEL (the first matching source wins, MODEL
    #: always matches).
    model_only: bool


@dataclass(frozen=True, slots=True)
class DocPlan:
    """The doc-runtime-contracts keys of one tool contract (docs/agents.md "Write statuses and receipts"); a tool
    without any of them has none, so its calls never look at them."""

    receipt: ReceiptKind | None
    async_task: AsyncTaskSpec | None
    done_when: SuccessCheck | None  # async_task.done_when as one check
    failed_when: SuccessCheck | None
    target_arg: str | None
    paging: PagingSpec | None
    export: ExportSpec | None


@dataclass(frozen=True, slots=True)
class ToolPlan:
    #: sideEffect WRITE (read on every call: the contract's property compares an enum member, slow on 3.11)
    write: bool
    exempt: frozenset[str]  # top-level argument names bound by from/const (exempt from the required check)
    args: tuple[ArgPlan, ...]  # every args entry, in contract order
    binds: tuple[ArgContract, ...]  # the entries with from/const (binding does nothing for the others)
    success: SuccessCheck | None  # the success spec as one check, its op looked up; None without a success spec
    extracts: tuple[tuple[str, Extract], ...]  # (key or path, extract)
    structured: bool = False  # resultView STRUCTURED: an MCP result's paths read structuredContent, not the text's JSON
    doc: DocPlan | None = None  # the doc-runtime keys (receipt, asyncTask, targetArg, paging, export), if any


#: The plan of a tool without a contract (§1.3): a read with nothing to check, bind or extract.
NO_CONTRACT = ToolPlan(write=False, exempt=frozenset(), args=(), binds=(), success=None, extracts=())


def _arg_plan(arg: ArgContract) -> ArgPlan:
    bindable = arg.from_expr is not None or arg.has_const
    return ArgPlan(
        arg=arg,
        const=arg.has_const,
        template="[]" in arg.path,
        model_allowed=SourceType.MODEL in arg.sources,
        user_allowed=SourceType.USER in arg.sources,
        model_only=bindable or not arg.sources or arg.sources[0] is SourceType.MODEL,
    )


def _doc_plan(contract: ToolContract) -> DocPlan | None:
    task = contract.async_task
    keys = (contract.receipt, task, contract.target_arg, contract.paging, contract.export)
    if all(key is None for key in keys):
        return None
    return DocPlan(
        receipt=contract.receipt,
        async_task=task,
        done_when=None if task is None else success_check(task.done_when),
        failed_when=None if task is None or task.failed_when is None else success_check(task.failed_when),
        target_arg=contract.target_arg,
        paging=contract.paging,
        export=contract.export,
    )


def _build(contract: ToolContract) -> ToolPlan:
    args = tuple(contract.args.values())
    return ToolPlan(
        write=contract.is_write,
        exempt=frozenset(
            arg.path.split(".")[0].replace("[]", "") for arg in args if arg.from_expr is not None or arg.has_const
        ),
        args=tuple(_arg_plan(arg) for arg in args),
        binds=tuple(arg for arg in args if arg.from_expr is not None or arg.has_const),
        success=None if contract.success is None else success_check(contract.success),
        extracts=tuple((extract.key or extract.path, extract) for extract in contract.extracts),
        structured=contract.result_view is ResultView.STRUCTURED,
        doc=_doc_plan(contract),
    )


_PLANS: dict[int, tuple[ToolContract, ToolPlan]] = {}


def plan(contract: ToolContract | None) -> ToolPlan:
    """The plan of ``contract``, built on first use (:data:`NO_CONTRACT` for None)."""
    if contract is None:
        return NO_CONTRACT
    entry = _PLANS.get(id(contract))
    if entry is not None and entry[0] is contract:
        return entry[1]
    built = _build(contract)
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[id(contract)] = (contract, built)
    return built
