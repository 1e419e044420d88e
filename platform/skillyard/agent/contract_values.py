"""Typed reads of contract attributes under the §19 rules, and the problem values every check reports.

An absent key, ``null`` and ``""`` mean "not configured"; a value of the wrong JSON type is a ``§19`` problem;
an illegal enum value is a ``§16.13`` problem. Problems are collected, never raised one by one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from ..errors import SkillyardError
from .contract import EntitySpec, SourceType
from .expressions import PLATFORM_FIELDS, Expression, ExpressionError, Prefix, parse_expression

E = TypeVar("E", bound=StrEnum)
_IDENT = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class ContractIssue:
    """One problem (or warning) of a contract: which skill, which rule, where in the JSON, and what to do."""

    skill_key: str
    rule: str
    path: str
    message: str

    def __str__(self) -> str:
        where = f" at {self.path}" if self.path else ""
        return f"skill {self.skill_key!r}{where} ({self.rule}): {self.message}"


class ContractError(SkillyardError):
    """A contract that fails §16/§19/§11; ``problems`` holds every problem found (never just the first)."""

    def __init__(self, skill_key: str, problems: list[ContractIssue]) -> None:
        self.skill_key = skill_key
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"the contract of skill {skill_key!r} has {len(problems)} problem(s):\n{lines}")

    @property
    def rule(self) -> str:
        """The rule of the first problem."""
        return self.problems[0].rule

    @property
    def path(self) -> str:
        """The JSON path of the first problem."""
        return self.problems[0].path

    @property
    def message(self) -> str:
        """The message of the first problem."""
        return self.problems[0].message


def json_path(base: str, key: str) -> str:
    """``base.key``, or ``base["key"]`` when the key is not a plain name (``args["lines[].code"]``)."""
    if not _IDENT.match(key):
        return f"{base}[{json.dumps(key, ensure_ascii=False)}]"
    return f"{base}.{key}" if base else key


def is_unset(value: Any) -> bool:
    """§19: an absent key, ``null`` and the empty string all mean "not configured"."""
    return value is None or (isinstance(value, str) and not value.strip())


def type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(value), type(value).__name__
    )


class ContractReader:
    """Typed reads that collect problems and warnings for one skill; the contract walk builds on it."""

    def __init__(self, skill_key: str, open_fields: frozenset[str] = frozenset(PLATFORM_FIELDS)) -> None:
        self.skill_key = skill_key
        self.open_fields = open_fields
        self.problems: list[ContractIssue] = []
        self.warnings: list[ContractIssue] = []

    def fail(self, rule: str, path: str, message: str) -> None:
        self.problems.append(ContractIssue(self.skill_key, rule, path, message))

    def warn(self, rule: str, path: str, message: str) -> None:
        self.warnings.append(ContractIssue(self.skill_key, rule, path, message))

    # typed reads -------------------------------------------------------------------------------------------
    def text(self, node: Mapping[str, Any], key: str, path: str) -> str | None:
        value = node.get(key)
        if is_unset(value):
            return None
        if not isinstance(value, str):
            self.fail("§19", json_path(path, key), f"must be a string, not {type_name(value)}")
            return None
        return value.strip()

    def boolean(self, node: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
        value = node.get(key)
        if is_unset(value):
            return default
        if not isinstance(value, bool):
            self.fail("§19", json_path(path, key), f"must be true or false, not {value!r}")
            return default
        return value

    def integer(self, node: Mapping[str, Any], key: str, path: str, default: int) -> int:
        value = node.get(key)
        if is_unset(value):
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail("§19", json_path(path, key), f"must be a whole number, not {value!r}")
            return default
        return value

    def enum(self, node: Mapping[str, Any], key: str, path: str, cls: type[E], default: E | None) -> E | None:
        value = node.get(key)
        if is_unset(value):
            return default
        return self.enum_value(value, json_path(path, key), cls) or default

    def enum_value(self, value: Any, path: str, cls: type[E]) -> E | None:
        allowed = [m.value for m in cls]
        if isinstance(value, str) and value in allowed:
            return cls(value)
        hint = ""
        if isinstance(value, str) and value.strip().upper() in allowed:
            hint = f" (enum values are case-sensitive: write {value.strip().upper()!r})"
        self.fail("§16.13", path, f"{value!r} is not one of {', '.join(allowed)}{hint}")
        return None

    def mapping(self, node: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
        value = node.get(key)
        if value is None or value == "":
            return {}
        if not isinstance(value, Mapping):
            self.fail("§19", json_path(path, key), f"must be an object, not {type_name(value)}")
            return {}
        return value

    def array(self, node: Mapping[str, Any], key: str, path: str) -> list[Any]:
        value = node.get(key)
        if value is None or value == "":
            return []
        if not isinstance(value, list):
            self.fail("§19", json_path(path, key), f"must be an array, not {type_name(value)}")
            return []
        return value

    def strings(self, node: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
        out = []
        for i, item in enumerate(self.array(node, key, path)):
            if is_unset(item):
                continue
            if not isinstance(item, str):
                self.fail("§19", f"{json_path(path, key)}[{i}]", f"must be a string, not {type_name(item)}")
            else:
                out.append(item.strip())
        return tuple(out)

    def sources(self, node: Mapping[str, Any], path: str) -> tuple[SourceType, ...]:
        out = []
        for i, item in enumerate(self.array(node, "sources", path)):
            if is_unset(item):
                continue
            found = self.enum_value(item, f"{json_path(path, 'sources')}[{i}]", SourceType)
            if found is not None:
                out.append(found)
        return tuple(dict.fromkeys(out))

    def expression(self, text: str | None, path: str, *, allow_call: bool = False) -> Expression | None:
        if text is None:
            return None
        try:
            expr = parse_expression(text, allow_call=allow_call)
        except ExpressionError as exc:
            self.fail("§16.2" if not allow_call else "§6.4", path, str(exc))
            return None
        if expr.prefix is Prefix.PLATFORM and expr.head not in self.open_fields:
            self.fail(
                "§16.10",
                path,
                f"platform field {expr.head!r} is not open; use one of {', '.join(sorted(self.open_fields))} "
                "(the [agent] platform_hidden setting lists the closed ones)",
            )
            return None
        return expr

    def entity(self, node: Mapping[str, Any], path: str) -> EntitySpec | None:
        raw = self.mapping(node, "entity", path)
        if not raw:
            return None
        where = json_path(path, "entity")
        kind = self.text(raw, "type", where)
        if kind is None:
            self.fail("§6.3", json_path(where, "type"), 'an entity needs a \'type\', e.g. "type": "article"')
            return None
        return EntitySpec(
            type=kind,
            id=self.text(raw, "id", where) or "id",
            name=self.text(raw, "name", where) or "name",
            scalar=self.text(raw, "scalar", where),
        )
