"""The datatable skill's permission error (spec §7.2): :class:`PermissionDenied`.

Errors are :class:`PermissionDenied` (a ``StoreError`` of store/schema.py): ``error_type="config"`` and
non-retriable for setup problems the model cannot fix; the message says who can (an admin, with ``skillyard datatable
grant``).

Built-in skills use only their own folder and public libraries: nothing here imports SkillYard.
"""

from __future__ import annotations

from typing import Any

from ..store.schema import StoreError

__all__ = ["PermissionDenied"]


class PermissionDenied(StoreError):
    """A permission setting is wrong or missing, or an action was refused by one; an admin fixes it."""

    def __init__(self, message: str, *, error_type: str = "config", non_retriable: bool = True, **kw: Any) -> None:
        super().__init__(message, error_type=error_type, non_retriable=non_retriable, **kw)
