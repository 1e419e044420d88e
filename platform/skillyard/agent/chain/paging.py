"""Paged reads (doc-runtime-contracts "分页与完整性"): whether a read proved its listing complete, and whether the
user asked for everything.

A read whose contract declares ``paging`` (or whose result declares the ``doc.operation.v1`` receipt) is recorded
with ``complete`` True or False, its ``next_cursor`` and its ``query`` (the tool and its arguments without the
cursor), read from ``complete``, ``hasMore``, ``truncated``/``stopReason`` and ``nextCursor``. When the user's
message asks for everything (:data:`ALL_WORDS_CJK`, :data:`ALL_WORDS_LATIN`) the node cannot finish while the last
read of any of its queries is incomplete (``FINISH_INCOMPLETE_LISTING``, builtins/outputs.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..context import NodeContext
from ..contract import PagingSpec
from ..paths import get_path, has_value
from ..state import Evidence
from .base import ChainCall, canonical, digest

FIELDS = ("complete", "hasMore", "truncated", "stopReason", "nextCursor")
DEFAULT = PagingSpec()  # a doc.operation.v1 read without "paging": cursor argument "cursor", fields at the root

#: Words that ask for everything, matched as substrings (CJK has no spaces between words).
ALL_WORDS_CJK = ("全部", "所有", "全都", "有哪些", "一共", "总共", "完整列表", "列出所有")
#: Compounds of those words that do not ask for everything ("所有者" is an owner); removed before matching.
NOT_ALL_CJK = ("所有者", "所有权", "所有制")
#: Latin words that ask for everything, matched as whole words, case-insensitive ("allow", "overall" do not match).
ALL_WORDS_LATIN = ("all", "every", "everything", "entire", "full list", "complete list")
_LATIN = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in ALL_WORDS_LATIN) + r")\b", re.IGNORECASE | re.ASCII)


def asks_for_everything(text: str) -> str | None:
    """The word of ``text`` that asks for everything, or None."""
    for compound in NOT_ALL_CJK:
        text = text.replace(compound, " ")
    for word in ALL_WORDS_CJK:
        if word in text:
            return word
    found = _LATIN.search(text)
    return found.group(0) if found else None


def user_texts(ctx: NodeContext) -> list[str]:
    """What the user said to this node: the task's message, and the session's user messages that entered this
    node's conversation (a follow-up answer enters it with the question after it; runtime notes are not the
    user's)."""
    texts = [ctx.task.message] if ctx.task.message else []
    said = [m for m in ctx.session.user_messages if m]
    for message in ctx.node.messages:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, str):
            continue
        texts += [m for m in said if content == m or content.startswith(m + "\n")]
    return texts


def everything_asked(ctx: NodeContext) -> str | None:
    """The word by which the user asked this node for everything, or None."""
    for text in user_texts(ctx):
        word = asks_for_everything(text)
        if word is not None:
            return word
    return None


def completeness(node: Any) -> tuple[bool | None, Any]:
    """(complete, next cursor) of an object holding the paging fields; (None, None) when it holds none."""
    if not isinstance(node, Mapping) or not any(key in node for key in FIELDS):
        return None, None
    cursor = node.get("nextCursor")
    cursor = cursor if has_value(cursor) else None
    proved = node.get("complete") is True
    incomplete = (
        node.get("complete") is False
        or node.get("hasMore") is True
        or node.get("truncated") is True
        or (not proved and (cursor is not None or has_value(node.get("stopReason"))))
    )
    return not incomplete, cursor


def _fields(root: Any, spec: PagingSpec) -> Any:
    if spec.path is not None:
        return get_path(root, spec.path)[1]
    if isinstance(root, Mapping) and not any(key in root for key in FIELDS) and isinstance(root.get("data"), Mapping):
        return root["data"]  # a receipt's listing keeps them in data
    return root


def query_key(tool: str, args: Mapping[str, Any], cursor_arg: str) -> str:
    """The query of a paged read: the tool and a digest of its arguments without the cursor."""
    rest = {k: v for k, v in args.items() if k != cursor_arg}
    return f"{tool}:{digest(canonical(rest))}"


def record(call: ChainCall, evidence: Evidence, root: Any, spec: PagingSpec | None) -> None:
    """Store whether the read proved its listing complete (nothing is stored when the result has no paging
    fields)."""
    complete, cursor = completeness(_fields(root, spec or DEFAULT))
    if complete is not None:
        mark(call, evidence, complete, cursor, spec)


def mark(call: ChainCall, evidence: Evidence, complete: bool, cursor: Any, spec: PagingSpec | None) -> None:
    evidence.complete, evidence.next_cursor = complete, cursor
    evidence.query = query_key(call.tool, call.args, (spec or DEFAULT).cursor_arg)


def continue_step(ctx: NodeContext, tool: str, cursor: Any, spec: PagingSpec | None, word: str | None) -> str:
    """How to go on with an incomplete listing: the same query and filters, the next cursor."""
    arg = (spec or DEFAULT).cursor_arg
    how = (
        f"call {tool} again with the same query and filters and {arg}={cursor!r}"
        if cursor is not None
        else f"call {tool} again with the same query and filters"
    )
    if word is not None:
        return (
            f"this listing is not complete and the user asked for everything ({word!r}): {how} until it is "
            "complete; do not change the query or its filters, and do not call it complete before then"
        )
    return f"this is not the complete listing; if more is needed, {how}; say that the list is partial otherwise"


def incomplete_listings(ctx: NodeContext) -> list[Evidence]:
    """The last read of each paged query of this node (and its delegated nodes) that is not complete."""
    last: dict[str, Evidence] = {}
    for evidence in ctx.goal_evidence():
        if evidence.query is not None and evidence.complete is not None:
            known = last.get(evidence.query)
            if known is None or evidence.seq > known.seq:
                last[evidence.query] = evidence
    return [e for e in last.values() if e.complete is False]
