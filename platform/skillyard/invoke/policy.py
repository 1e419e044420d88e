"""How a run is held: for a conversation (the default), or unattended, as a chain step is (§7.7, §8, §9.3)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunPolicy:
    """What the caller decides about a run, beyond its input and context.

    ``chat_mode`` and ``channel`` override the context's (§7.7: a chain sets ``chat_mode=False``, so a large delete
    does not wait for a confirmation token nobody can send). ``background=False`` runs an ``async: true`` skill in
    the foreground (§8: a chain is already in the background); ``offload=False`` keeps a large result whole (offload
    applies where a result is shown to a model, a chain's later steps read the full envelope). ``detached=True``
    is the background run itself (§8): no default wall clock, and nothing of the live request (no
    ``channel_registry``, no ``abort_signal``).
    """

    chat_mode: bool | None = None
    channel: str | None = None
    background: bool = True
    offload: bool = True
    detached: bool = False

    @classmethod
    def unattended(cls, channel: str = "schedule") -> RunPolicy:
        """The policy of a chain step: no chat, no background, no offload."""
        return cls(chat_mode=False, channel=channel, background=False, offload=False)


#: Runs without a policy of their own.
DEFAULT_POLICY = RunPolicy()
#: An async skill's background run, wherever its job runs.
DETACHED = RunPolicy(background=False, detached=True)
