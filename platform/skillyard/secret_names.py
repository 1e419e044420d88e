"""Which names hold credentials (§5.2): one rule for the catalog, configs, the pipeline and the executors."""

from __future__ import annotations

import re

#: §5.2: a parameter whose name contains one of these (case-insensitive substring) is a credential.
SECRET_SUBSTRINGS = ("key", "token", "secret", "password", "credential", "auth")
_SECRET_RX = re.compile("|".join(SECRET_SUBSTRINGS), re.IGNORECASE)


def looks_secret(name: str) -> bool:
    """True when a name contains a credential substring (the rule, before ``x-secret`` overrides)."""
    return bool(_SECRET_RX.search(name))
