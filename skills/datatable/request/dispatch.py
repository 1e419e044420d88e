"""Request normalization of the datatable skill (spec §3.5, §7, §7.3): action and parameter-key matching, payload
flattening, the 确认 (confirmation) rules and the dry-run (preview) reply. Pure Python, no database; the alias
tables it reads are in action_aliases.py and param_aliases.py.

Input is ``{"action": "<name>", "payload": {...}}``; payload parameters may also sit flat at the top level.
:func:`normalize_request` turns it into a :class:`Request` with a canonical action of the action table
(actions/table.py), canonical parameter keys and one human-readable note per normalization
(``"delete-row → delete"``, ``"filter → filters"``); the handler joins :attr:`Request.notes` into the envelope's
``action_note``.
Anything that cannot be read is a :class:`DispatchError` with ``need_param`` and a fix, never a guess: no action is
never defaulted from the shape of the parameters (§3.5 point 3), and an ambiguous word (``list``, ``create``, ``drop``,
``show``, ``new``) is refused with its candidates instead of being mapped onto one of them.

Decisions (documented here so the handler and the tests agree):

* **Action matching** — trimmed, case-folded, camelCase split, ``-`` / space / ``.`` / ``/`` equivalent to ``_``; then
  looked up as a canonical action, then in :data:`~.action_aliases.ACTION_ALIASES`; last, the same key with every ``_``
  removed is tried (``listTables`` / ``list tables`` / ``删除 表``). The tables are checked at import time: every alias
  value is a canonical action, and no two spellings collide once underscores are removed.
* **确认 prefix** — an action starting with ``确认`` (or its literal English rendering ``confirm`` / ``confirmed``
  followed by a separator, e.g. ``confirm_delete_table``) has the prefix stripped, the rest normalized, and
  ``confirmed=True`` with a note. A bare ``确认`` is not an action (``need_param: action``). If the caller also
  passed an explicit *no* (``确认=false``) that explicit value wins and nothing is confirmed.
* **确认 from the caller** — only the keys in :data:`~.param_aliases.CONFIRM_KEYS` (confirm / confirmed / approve /
  approved / 确定 / 确认 …) count, and only with a yes value (``True``, ``1``, ``"true"``, ``"yes"``, ``"是"``,
  ``"确认"`` …, see :data:`~.param_aliases.YES_VALUES`). The key is rewritten to ``确认`` holding a bool. Any other
  value (a sentence such as ``"确认初始化"``, ``"maybe"``) is *not* a confirmation and gets a note; nothing else in the
  input — other fields, a previous successful preview — is ever read as a confirmation.
* **Parameter keys** — see :data:`~.param_aliases.PARAM_ALIASES`. Keys are matched after the same trim / case-fold /
  camelCase / separator folding as actions; unknown keys pass through untouched. ``fields`` is create_table's field list
  and is never aliased *away*; ``columns`` maps onto it (no other action takes a column list). ``field`` (add_field's
  definition) is untouched. When a key is given both as an alias and canonically, the canonical key wins and a note says
  the alias was ignored; two aliases of one key without the canonical one → the first wins, the rest noted.
* **Payload flattening** — ``payload`` may be a mapping, a JSON text of an object, or empty (``None`` / ``""`` /
  ``"null"``). Anything else is a :class:`DispatchError` with ``need_param="payload"``. Its keys are merged with the
  top-level ones; on a conflict **the payload wins** (it is the documented place, §7) and a note names the key —
  only when the two values differ.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..actions.table import ACTIONS, action_names
from .action_aliases import ACTION_ALIASES, AMBIGUOUS_ACTIONS, COMPACT_ACTIONS
from .param_aliases import ACTION_KEY_ALIASES, CANONICAL_PARAMS, CONFIRM_KEY, NO_VALUES, PARAM_ALIASES, YES_VALUES

__all__ = [
    "DispatchError",
    "Request",
    "dry_run",
    "is_destructive_structure",
    "needs_confirmation",
    "normalize_action",
    "normalize_request",
]


# 确认…, or the English rendering confirm/confirmed followed by a separator, a capital (camelCase) or a CJK character.
_CONFIRM_PREFIX = re.compile(r"^\s*(?:确认|(?i:confirm(?:ed)?)(?=[\s_\-.:/：]|[A-Z]|[\u4e00-\u9fff]))[\s_\-.:/：，,]*")


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


_SEPARATORS = re.compile(r"[\s\-./]+")


#: The actions that only preview without 确认=true (update_field too when it changes a type).
_DESTRUCTIVE = action_names(destructive=True)


class DispatchError(ValueError):
    """An input that cannot be dispatched; ``str(error)`` says the fix. Always recoverable by changing parameters."""

    def __init__(
        self,
        message: str,
        *,
        need_param: str | None = None,
        error_type: str = "recoverable",
        notes: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.need_param = need_param
        self.error_type = error_type
        self.notes = tuple(notes)

    def to_envelope(self) -> dict[str, Any]:
        """The §6.1 failure envelope for this error (``action_note`` when normalizations happened first)."""
        envelope: dict[str, Any] = {"ok": False, "success": False, "error": self.message, "error_type": self.error_type}
        if self.need_param is not None:
            envelope["need_param"] = self.need_param
        if self.need_param == "action":
            envelope["supported_actions"] = list(ACTIONS)
        if self.notes:
            envelope["action_note"] = "; ".join(self.notes)
        return envelope


@dataclass(frozen=True)
class Request:
    """A normalized request: canonical action, canonical parameter keys, the notes, and whether 确认=true was given."""

    action: str
    params: dict[str, Any]
    notes: tuple[str, ...]
    confirmed: bool

    @property
    def action_note(self) -> str | None:
        return "; ".join(self.notes) if self.notes else None


def _fold(text: str) -> str:
    text = _CAMEL.sub("_", text.strip())
    text = _SEPARATORS.sub("_", text.casefold())
    return re.sub(r"_+", "_", text).strip("_")


def _action_list() -> str:
    return ", ".join(ACTIONS)


def normalize_action(raw: str) -> str:
    """The canonical action for ``raw`` (no 确认 prefix handling); :class:`DispatchError` when unknown/ambiguous."""
    key = _fold(raw)
    if key in ACTIONS:
        return key
    if key in ACTION_ALIASES:
        return ACTION_ALIASES[key]
    compact = key.replace("_", "")
    if compact in AMBIGUOUS_ACTIONS or key in AMBIGUOUS_ACTIONS:
        candidates = AMBIGUOUS_ACTIONS.get(key) or AMBIGUOUS_ACTIONS[compact]
        raise DispatchError(
            f"action {raw!r} is ambiguous: it could mean {' / '.join(candidates)}. "
            f"Pass one of the supported actions: {_action_list()}.",
            need_param="action",
        )
    if compact in COMPACT_ACTIONS:
        return COMPACT_ACTIONS[compact]
    close = difflib.get_close_matches(key, [*ACTIONS, *ACTION_ALIASES], n=1, cutoff=0.8)
    hint = ""
    if close:
        guess = ACTION_ALIASES.get(close[0], close[0])
        hint = f" Closest supported action: {guess}."
    raise DispatchError(
        f"unknown action {raw!r}.{hint} Pass one of the supported actions: {_action_list()}.",
        need_param="action",
    )


def _read_payload(payload: Any) -> dict[str, Any]:
    if payload is None:
        return {}
    if isinstance(payload, str):
        text = payload.strip()
        if not text:
            return {}
        try:
            decoded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DispatchError(
                f"payload is a text that is not valid JSON ({exc.msg} at position {exc.pos}); pass payload as an "
                'object, e.g. {"action": "query", "payload": {"table_id": "…"}}, '
                "or put the parameters at the top level.",
                need_param="payload",
            ) from None
        if decoded is None:
            return {}
        payload = decoded
        if not isinstance(payload, Mapping):
            raise DispatchError(
                f"payload is JSON text of a {type(payload).__name__}, not of an object; pass payload as an object "
                "of parameters, or put the parameters at the top level.",
                need_param="payload",
            )
    if not isinstance(payload, Mapping):
        raise DispatchError(
            f"payload must be an object of parameters, got {type(payload).__name__}; pass payload as an object "
            '(e.g. {"table_id": "…", "data": {…}}) or put the parameters at the top level.',
            need_param="payload",
        )
    for key in payload:
        if not isinstance(key, str):
            raise DispatchError(f"payload keys must be text, got {key!r}.", need_param="payload")
    return dict(payload)


def _confirm_value(value: Any) -> bool | None:
    """True / False for a recognized yes / no, None for anything else (never a confirmation)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value == 1 if value in (0, 1) else None
    if value is None:
        return False
    if isinstance(value, str):
        folded = value.strip().casefold()
        if folded in YES_VALUES:
            return True
        if folded in NO_VALUES:
            return False
    return None


def _canonical_key(key: str) -> str:
    if key == CONFIRM_KEY or key in CANONICAL_PARAMS:
        return key
    folded = _fold(key)
    if folded in PARAM_ALIASES:
        return PARAM_ALIASES[folded]
    if folded in CANONICAL_PARAMS:  # "Table_ID", "tableId", "row-id"
        return folded
    return key


def _normalize_params(merged: Mapping[str, Any], notes: list[str]) -> tuple[dict[str, Any], bool | None]:
    """Canonical keys for ``merged``; returns (params, caller's 确认: True / False / None when not given)."""
    canonical_present = {key for key in merged if _canonical_key(key) == key}
    params: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, value in merged.items():
        target = _canonical_key(key)
        if target == key:
            params[key] = value
            continue
        if target in canonical_present:
            notes.append(f"{key} ignored: {target} was also given")
            continue
        if target in sources:
            notes.append(f"{key} ignored: {sources[target]} → {target} was already used")
            continue
        sources[target] = key
        params[target] = value
        notes.append(f"{key} → {target}")
    confirm: bool | None = None
    if CONFIRM_KEY in params:
        raw = params[CONFIRM_KEY]
        value = _confirm_value(raw)
        if value is None:  # unreadable: not a confirmation, and not an explicit "no" either
            notes.append(f"{CONFIRM_KEY}={raw!r} is not a yes/no value; treated as not confirmed")
            params[CONFIRM_KEY] = False
        else:
            if not isinstance(raw, bool):
                notes.append(f"{CONFIRM_KEY}={raw!r} → {CONFIRM_KEY}={'true' if value else 'false'}")
            params[CONFIRM_KEY] = value
            confirm = value
    return params, confirm


def normalize_request(input: Mapping[str, Any]) -> Request:
    """Normalize ``{"action": …, "payload": {…}, …flat params}`` into a :class:`Request` (rules: module docstring)."""
    if not isinstance(input, Mapping):
        raise DispatchError(
            f'input must be an object like {{"action": "query", "payload": {{…}}}}, got {type(input).__name__}.',
            need_param="action",
        )
    notes: list[str] = []
    top = {k: v for k, v in input.items() if k != "payload"}
    payload = _read_payload(input.get("payload"))
    if isinstance(input.get("payload"), str) and payload:
        notes.append("payload JSON text → object")
    merged: dict[str, Any] = dict(top)
    for key, value in payload.items():
        if key in merged and merged[key] != value:
            notes.append(f"{key} given at top level and in payload; the payload value was used")
        merged[key] = value

    # The action itself (and its key aliases).
    raw_action: Any = merged.pop("action", None)
    for alias, target in ACTION_KEY_ALIASES.items():
        if alias in merged:
            value = merged.pop(alias)
            if raw_action is None or (isinstance(raw_action, str) and not raw_action.strip()):
                raw_action = value
                notes.append(f"{alias} → {target}")
            else:
                notes.append(f"{alias} ignored: action was also given")
    if raw_action is None or (isinstance(raw_action, str) and not raw_action.strip()):
        raise DispatchError(
            f"no action given; the action is never guessed from the parameters. "
            f"Pass one of the supported actions: {_action_list()}.",
            need_param="action",
            notes=notes,
        )
    if not isinstance(raw_action, str):
        raise DispatchError(
            f"action must be a text naming one action, got {type(raw_action).__name__}. "
            f"Supported actions: {_action_list()}.",
            need_param="action",
            notes=notes,
        )

    params, caller_confirm = _normalize_params(merged, notes)

    prefixed = False
    action_text = raw_action
    match = _CONFIRM_PREFIX.match(raw_action)
    if match:
        action_text = raw_action[match.end() :]
        prefixed = True
        if not action_text.strip():
            raise DispatchError(
                f"action {raw_action!r} confirms nothing: name the action to confirm (e.g. 确认删除表). "
                f"Supported actions: {_action_list()}.",
                need_param="action",
                notes=notes,
            )
    try:
        action = normalize_action(action_text)
    except DispatchError as exc:
        message = exc.message
        if prefixed:
            message += f" (received {raw_action!r}: a leading 确认 only confirms one of these actions.)"
        raise DispatchError(message, need_param="action", notes=notes) from None
    if action != raw_action.strip():  # the action's own note goes first: it is the one the model most needs
        suffix = f" + {CONFIRM_KEY}=true" if prefixed and caller_confirm is not False else ""
        notes.insert(0, f"{raw_action.strip()} → {action}{suffix}")

    confirmed = caller_confirm is True
    if prefixed:
        if caller_confirm is False:
            notes.append(f"the {raw_action.strip()!r} prefix is overridden by the explicit {CONFIRM_KEY}=false")
        else:
            confirmed = True
            params[CONFIRM_KEY] = True
    return Request(action=action, params=params, notes=tuple(notes), confirmed=confirmed)


_DEFAULT_FOR_USER = (
    "确认执行：回复「确认」后按相同参数执行",
    "取消：不做任何改动",
    "修改参数后重新预演",
)


def dry_run(request: Request, would: str, *, for_user: Sequence[str] | None = None) -> dict[str, Any]:
    """The preview reply (§3.5 points 5–6): echoes the parameters, says it only previewed because 确认=true is
    missing, and lists follow-ups for the *user* (no imperative next steps addressed to the model)."""
    what = would.strip().rstrip("。.") or request.action
    reply: dict[str, Any] = {
        "ok": True,
        "success": True,
        "dry_run": True,
        "action": request.action,
        "received": dict(request.params),
        "message": (
            f"Nothing was changed: {request.action} was only previewed because 确认=true is missing. "
            f"Only if the user confirms, the same parameters and 确认=true will {what}."
        ),
        "user_message": f"仅预演，未做任何改动（缺少 确认=true）。用户确认后才会执行：{what}。",
        "for_user": list(for_user if for_user is not None else _DEFAULT_FOR_USER),
    }
    if request.notes:
        reply["action_note"] = "; ".join(request.notes)
    return reply


def is_destructive_structure(action: str, *, type_change: bool = False) -> bool:
    """delete_table, delete_field, and update_field when it changes a field's type."""
    return action in _DESTRUCTIVE or (action == "update_field" and type_change)


def needs_confirmation(request: Request, *, type_change: bool = False) -> bool:
    """True when the request is a destructive structure action without 确认=true: the handler must only preview
    (:func:`dry_run`). ``type_change`` is the handler's finding that an update_field patch changes the type."""
    return is_destructive_structure(request.action, type_change=type_change) and not request.confirmed
