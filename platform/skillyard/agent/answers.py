"""What a resume brings besides its action: an approver's edits, the calls of a batch it approves, who approves.

:class:`Answer` checks the shapes before anything is loaded (a malformed ``--edit`` never reaches the node) and
says which checkpoint each part fits. :func:`apply_edit` checks one edit against the write's contract — edited
values count as the approver's, i.e. ``USER`` — and returns the edited arguments or the refusal:

* an argument bound by ``const`` or ``from`` (platform fields included) may not be edited: ``APPROVAL_EDIT_FORBIDDEN``;
* a value must be allowed by the argument's sources as a USER value (``USER`` or ``MODEL`` listed), or match one of
  its other sources (a value of the node's evidence for ``EVIDENCE`` …): else ``PARAM_PROVENANCE_REJECTED``;
* a value outside the argument's ``enum`` is refused (``ARG_REJECTED``), as is a path that is neither an argument of
  the contract nor one of the call's own arguments.

An edit is approved as it is: it raises no new approval (the one exception to the "changed binding" rule of part 1,
because the approver made the change), and the approval record shows it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..envelope import nesting_problem
from .chain.arg_binding import put
from .chain.provenance import matches, same
from .codes import ErrorCode
from .context import NodeContext
from .contract import SourceType
from .errors import AgentError
from .paths import get_path
from .state import CheckpointType, GatedWrite, ResumeAction

#: Paths one edit may change, and the JSON characters of its values.
MAX_EDITED_PATHS = 50
MAX_EDIT_CHARS = 64 * 1024

Refusal = tuple[ErrorCode, str, str]


def resume_action(action: Any) -> ResumeAction:
    try:
        return ResumeAction(str(action).upper())
    except ValueError:
        names = ", ".join(a.value for a in ResumeAction)
        raise AgentError(f"unknown resume action {action!r}: use one of {names}") from None


@dataclass(frozen=True)
class Answer:
    """The parts of a resume besides action and text (see the module docstring)."""

    edit: dict[str, Any] | None = None
    only: list[str] | None = None
    approver: dict[str, Any] | None = None

    @classmethod
    def checked(cls, action: ResumeAction, edit: Any = None, only: Any = None, approver: Any = None) -> Answer:
        if edit is not None:
            if action is not ResumeAction.CONFIRM:
                raise AgentError(f"an edit is approved with CONFIRM, not {action.value}")
            if not isinstance(edit, Mapping) or not edit:
                raise AgentError('the edit must be a non-empty JSON object of argument path → value, e.g. {"qty": 2}')
            text = json.dumps(edit, ensure_ascii=False, default=str)
            problem = nesting_problem(edit)
            if len(text) > MAX_EDIT_CHARS or problem or len(edit) > MAX_EDITED_PATHS:
                raise AgentError(
                    problem
                    or f"the edit is too large: at most {MAX_EDITED_PATHS} paths and {MAX_EDIT_CHARS:,} "
                    "characters of JSON"
                )
            edit = {str(k): v for k, v in edit.items()}
        if only is not None:
            if action is not ResumeAction.CONFIRM:
                raise AgentError(f"--only names the calls a CONFIRM runs; it does not go with {action.value}")
            if isinstance(only, str):
                only = only.split(",")
            if not isinstance(only, list | tuple) or not all(isinstance(i, str) for i in only):
                raise AgentError("--only must be call ids, e.g. call_1_1,call_1_2")
            only = list(dict.fromkeys(i.strip() for i in only if i.strip()))
            if not only:
                raise AgentError("--only names no call id; give the ids to run, or confirm without it")
        if approver is not None and not isinstance(approver, Mapping):
            raise AgentError(f"the approver must be an identity mapping, not {type(approver).__name__}")
        return cls(edit, only, None if approver is None else dict(approver))

    def fits(self, kind: CheckpointType, action: ResumeAction, session_id: str) -> None:
        """Raise AgentError when the action or its parts do not answer a checkpoint of ``kind``."""
        if action is ResumeAction.CHOOSE and kind is not CheckpointType.CHOICE:
            raise AgentError(
                f"CHOOSE answers a CHOICE checkpoint; session {session_id!r} is at {kind.value}: " + _actions(kind)
            )
        if kind is CheckpointType.EVENT and action in (ResumeAction.CONFIRM, ResumeAction.CHOOSE):
            raise AgentError(f"session {session_id!r} waits for an external event: {_actions(kind)}")
        if (self.edit is not None or self.only is not None) and kind is not CheckpointType.APPROVAL:
            raise AgentError(f"--edit and --only answer an APPROVAL; session {session_id!r} is at {kind.value}")

    def edits_for(self, calls: list[GatedWrite], batch: bool) -> dict[int, dict[str, Any]] | Refusal:
        """The edit of each call by its index: a single approval's edit is argument path → value; a batch's is
        call id → such an edit."""
        if self.edit is None:
            return {}
        if not batch:
            return {0: self.edit}
        index = {c.call_id: n for n, c in enumerate(calls)}
        unknown = [k for k in self.edit if k not in index]
        wrong = [k for k, v in self.edit.items() if not isinstance(v, Mapping)]
        if unknown or wrong:
            listed = ", ".join(str(i) for i in index)
            return (
                ErrorCode.APPROVAL_BATCH_UNKNOWN_CALL,
                "a batch approval's edit is keyed by call id, each with an object of argument path → value; "
                f"not so: {', '.join(unknown or wrong)}",
                f'confirm with --edit \'{{"CALL_ID": {{"path": value}}}}\' for listed call ids ({listed})',
            )
        return {index[k]: dict(v) for k, v in self.edit.items()}


def _actions(kind: CheckpointType) -> str:
    return {
        CheckpointType.FOLLOW_UP: "answer with REPLY (text), or CANCEL",
        CheckpointType.CHOICE: "answer with CHOOSE (a listed id), REPLY (text), or CANCEL",
        CheckpointType.APPROVAL: "answer with CONFIRM, REJECT, REPLY or CANCEL",
        CheckpointType.VERIFY: "answer with CONFIRM (it took effect), REJECT (it did not) or CANCEL",
        CheckpointType.EVENT: "it resumes when the event arrives (skillyard agent event) or times out; CANCEL stops it",
    }[kind]


def apply_edit(ctx: NodeContext, gated: GatedWrite, edit: dict[str, Any]) -> dict[str, Any] | Refusal:
    """The write's arguments with the approver's edit applied, or the refusal (see the module docstring)."""
    contract = ctx.tool_contract(gated.tool)
    declared = contract.args if contract is not None else {}
    args = copy.deepcopy(gated.args)
    for path, value in edit.items():
        arg = declared.get(path)
        if arg is None:
            if not get_path(gated.args, path)[0]:
                known = ", ".join(declared) or ", ".join(gated.args) or "none"
                return (
                    ErrorCode.ARG_REJECTED,
                    f"{path!r} is not an argument of {gated.tool} (its arguments: {known})",
                    "edit the arguments the approval shows, by their paths",
                )
        elif arg.has_const or arg.from_expr is not None:
            how = "a constant of the contract" if arg.has_const else f"bound from {arg.from_expr}"
            return (
                ErrorCode.APPROVAL_EDIT_FORBIDDEN,
                f"{arg.label or path} ({path}) of {gated.tool} is {how}; an approver cannot change it",
                "confirm without editing it, or REJECT and ask for another write",
            )
        else:
            problem = _edited_value(ctx, gated.tool, arg, path, value)
            if problem is not None:
                return problem
        put(args, path, copy.deepcopy(value))
    return args


def _edited_value(ctx: NodeContext, tool: str, arg: Any, path: str, value: Any) -> Refusal | None:
    label = arg.label or path
    if arg.enum and not any(same(value, option) for option in arg.enum):
        options = ", ".join(json.dumps(v, ensure_ascii=False) for v in arg.enum)
        return (ErrorCode.ARG_REJECTED, f"{label} ({path}) must be one of {options}", "edit it to one of them")
    sources = arg.sources
    if SourceType.USER in sources or SourceType.MODEL in sources:
        return None  # an approver's value is a USER value
    if any(matches(ctx, arg, source, value, path) for source in sources if source is not SourceType.USER):
        return None
    allowed = ", ".join(s.value for s in sources)
    shown = "***" if arg.sensitive else json.dumps(value, ensure_ascii=False, default=str)
    return (
        ErrorCode.PARAM_PROVENANCE_REJECTED,
        f"the edited value {shown} of {label} ({path}) of {tool} does not come from an allowed source ({allowed}); "
        "an approver's value counts as USER, which this argument does not accept",
        "confirm without this edit, or edit it to a value the node's evidence holds",
    )
