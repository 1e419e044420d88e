"""§6.3 step 3: a top-level run's registered artifacts are sent to the conversation it came from (``reply_to``), by
media (``send_image`` / ``send_video`` / ``send_file``), once each; the envelope's ``delivery`` field says how it
went: ``{sent: [ref…], failed: [{ref, error}]}``.

Rich channels (web, web_admin) show artifacts themselves, so nothing is sent there (their runs only record which
organisation the web session belongs to, for the web channel's recipients). An agent turn's tool calls carry
:data:`DEFER_KEY` (the node's id): their artifacts are collected and sent once, when the turn ends
(:meth:`ArtifactDelivery.flush`). A background run's files go with its result (``ChannelRegistry.deliver``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..credentials import masked_logger
from ..outputs.artifacts import declared_artifacts
from ..outputs.display import RICH_CHANNELS
from .adapter import OutgoingMessage
from .address import Address
from .outgoing import outgoing_files
from .web import claim_session

if TYPE_CHECKING:
    from ..invoke.run import Run
    from .registry import ChannelRegistry

log = masked_logger("skillyard.channels")
#: The context key of an agent turn's tool calls: their artifacts wait for the end of the turn named by its value.
DEFER_KEY = "_deliver_at_turn_end"
#: The order of the delivery processor: after artifacts are registered and collected, before offload.
DELIVER = 350


@dataclass
class _Batch:
    context: dict[str, Any]
    address: Address
    items: dict[str, dict[str, Any]] = field(default_factory=dict)  # by ref, so each is sent once


class ArtifactDelivery:
    """Artifacts waiting for the end of an agent turn, by turn (``DEFER_KEY``'s value)."""

    def __init__(self, registry: ChannelRegistry) -> None:
        self._registry = registry
        self._batches: dict[str, _Batch] = {}
        self._claimed: set[tuple[str, str]] = set()

    async def after_run(self, envelope: dict[str, Any], run: Run) -> dict[str, Any]:
        """The result processor (see the module docstring)."""
        ctx = run.context
        if ctx.get("channel") in RICH_CHANNELS:
            await self._claim(str(ctx.get("session_id") or ""), str(ctx.get("org_id") or ""))
            return envelope
        if run.policy.detached:
            return envelope
        address = self._registry.conversation(ctx)
        if address is None or address.channel in RICH_CHANNELS:
            return envelope
        items = {str(item["ref"]): item for item, _ in declared_artifacts(envelope) if item.get("ref")}
        if not items:
            return envelope
        batch_id = ctx.get(DEFER_KEY)
        if isinstance(batch_id, str) and batch_id:
            batch = self._batches.setdefault(batch_id, _Batch(_conversation(ctx), address))
            for ref, item in items.items():
                batch.items.setdefault(ref, dict(item))
            return envelope
        envelope["delivery"] = await self.send(_conversation(ctx), address, list(items.values()))
        return envelope

    async def flush(self, batch_id: str) -> dict[str, Any] | None:
        """Send what a turn's tool calls produced (once each); the ``delivery`` report, None when nothing waited."""
        batch = self._batches.pop(batch_id, None)
        if batch is None:
            return None
        return await self.send(batch.context, batch.address, list(batch.items.values()))

    async def send(self, context: Mapping[str, Any], address: Address, items: list[dict[str, Any]]) -> dict[str, Any]:
        """Send each artifact as its own message (so each has its own outcome), in order."""
        sent: list[str] = []
        failed: list[dict[str, str]] = []
        for item in items:
            ref = str(item.get("ref") or item.get("filename") or "")
            files = outgoing_files([item])
            if not files:
                failed.append({"ref": ref, "error": "the file no longer exists in the workspace"})
                continue
            message = OutgoingMessage(files=tuple(files))
            problems = self._registry.problems([address], message)
            if problems:
                failed.append({"ref": ref, "error": problems[0][1]})
                continue
            [outcome] = await self._registry.send(
                [address],
                message,
                role_id=str(context.get("role_id") or ""),
                org_id=str(context.get("org_id") or ""),
                conversation=context,
            )
            if outcome.error is None:
                sent.append(ref)
            else:
                failed.append({"ref": ref, "error": str(outcome.error)})
        if failed:
            log.warning("%d of %d artifact(s) were not delivered to %s", len(failed), len(items), address)
        return {"sent": sent, "failed": failed}

    async def _claim(self, session_id: str, org_id: str) -> None:
        """Record the organisation of a web session once per process (the web channel checks it); a host that has
        no database yet does not make one for it (a web run needs none)."""
        database = self._registry.yard.database
        if not session_id or (session_id, org_id) in self._claimed or not database.exists:
            return
        await claim_session(database, session_id, org_id)
        self._claimed.add((session_id, org_id))


def _conversation(ctx: Mapping[str, Any]) -> dict[str, Any]:
    return {k: ctx.get(k) for k in ("role_id", "org_id", "session_id", "user_id", "actor_id", "reply_to", "channel")}
