"""Reading a directory import file (CSV or JSON Lines) and checking it against what the directory holds.

Every record names its kind (a ``kind`` column or field, or ``--kind`` for a file of one kind): ``department``
(``id``, ``name``, ``parent``, ``disabled``), ``person`` (``emp_no``, ``name``, ``department``, ``position``,
``title``, ``phone``, ``email``, ``tags``, ``actor_key``, ``actor_id``, ``active``) or ``account`` (``channel``,
``account``, ``emp_no``). Every problem is reported with its line and the fix; a file with any problem writes nothing.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..catalog.requires import as_bool
from ..errors import SkillyardError
from .paths import Department

MAX_BYTES = 64 * 1024 * 1024
MAX_RECORDS = 200_000
MAX_VALUE = 1000  # characters of one field
FIELDS: dict[str, tuple[str, ...]] = {
    "department": ("id", "name", "parent", "disabled"),
    "person": (
        "emp_no",
        "name",
        "department",
        "position",
        "title",
        "phone",
        "email",
        "tags",
        "actor_key",
        "actor_id",
        "active",
    ),
    "account": ("channel", "account", "emp_no"),
}
REQUIRED = {"department": ("id", "name"), "person": ("emp_no", "name"), "account": ("channel", "account", "emp_no")}
KIND_NAMES = {
    "department": "department",
    "departments": "department",
    "person": "person",
    "people": "person",
    "account": "account",
    "accounts": "account",
}
KEYS = {"department": ("id",), "person": ("emp_no",), "account": ("channel", "account")}


class ImportProblems(SkillyardError):
    """A file the directory cannot take; ``problems`` has one line (with its file line) per problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        shown = "; ".join(problems[:20]) + (f"; and {len(problems) - 20} more" if len(problems) > 20 else "")
        super().__init__(f"the import file has {len(problems)} problem(s), nothing was written: {shown}")


@dataclass(frozen=True)
class Record:
    kind: str
    line: int
    values: dict[str, Any]

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(self.values[k] for k in KEYS[self.kind])


@dataclass(frozen=True)
class Snapshot:
    """What the directory of one organisation holds now."""

    departments: Mapping[str, Department] = field(default_factory=dict)
    people: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    accounts: Mapping[tuple[str, str], str] = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    action: str  # add | update | same
    kind: str
    key: str
    fields: tuple[str, ...] = ()  # what an update changes
    record: Record | None = None


@dataclass
class Plan:
    changes: list[Change]
    warnings: list[str]

    def counts(self) -> dict[str, int]:
        out = {"add": 0, "update": 0, "same": 0}
        for change in self.changes:
            out[change.action] += 1
        return out


def read_records(path: Path, kind: str | None = None) -> list[Record]:
    """Every record of the file, typed; raises :class:`ImportProblems` naming each bad line."""
    default = _kind(kind, 0) if kind else None
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ImportProblems([f"{path}: {size:,} bytes, more than {MAX_BYTES:,}; split it into smaller files"])
        raw = path.read_bytes()
    except OSError as exc:
        raise ImportProblems([f"{path}: cannot read it ({exc.strerror})"]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ImportProblems([f"line {line}: not UTF-8 text (byte {exc.start}); save the file as UTF-8"]) from None
    problems: list[str] = []
    records: list[Record] = []
    rows = _json_lines(text, problems) if _is_json_lines(path, text) else _csv_rows(text, problems)
    for line, row in rows:
        if len(records) >= MAX_RECORDS:
            problems.append(f"line {line}: more than {MAX_RECORDS:,} records; split the file")
            break
        record = _record(line, row, default, problems)
        if record is not None:
            records.append(record)
    if problems:
        raise ImportProblems(problems)
    return records


def _is_json_lines(path: Path, text: str) -> bool:
    if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        return True
    if path.suffix.lower() == ".csv":
        return False
    return text.lstrip().startswith("{")


def _json_lines(text: str, problems: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in enumerate(text.split("\n"), 1):  # not splitlines(): U+2028 is valid inside a JSON string
        if not line.strip():
            continue
        try:
            row = json.loads(line, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
        except json.JSONDecodeError as exc:
            problems.append(f"line {number}: not JSON ({exc.msg}); write one JSON object a line")
            continue
        except RecursionError:
            problems.append(f"line {number}: JSON nested too deeply; write flat objects")
            continue
        except ValueError as exc:  # a key given twice, NaN or Infinity
            problems.append(f"line {number}: {exc}")
            continue
        if not isinstance(row, dict):
            problems.append(f"line {number}: a JSON {type(row).__name__}, not an object; write one object a line")
            continue
        yield number, row


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise ValueError(f"key(s) {', '.join(map(repr, twice))} given twice in one object; keep one")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a value the directory takes; write a number or a text")


def _csv_rows(text: str, problems: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        problems.append("line 1: no header row; start the file with the column names")
        return
    header = [h.strip() for h in header]
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        problems.append(f"line 1: column(s) {', '.join(map(repr, twice))} twice; keep one of each")
        return
    known = {"kind", *(f for fields in FIELDS.values() for f in fields)}
    unknown = [h for h in header if h not in known]
    if unknown:
        problems.append(
            f"line 1: unknown column(s) {', '.join(map(repr, unknown))}; the columns are kind and "
            f"{', '.join(sorted(known - {'kind'}))}"
        )
        return
    try:
        for row in reader:
            number = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(header):
                problems.append(f"line {number}: {len(row)} cells for {len(header)} columns; fix the row's commas")
                continue
            yield number, {h: cell for h, cell in zip(header, row, strict=True) if cell.strip()}
    except csv.Error as exc:
        problems.append(f"line {reader.line_num}: {exc}; fix the quoting")


def _kind(value: object, line: int) -> str:
    kind = KIND_NAMES.get(str(value).strip().lower()) if isinstance(value, str) else None
    if kind is None:
        where = f"line {line}: " if line else ""
        raise ImportProblems([f"{where}kind {value!r} is not department, person or account"])
    return kind


def _record(line: int, row: dict[str, Any], default: str | None, problems: list[str]) -> Record | None:
    raw_kind = row.pop("kind") if "kind" in row else default
    if raw_kind is None:
        problems.append(f"line {line}: no kind; add a kind column (department, person or account) or pass --kind")
        return None
    try:
        kind = _kind(raw_kind, line)
    except ImportProblems as exc:
        problems.extend(exc.problems)
        return None
    unknown = [k for k in row if k not in FIELDS[kind]]
    if unknown:
        problems.append(
            f"line {line}: {kind} has no field(s) {', '.join(map(repr, unknown))}; its fields are "
            f"{', '.join(FIELDS[kind])}"
        )
        return None
    values: dict[str, Any] = {}
    for name in FIELDS[kind]:
        value = row.get(name)
        try:
            values[name] = _typed(name, value)
        except ValueError as exc:
            problems.append(f"line {line}: {kind} {name}: {exc}")
            return None
    missing = [n for n in REQUIRED[kind] if not values[n]]
    if missing:
        problems.append(f"line {line}: {kind} without {', '.join(missing)}; fill it in")
        return None
    return Record(kind, line, values)


def _typed(name: str, value: Any) -> Any:
    if name in ("disabled", "active"):
        if value is None or value == "":
            return name == "active"
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("1", "0", "true", "false", "yes", "no", "y", "n"):
            return as_bool(value.strip())
        raise ValueError(f"{value!r} is not true or false")
    if name == "tags":
        if value is None:
            return []
        items = value.replace(";", ",").split(",") if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ValueError("write a list of texts (JSON) or texts separated by ; or , (CSV)")
        return [i.strip()[:MAX_VALUE] for i in items if i.strip()]
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"a {type(value).__name__}; write a text")
    text = str(value).strip()
    if "\x00" in text:
        raise ValueError("contains a NUL character; remove it")
    if len(text) > MAX_VALUE:
        raise ValueError(f"{len(text):,} characters, more than {MAX_VALUE:,}; shorten it")
    return text


def plan(records: list[Record], current: Snapshot) -> Plan:
    """Check the records against each other and the directory; the changes they make, or :class:`ImportProblems`."""
    problems: list[str] = []
    first: dict[tuple[str, tuple[str, ...]], int] = {}
    for record in records:
        seen = first.setdefault((record.kind, record.key), record.line)
        if seen != record.line:
            shown = "/".join(record.key)
            problems.append(
                f"line {record.line}: {record.kind} {shown!r} again (first on line {seen}); keep one row for it"
            )
    departments = dict(current.departments)
    dept_lines: dict[str, int] = {}
    for record in records:
        if record.kind == "department":
            v = record.values
            departments[v["id"]] = Department(v["name"], v["parent"], v["disabled"])
            dept_lines[v["id"]] = record.line
    for dept_id, line in dept_lines.items():
        parent = departments[dept_id].parent
        if parent and parent not in departments:
            problems.append(
                f"line {line}: department {dept_id!r} has parent {parent!r}, which is neither in the file nor in the "
                "directory; add that department or leave parent empty"
            )
    problems += _cycles(departments, dept_lines)
    people = set(current.people) | {r.values["emp_no"] for r in records if r.kind == "person"}
    warnings = []
    for record in records:
        if record.kind == "account" and record.values["emp_no"] not in people:
            problems.append(
                f"line {record.line}: account {record.values['channel']}/{record.values['account']} names person "
                f"{record.values['emp_no']!r}, who is neither in the file nor in the directory; add the person first"
            )
        dept = record.values.get("department") if record.kind == "person" else None
        if dept and dept not in departments:
            warnings.append(
                f"line {record.line}: person {record.values['emp_no']!r} is in department {dept!r}, which is not in "
                f"the tree: their path is /{dept}/"
            )
    if problems:
        raise ImportProblems(problems)
    return Plan([_change(r, current) for r in records], warnings)


def _cycles(departments: Mapping[str, Department], lines: Mapping[str, int]) -> list[str]:
    """One problem per cycle in the parent links that involves a department of the file."""
    problems = []
    reported: set[str] = set()
    for start in lines:
        chain: list[str] = []
        current = start
        while current and current in departments and current not in chain:
            chain.append(current)
            current = departments[current].parent
        if current in chain and current not in reported:
            loop = chain[chain.index(current) :]
            reported.update(loop)
            shown = " → ".join([*loop, current])
            line = min(lines.get(d, 10**9) for d in loop)
            problems.append(f"line {line}: departments {shown} form a cycle; fix the parent of one of them")
    return problems


def _change(record: Record, current: Snapshot) -> Change:
    v = record.values
    key = "/".join(record.key)
    if record.kind == "department":
        old_dept = current.departments.get(v["id"])
        if old_dept is None:
            return Change("add", "department", key, record=record)
        new = {"name": v["name"], "parent": v["parent"], "disabled": v["disabled"]}
        old = {"name": old_dept.name, "parent": old_dept.parent, "disabled": old_dept.disabled}
    elif record.kind == "person":
        old_person = current.people.get(v["emp_no"])
        if old_person is None:
            return Change("add", "person", key, record=record)
        new, old = v, {k: old_person.get(k) for k in v}
    else:
        owner = current.accounts.get((v["channel"], v["account"]))
        if owner is None:
            return Change("add", "account", key, record=record)
        new, old = {"emp_no": v["emp_no"]}, {"emp_no": owner}
    changed = tuple(k for k in new if new[k] != old.get(k))
    return Change("update" if changed else "same", record.kind, key, changed, record)
