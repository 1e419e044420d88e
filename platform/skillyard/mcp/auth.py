"""Bearer tokens for ``mcp serve --transport http``: the SDK's bearer middleware asks this verifier about each
request's token; the token store answers. The SDK binds each MCP session to the token that opened it.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from mcp.server.auth.provider import AccessToken

from ..tokens.identity import TokenIdentity
from ..tokens.store import TokenStore, token_hash

#: How long a verified token is taken on trust before the store is asked again (a revocation takes this long).
RECHECK_S = 5.0
MAX_CACHED = 1024
#: Where the identity travels on the SDK's AccessToken.
IDENTITY_CLAIM = "skillyard_identity"


class StoreTokenVerifier:
    """The SDK's ``TokenVerifier`` over skillyard's token store, with a short cache (one query per request
    would double the cost of a call)."""

    def __init__(self, store: TokenStore) -> None:
        self.store = store
        self._cache: OrderedDict[str, tuple[float, TokenIdentity | None]] = OrderedDict()

    async def verify_token(self, token: str) -> AccessToken | None:
        key = token_hash(token)
        cached = self._cache.get(key)
        if cached is not None and time.monotonic() - cached[0] < RECHECK_S:
            identity = cached[1]
        else:
            identity = await self.store.verify(token)
            self._cache[key] = (time.monotonic(), identity)
            while len(self._cache) > MAX_CACHED:
                self._cache.popitem(last=False)
        if identity is None:
            return None
        return AccessToken(
            token=key,  # the SDK keeps this in memory; the hash serves as well as the token
            client_id=identity.name,
            subject=identity.name,
            scopes=[],
            claims={IDENTITY_CLAIM: identity},
        )


def identity_of(token: AccessToken) -> TokenIdentity | None:
    """The identity a verified request carries."""
    found = (token.claims or {}).get(IDENTITY_CLAIM)
    return found if isinstance(found, TokenIdentity) else None
