"""The agent runtime's refusal of a call of its API (``send``, ``resume``, an event): :class:`AgentError`."""

from __future__ import annotations

from ..errors import SkillyardError


class AgentError(SkillyardError):
    """A send / resume that cannot be carried out (no open checkpoint, unknown skill …); the message says why."""
