"""Config key spelling (§5.1): one normal form for the store, the context and the gate."""

from __future__ import annotations

import re


def normalize_key(key: str) -> str:
    """CLI-style ``--api-token`` → ``api_token`` (§5.1)."""
    return re.sub(r"[-\s]+", "_", key.strip().lstrip("-")).strip("_")
