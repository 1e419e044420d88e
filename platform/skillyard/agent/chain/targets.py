"""Targets by name (doc-runtime-contracts "文档目标"): a write whose ``targetArg`` value came from a lookup that
found zero or several candidates, or whose listing was incomplete, is refused before it runs (``TARGET_UNRESOLVED``).

The argument's provenance (the param contract's source, §5.3) says where the value came from:

* ``MODEL`` — no lookup and no user named it (a lookup that found nothing leaves only a made-up value): refused;
* ``EVIDENCE`` — the newest visible succeeded evidence whose extracts hold the value is the lookup: refused when the
  extract holding it counted other than 1 item, or when that read's listing was not complete;
* any other source (the user said it, a node input or output, a shared or session value, a prior task's entity,
  the contract or the platform): not a lookup by name, accepted.
"""

from __future__ import annotations

import json
from typing import Any

from ..codes import ErrorCode
from ..paths import get_path, has_value
from ..state import Evidence, Observation
from .base import ChainCall
from .plan import MODEL
from .provenance import same, walk

EVIDENCE = "EVIDENCE"
CANDIDATES_SHOWN = 10


def lookup_of(call: ChainCall, value: Any) -> tuple[Evidence, str] | None:
    """(the evidence, the extract key) the value came from: the newest visible succeeded record holding it."""
    for record in call.ctx.visible_evidence():
        if not record.succeeded:
            continue
        for key, extracted in record.extracts.items():
            if any(same(value, item) for item in walk(extracted)):
                return record, key
    return None


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _candidates(extracted: Any) -> str:
    items = extracted if isinstance(extracted, list) else [extracted]
    shown = [_shown(item) for item in items[:CANDIDATES_SHOWN]]
    more = f" and {len(items) - CANDIDATES_SHOWN} more" if len(items) > CANDIDATES_SHOWN else ""
    return "; ".join(shown) + more


def check(call: ChainCall, arg: str) -> Observation | None:
    """The ``TARGET_UNRESOLVED`` refusal of a write whose target argument ``arg`` is not resolved, or None."""
    found, value = get_path(call.args, arg)
    if not found or not has_value(value):
        return None  # a missing target is the param contract's (required / missing)
    source = call.sources.get(arg, MODEL)
    shown = _shown(value)
    if source == MODEL:
        return call.refuse(
            ErrorCode.TARGET_UNRESOLVED,
            f"the target {arg}={shown} of {call.label} was not found by a lookup and not given by the user; a name "
            "or title is not a target",
            f"look the target up first (by its title or id) and use the id the lookup found; if it finds nothing, "
            f"tell the user and do not call {call.tool}",
        )
    if source != EVIDENCE:
        return None
    origin = lookup_of(call, value)
    if origin is None:
        return None
    record, key = origin
    counted = record.counts.get(key, 1)
    if record.complete is False:
        return call.refuse(
            ErrorCode.TARGET_UNRESOLVED,
            f"the target {arg}={shown} of {call.label} comes from the listing {record.tool} ({record.id}), which is "
            f"not complete (next cursor {record.next_cursor!r}): another candidate may be on a later page",
            f"continue {record.tool} with the same query and filters until it is complete, then decide; if several "
            "candidates match, ask the user to choose with builtin_node_follow_up",
            evidence_id=record.id,
        )
    if counted != 1:
        what = "found nothing" if counted == 0 else f"found {counted} candidates"
        return call.refuse(
            ErrorCode.TARGET_UNRESOLVED,
            f"the target {arg}={shown} of {call.label} comes from {record.tool} ({record.id}), which {what} under "
            f"{key!r}: {_candidates(record.extracts.get(key))}",
            f"ask the user which one is meant with builtin_node_follow_up (expectedFields [{_shown(arg)}]) and call "
            f"{call.tool} with the id the user chose; do not pick one yourself",
            evidence_id=record.id,
        )
    return None
