"""``read_skill_file``: the rest of a long manual (the prompt shows only its first 8,000 characters).

Offered when the node's manual is longer than the prompt shows (a skill_md sub-agent's SKILL.md, or a long contract
skill manual); it reads files inside that skill's folder only, through ``SkillYard.read_skill_file`` (40,000
characters per call, ``next_offset`` to continue).
"""

from __future__ import annotations

from ...errors import SkillyardError
from ..codes import ErrorCode
from ..context import NodeContext
from ..prompt import MANUAL_HEAD_CHARS
from ..state import Observation
from .tool import Builtin, Call, JsonObject, params, text_arg

READ_SKILL_FILE = "read_skill_file"


def offered(ctx: NodeContext) -> bool:
    return ctx.skill.skill is not None and len(ctx.skill.manual) > MANUAL_HEAD_CHARS


async def read_skill_file(ctx: NodeContext, args: JsonObject, call: Call) -> Observation:
    path = text_arg(args, "path") or "SKILL.md"
    offset = args.get("offset") or 0
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        return call.refuse(
            ErrorCode.ARG_REJECTED, f"offset must be a whole number ≥ 0, not {offset!r}", "pass offset=0"
        )
    try:
        return call.ok(ctx.yard.read_skill_file(ctx.skill.name, path, offset))
    except SkillyardError as exc:
        return call.refuse(ErrorCode.ARG_REJECTED, str(exc), "read SKILL.md, or a file the manual names")


READ_SKILL_FILE_TOOL = Builtin(
    READ_SKILL_FILE,
    "Read the skill's manual (SKILL.md) or another file of the skill's folder, from an offset.",
    params({"path": {"type": "string"}, "offset": {"type": "integer"}}),
    read_skill_file,
)
