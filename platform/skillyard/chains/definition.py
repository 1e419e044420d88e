"""A chain file (§9.3): a named list of skill steps with an owner's role and identity, checked before it is stored.

Every problem is collected and named by its place (``steps[1] save: input.records: …``), so ``chain add`` answers
all of them at once and stores nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..catalog.yaml12 import TooLarge, compose, loader_for
from ..errors import SkillyardError
from ..invoke.context import ACTOR_KEYS
from .references import BadReference, string_references, strings

MAX_FILE_BYTES = 1_000_000
MAX_STEPS = 100
NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}\Z")
STEP_ID = re.compile(r"\A[A-Za-z_][A-Za-z0-9_\-]{0,63}\Z")
#: The owner's pass-through identity (§4.2, §4.3): the fields a step's runtime_context takes from the chain.
IDENTITY_KEYS = frozenset(
    {*ACTOR_KEYS, "actor_id", "actor_is_admin", "org_id", "team_id", "team_role", "user_id", "is_admin"}
)
TOP_KEYS = frozenset({"name", "description", "role_id", "identity", "steps", "timeout_s"})
STEP_KEYS = frozenset({"id", "skill", "input", "retry", "timeout_s", "allow_empty"})
MAX_RETRIES = 10
MAX_BACKOFF_S = 3600.0
MAX_TIMEOUT_S = 7 * 24 * 3600.0


class ChainInvalid(SkillyardError):
    """A chain file with problems; ``problems`` lists each, named by its place."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"{source}: " + ("; ".join(problems) if len(problems) == 1 else f"{len(problems)} problems"))


@dataclass(frozen=True)
class Retry:
    """Retries of transient failures: ``max`` retries after the first attempt, the n-th after backoff_s * 2**(n-1)."""

    max: int = 3
    backoff_s: float = 2.0

    def delay(self, retry: int) -> float:
        return float(self.backoff_s * 2 ** (retry - 1))


@dataclass(frozen=True)
class Step:
    id: str
    skill: str
    input: dict[str, Any]
    retry: Retry = field(default_factory=Retry)
    timeout_s: float | None = None
    allow_empty: bool = False

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "skill": self.skill, "input": self.input}
        data["retry"] = {"max": self.retry.max, "backoff_s": self.retry.backoff_s}
        if self.timeout_s is not None:
            data["timeout_s"] = self.timeout_s
        if self.allow_empty:
            data["allow_empty"] = True
        return data


@dataclass(frozen=True)
class Chain:
    name: str
    steps: tuple[Step, ...]
    description: str = ""
    role_id: str = ""
    identity: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None

    def step(self, step_id: str) -> Step:
        return next(s for s in self.steps if s.id == step_id)

    def after(self, step_id: str) -> Step | None:
        """The step that follows ``step_id``, or None after the last."""
        ids = [s.id for s in self.steps]
        position = ids.index(step_id) + 1
        return self.steps[position] if position < len(self.steps) else None

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "role_id": self.role_id,
            "identity": self.identity,
            "steps": [s.as_json() for s in self.steps],
        }
        if self.timeout_s is not None:
            data["timeout_s"] = self.timeout_s
        return data


def read_chain_file(text: str, source: str, skill_exists: Callable[[str], bool]) -> Chain:
    """Parse and check a chain file's YAML text; ChainInvalid with every problem found."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise ChainInvalid(source, [f"the file is larger than {MAX_FILE_BYTES:,} bytes; split the chain"])
    notes: list[str] = []
    try:
        data = compose(text, notes, loader_for(text))
    except TooLarge as exc:  # the loader is the skills' frontmatter loader, and says so
        raise ChainInvalid(source, [str(exc).replace("the frontmatter", "the chain file")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ChainInvalid(source, [f"not valid YAML{where}: {problem}"]) from None
    twice = [n.split(" in the frontmatter")[0] + "; keep one" for n in notes if "appears twice" in n]
    try:
        chain = parse_chain(data, source, skill_exists)
    except ChainInvalid as exc:
        raise ChainInvalid(source, twice + exc.problems) from None
    if twice:
        raise ChainInvalid(source, twice)
    return chain


def parse_chain(data: Any, source: str, skill_exists: Callable[[str], bool]) -> Chain:
    """A Chain from its JSON form (a parsed file or a stored definition); ChainInvalid with every problem."""
    problems: list[str] = []
    if not isinstance(data, Mapping):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise ChainInvalid(source, [f"a chain file is a YAML mapping with name and steps, this one is {kind}"])
    for key in sorted(set(data) - TOP_KEYS):
        problems.append(f"unknown key {key!r} (a chain has {', '.join(sorted(TOP_KEYS))})")
    name = data.get("name")
    if not isinstance(name, str) or not NAME.match(name):
        problems.append(
            f"name must be 1-128 letters, digits, '_', '-' or '.', starting with a letter or digit; got {name!r}"
        )
    description = _text(data, "description", problems)
    role_id = _text(data, "role_id", problems)
    identity = data.get("identity")
    identity = {} if identity is None else identity
    if not isinstance(identity, Mapping):
        problems.append(f"identity must be a mapping such as {{org_id: acme, team_role: owner}}, not {identity!r}")
        identity = {}
    for key in sorted(set(identity) - IDENTITY_KEYS):
        problems.append(f"identity.{key} is not an identity field (use {', '.join(sorted(IDENTITY_KEYS))})")
    timeout = _timeout(data, "timeout_s", problems)
    steps = _steps(data.get("steps"), skill_exists, problems)
    if problems:
        raise ChainInvalid(source, problems)
    assert isinstance(name, str)
    return Chain(name, tuple(steps), description, role_id, dict(identity), timeout)


def _text(data: Mapping[str, Any], key: str, problems: list[str], where: str = "") -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        problems.append(f"{where}{key} must be text, not {type(value).__name__}")
        return ""
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _timeout(data: Mapping[str, Any], key: str, problems: list[str], where: str = "") -> float | None:
    if data.get(key) is None:
        return None
    seconds = _number(data[key])
    if seconds is None or not 0 < seconds <= MAX_TIMEOUT_S:
        problems.append(
            f"{where}{key} must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, got {data[key]!r}"
        )
        return None
    return seconds


def _retry(value: Any, where: str, problems: list[str]) -> Retry:
    if value is None:
        return Retry()
    if not isinstance(value, Mapping) or set(value) - {"max", "backoff_s"}:
        problems.append(f"{where}retry must be a mapping of max and backoff_s, such as {{max: 3, backoff_s: 2}}")
        return Retry()
    retries = value.get("max", Retry.max)
    backoff = _number(value.get("backoff_s", Retry.backoff_s))
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= MAX_RETRIES:
        problems.append(f"{where}retry.max must be a whole number from 0 to {MAX_RETRIES}, got {retries!r}")
        retries = Retry.max
    if backoff is None or not 0 <= backoff <= MAX_BACKOFF_S:
        problems.append(
            f"{where}retry.backoff_s must be seconds from 0 to {MAX_BACKOFF_S:g}, got {value.get('backoff_s')!r}"
        )
        backoff = Retry.backoff_s
    return Retry(retries, backoff)


def _steps(value: Any, skill_exists: Callable[[str], bool], problems: list[str]) -> list[Step]:
    if not isinstance(value, list) or not value:
        problems.append("steps must be a non-empty list of {id, skill, input}")
        return []
    if len(value) > MAX_STEPS:
        problems.append(f"a chain has at most {MAX_STEPS} steps, this one has {len(value)}")
        return []
    steps: list[Step] = []
    seen: list[str] = []
    for position, raw in enumerate(value):
        where = f"steps[{position}]"
        if not isinstance(raw, Mapping):
            problems.append(f"{where} must be a mapping with id, skill and input")
            continue
        step_id = raw.get("id")
        if isinstance(step_id, str) and STEP_ID.match(step_id):
            where = f"{where} {step_id}"
        else:
            problems.append(
                f"{where}: id must be 1-64 letters, digits, '_' or '-', starting with a letter or '_'; got {step_id!r}"
            )
            step_id = None
        for key in sorted(set(raw) - STEP_KEYS):
            problems.append(f"{where}: unknown key {key!r} (a step has {', '.join(sorted(STEP_KEYS))})")
        if step_id is not None and step_id in seen:
            problems.append(f"{where}: the step id {step_id!r} is used twice; give each step its own id")
        skill = raw.get("skill")
        if not isinstance(skill, str) or not skill.strip():
            problems.append(f"{where}: skill must name a skill, got {skill!r}")
        elif not skill_exists(skill):
            problems.append(f"{where}: no skill named {skill!r} (see `skillyard list`, or pass its --skills-dir)")
        step_input = raw.get("input")
        step_input = {} if step_input is None else step_input
        if not isinstance(step_input, Mapping):
            problems.append(
                f"{where}: input must be a mapping of the skill's parameters, not {type(step_input).__name__}"
            )
            step_input = {}
        _check_references(step_input, seen, f"{where}: ", problems)
        allow_empty = raw.get("allow_empty", False)
        if not isinstance(allow_empty, bool):
            problems.append(f"{where}: allow_empty must be true or false, got {allow_empty!r}")
            allow_empty = False
        retry = _retry(raw.get("retry"), f"{where}: ", problems)
        timeout = _timeout(raw, "timeout_s", problems, f"{where}: ")
        if step_id is not None:
            seen.append(step_id)
            steps.append(Step(step_id, str(skill), dict(step_input), retry, timeout, allow_empty))
    return steps


def _check_references(step_input: Mapping[str, Any], earlier: list[str], where: str, problems: list[str]) -> None:
    for place, text in strings(step_input):
        try:
            found = string_references(text, place)
        except BadReference as exc:
            problems.append(f"{where}{exc}")
            continue
        for ref in found:
            if ref.step is not None and ref.step not in earlier:
                named = f"earlier steps: {', '.join(earlier)}" if earlier else "it is the first step"
                problems.append(f"{where}{place}: {{{{ {ref.text} }}}} names no earlier step ({named})")
