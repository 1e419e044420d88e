"""Text from outside made storable: PostgreSQL holds neither NUL characters (in TEXT or JSONB) nor half of a
surrogate pair (no UTF-8 encodes it), and a model or a chat user may well send either."""

from __future__ import annotations

import re
from typing import Any

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def unstorable(text: str) -> bool:
    """Whether ``text`` holds a character PostgreSQL cannot store."""
    return _UNSTORABLE.search(text) is not None


def storable(value: Any) -> Any:
    """``value`` with every NUL and lone surrogate in its text (keys too) replaced by U+FFFD: the value stays
    saveable and shows where the character was."""
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value
