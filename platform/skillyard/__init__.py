"""skillyard: a plugin-host skill platform. Drop skill folders in; run them from the CLI, Python or an agent."""

from .catalog.skill import Skill
from .errors import InvalidInput, SkillyardError, StorageError, UnknownExecType, UnknownSkill
from .hookspecs import hookimpl
from .invoke.budget import Turn
from .invoke.identity import current_department, department_path, identity_org_id
from .outputs.safe_write import UnsafePath, safe_write
from .yard import SkillYard

__all__ = [
    "InvalidInput",
    "Skill",
    "SkillYard",
    "SkillyardError",
    "StorageError",
    "Turn",
    "UnknownExecType",
    "UnknownSkill",
    "UnsafePath",
    "current_department",
    "department_path",
    "hookimpl",
    "identity_org_id",
    "safe_write",
]
