"""The BROWSER exec type: declared by the spec, not implemented yet; it answers a clear failure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..envelope import failure
from ..hookspecs import hookimpl

if TYPE_CHECKING:
    from ..catalog.skill import Skill


class NotSupportedExecutor:
    """Answers every run with a non-retriable failure naming the exec type."""

    def __init__(self, exec_type: str) -> None:
        self.exec_type = exec_type

    async def run(self, skill: Skill, input: dict[str, Any], ctx: dict[str, Any], *, yard: Any) -> Any:
        return failure(
            skill.name,
            f"exec type {self.exec_type} is not supported yet (skill {skill.name!r}); "
            "use PYTHON, a subprocess type or HTTP",
            error_type="config",
            non_retriable=True,
        )


@hookimpl
def register_exec_types(register: Any) -> None:
    register("BROWSER", NotSupportedExecutor("BROWSER"))
