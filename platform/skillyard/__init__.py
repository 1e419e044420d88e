"""skillyard: a plugin-host skill platform. Drop skill folders in; run them from the CLI, Python or an agent.

The public names load on first use (:mod:`skillyard.lazy`), so ``skillyard --version`` and a plugin's
``import skillyard`` do not pay for the database and HTTP stacks behind :class:`SkillYard`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports

if TYPE_CHECKING:
    from .catalog.skill import Skill
    from .credentials import mask_secrets, masked_logger
    from .errors import (
        CredentialNotInInput,
        InvalidInput,
        SkillyardError,
        StorageError,
        UnknownExecType,
        UnknownSkill,
    )
    from .hookspecs import hookimpl
    from .invoke.budget import Turn
    from .invoke.identity import (
        current_department,
        department_path,
        identity_org_id,
    )
    from .invoke.policy import RunPolicy
    from .outputs.address_guard import RefusedDestination, checked_addresses, private_hosts_allowed
    from .outputs.safe_write import (
        UnsafePath,
        safe_write,
    )
    from .yard import SkillYard

_EXPORTS = {
    "CredentialNotInInput": ".errors",
    "InvalidInput": ".errors",
    "RefusedDestination": ".outputs.address_guard",
    "RunPolicy": ".invoke.policy",
    "Skill": ".catalog.skill",
    "SkillYard": ".yard",
    "SkillyardError": ".errors",
    "StorageError": ".errors",
    "Turn": ".invoke.budget",
    "UnknownExecType": ".errors",
    "UnknownSkill": ".errors",
    "UnsafePath": ".outputs.safe_write",
    "checked_addresses": ".outputs.address_guard",
    "current_department": ".invoke.identity",
    "department_path": ".invoke.identity",
    "hookimpl": ".hookspecs",
    "identity_org_id": ".invoke.identity",
    "mask_secrets": ".credentials",
    "masked_logger": ".credentials",
    "private_hosts_allowed": ".outputs.address_guard",
    "safe_write": ".outputs.safe_write",
}
__all__ = [
    "CredentialNotInInput",
    "InvalidInput",
    "RefusedDestination",
    "RunPolicy",
    "Skill",
    "SkillYard",
    "SkillyardError",
    "StorageError",
    "Turn",
    "UnknownExecType",
    "UnknownSkill",
    "UnsafePath",
    "checked_addresses",
    "current_department",
    "department_path",
    "hookimpl",
    "identity_org_id",
    "mask_secrets",
    "masked_logger",
    "private_hosts_allowed",
    "safe_write",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
