"""``actor_department_path`` from a department tree, exactly as spec §4.5 says."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..invoke.identity import MAX_DEPARTMENT_DEPTH, department_path


@dataclass(frozen=True)
class Department:
    name: str
    parent: str = ""
    disabled: bool = False


def path_for(dept_id: str, tree: Mapping[str, Department]) -> tuple[str, str]:
    """``(actor_department, actor_department_path)`` of a person whose department is ``dept_id``.

    The path runs from the top department to the person's own, without the organisation's name; disabled
    departments stay in it (the chain must not break in the middle). A department missing from the tree becomes
    the single segment ``/<dept_id>/``; no department gives ``("", "")``. Walking up stops at a department seen
    before (a cycle in dirty data is cut, not looped) and at a parent missing from the tree; more than 20 levels
    are cut from the top.
    """
    if not dept_id:
        return "", ""
    own = tree.get(dept_id)
    if own is None:
        return dept_id, department_path([dept_id])
    chain: list[str] = []
    seen: set[str] = set()
    current = dept_id
    while current and current not in seen and current in tree:
        seen.add(current)
        chain.append(tree[current].name)
        current = tree[current].parent
    chain.reverse()
    return own.name, department_path(chain[-MAX_DEPARTMENT_DEPTH:])
