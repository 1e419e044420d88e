"""The ``extra_context`` hook of the service: when a run belongs to the agent turn this task records
(:data:`.turns.CURRENT`, same session), its start is a ``tool`` progress event of that turn. It adds no keys.

Registered by the app when a service starts (not a default plugin): only a serving process pays for the hook.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from ..hookspecs import hookimpl
from .turns import CURRENT

PLUGIN_NAME = "skillyard.service.progress"


@hookimpl
def extra_context(skill: Any, context: dict[str, Any]) -> Awaitable[None] | None:
    recorder = CURRENT.get()
    if recorder is None or context.get("session_id") != recorder.session_id:
        return None
    return recorder.tool_started(skill.name)


def install(yard: Any) -> None:
    """Register this module with the yard's plugin manager (once) and make the pipeline call the hook."""
    import sys

    module = sys.modules[__name__]
    if not yard.pm.is_registered(module):
        yard.pm.register(module, name=PLUGIN_NAME)
    yard.registries.has_extra_context = True  # collected when the yard was made, before this plugin was added
