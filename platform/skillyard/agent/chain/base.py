"""What travels through the tool-call chain (§13): one :class:`ChainCall` per business-tool call."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..codes import ErrorCode
from ..state import Observation

if TYPE_CHECKING:
    from ...catalog.skill import Skill
    from ..context import NodeContext
    from ..contract import ToolContract


def canonical(value: Any) -> str:
    """Stable JSON text of a value (sorted keys, no spaces): what fingerprints and idempotency keys hash."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class ChainCall:
    """One business-tool call on its way through the stages; each stage reads and fills it."""

    ctx: NodeContext
    tool: str
    raw_arguments: Any  # as the model sent them (dict or text)
    call_id: str | None = None
    approved: bool = False  # the CONFIRM path of §14.1 step 3: no approval, no fingerprint check
    contract: ToolContract | None = None  # None: a tool without a contract (read-only, no checks, §1.3)
    catalog_skill: Skill | None = None
    args: dict[str, Any] = field(default_factory=dict)  # after arg policy: the object; after binding: bound
    sources: dict[str, str] = field(default_factory=dict)  # arg path (or "lines.0.code") → source type
    bound: set[str] = field(default_factory=set)  # contract arg paths whose from/const took effect
    fingerprint: str = ""
    idempotency_key: str | None = None

    @property
    def is_write(self) -> bool:
        return self.contract is not None and self.contract.is_write

    @property
    def label(self) -> str:
        return (self.contract.label if self.contract else None) or self.tool

    def observation(self, ok: bool, content: Any, **extra: Any) -> Observation:
        return Observation(
            tool=self.tool,
            arguments=self.raw_arguments,
            ok=ok,
            content=content,
            sources=dict(self.sources),
            call_id=self.call_id,
            **extra,
        )

    def refuse(self, code: ErrorCode | str, message: str, next_step: str, **extra: Any) -> Observation:
        """A refusal the model reads: the full ``agent_runtime.NNNNN`` code (or a business code) and the next step."""
        return self.observation(False, message, code=str(code), next_step=next_step, **extra)
