"""Provider-safe tool names (``^[A-Za-z0-9_-]{1,64}$``), derived deterministically from skill names."""

from __future__ import annotations

import hashlib
import re

TOOL_NAME_RX = re.compile(r"\A[A-Za-z0-9_-]{1,64}\Z")  # \Z, not $: "$" also matches before a final newline
MAX_LEN = 64
FANOUT_SEP = "__"


def _digest(text: str, n: int = 6) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:n]


def safe_tool_name(name: str) -> str:
    """A usable tool name for any skill name.

    ``here.now`` → ``here_now``; ``2048`` → ``skill_2048`` (some providers want a leading letter);
    ``数据-技能`` → ``skill_<hash>`` (a name losing characters gets a short hash, so distinct names stay distinct).
    """
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_-") or "skill"
    if not slug[0].isalpha():
        slug = f"skill_{slug}"
    if not name.isascii():
        slug = f"{slug}_{_digest(name)}"
    return fit(slug)


def fit(name: str) -> str:
    """Shorten a name over 64 characters, keeping it unique with a hash suffix."""
    if len(name) <= MAX_LEN:
        return name
    return f"{name[: MAX_LEN - 9]}_{_digest(name, 8)}"


def fanout_name(tool: str, sub: str) -> str:
    """``<skill>__<sub>`` for a fanned-out subcommand."""
    return fit(f"{tool}{FANOUT_SEP}{safe_tool_name(sub) if not TOOL_NAME_RX.match(sub) else sub}")


def disambiguate(name: str, owner: str) -> str:
    """A deterministic replacement for a name already taken, derived from the owner's identity (its path)."""
    return fit(f"{name[: MAX_LEN - 7]}_{_digest(owner)}")
