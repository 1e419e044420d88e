"""Repairs for frontmatter YAML cannot read as written, each one reported as a note.

Values containing ``: `` are quoted first; then, step by step, the place YAML reports is fixed: tab indentation,
control characters, a ``---`` line inside a quoted value, or a value starting with a YAML indicator.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from .yaml12 import TooLarge, compose, yaml_problem

_KEY_LINE = re.compile(r"^(?P<indent>[ ]*)(?P<dash>- )?(?P<key>[A-Za-z0-9_.\-]+):[ \t]+(?P<value>\S.*)$")
_ITEM_LINE = re.compile(r"^(?P<indent>[ ]*)- (?P<value>\S.*)$")
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MAX_REPAIRS = 25


def repair_and_compose(text: str, first_error: yaml.YAMLError, notes: list[str]) -> Any:
    """Repair in steps until the text parses: quote values with ``: ``, then fix each place YAML points at."""
    repaired, colon_notes = quote_colon_values(text)
    error: yaml.YAMLError | None = first_error
    if colon_notes:
        text, error = repaired, None
        notes.extend(colon_notes)
    touched: set[int] = set()
    for _ in range(_MAX_REPAIRS):
        if error is None:
            extra: list[str] = []
            try:
                data = compose(text, extra)
            except TooLarge:
                raise
            except yaml.YAMLError as exc:
                error = exc
            else:
                notes.extend(extra)
                return data
        fixed = _repair_at_error(text, error, touched, notes)
        if fixed is None:
            break
        text, error = fixed, None
    return f"the frontmatter is not valid YAML: {yaml_problem(first_error)}"


def quote_colon_values(fm_text: str) -> tuple[str, list[str]]:
    """Quote plain scalars that contain ': ' (joining prettier-wrapped continuation lines first).

    Lines inside block scalars (``key: |`` / ``key: >``) are content and never touched.
    """
    lines = fm_text.split("\n")
    out: list[str] = []
    notes: list[str] = []
    i = 0
    while i < len(lines):
        m = _KEY_LINE.match(lines[i])
        value = m.group("value").rstrip() if m else ""
        if m and value[0] in "|>":
            indent = len(m.group("indent")) + (2 if m.group("dash") else 0)
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > indent):
                j += 1
            out.extend(lines[i:j])
            i = j
            continue
        if not m or value[0] in "\"'[{&*!%@`#":
            out.append(lines[i])
            i += 1
            continue
        indent = len(m.group("indent")) + (2 if m.group("dash") else 0)
        j, joined = _continued(lines, i, value, indent)
        if ": " in joined or joined.endswith(":"):
            out.append(f"{m.group('indent')}{m.group('dash') or ''}{m.group('key')}: {_single_quoted(joined)}")
            notes.append(f"repaired {m.group('key')!r}: its value contains ': ' and was not quoted")
            i = j
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out), notes


def _continued(lines: list[str], i: int, value: str, indent: int) -> tuple[int, str]:
    """A plain value and its continuation lines (deeper-indented, non-blank), joined with spaces."""
    parts = [value]
    j = i + 1
    # a key with a plain value cannot have children, so deeper lines continue the same scalar
    while j < len(lines) and lines[j].strip() and _indent(lines[j]) > indent:
        parts.append(lines[j].strip())
        j += 1
    return j, " ".join(parts)


def _single_quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _repair_at_error(text: str, error: yaml.YAMLError, touched: set[int], notes: list[str]) -> str | None:
    """One repair for the place YAML reports, or ``None`` when nothing safe can be done."""
    if isinstance(error, yaml.reader.ReaderError) or "special characters are not allowed" in str(error):
        cleaned = _NON_PRINTABLE.sub("", text)
        if cleaned != text:
            notes.append("removed control characters YAML does not allow from the frontmatter")
            return cleaned
        return None
    problem = str(getattr(error, "problem", "") or "")
    lines = text.split("\n")
    if "'\\t'" in problem and any(re.match(r"[ ]*\t", line) for line in lines):
        notes.append("replaced tab indentation in the frontmatter with spaces (YAML does not allow tabs)")
        return "\n".join(_untab(line) for line in lines)
    mark = getattr(error, "problem_mark", None)
    context_mark = getattr(error, "context_mark", None)
    if context_mark is not None and "end of stream" in problem:
        mark = context_mark  # an unterminated quote: the place it opened
    if mark is None or mark.line >= len(lines):
        return None
    if "document separator" in problem and getattr(error, "context", None) == "while scanning a quoted scalar":
        # a '---' line inside a quoted value: indenting it keeps the value (quoted lines are folded)
        if mark.line in touched:
            return None
        touched.add(mark.line)
        lines[mark.line] = "  " + lines[mark.line]
        notes.append("indented a '---' line inside a quoted value (YAML reads it as the end of the frontmatter)")
        return "\n".join(lines)
    owner = _owning_line(lines, mark.line)
    if owner is None or owner in touched:
        return None
    touched.add(owner)
    m = _KEY_LINE.match(lines[owner])
    if m:
        prefix = f"{m.group('indent')}{m.group('dash') or ''}{m.group('key')}: "
        indent = len(m.group("indent")) + (2 if m.group("dash") else 0)
        label = m.group("key")
    else:
        item = _ITEM_LINE.match(lines[owner])
        if item is None:
            return None
        prefix, indent, label = f"{item.group('indent')}- ", len(item.group("indent")), "a list item"
    value = lines[owner][len(prefix) :].rstrip()
    if not value or value[0] in "|>" or (value[0] in "[{" and not _closes_with_text_after(value)):
        return None  # a block scalar, or a flow collection spanning lines: nothing safe to quote
    end, joined = _continued(lines, owner, value, indent)
    lines[owner:end] = [prefix + _single_quoted(joined)]
    what = repr(label) if m else label
    notes.append(f"repaired {what}: quoted its value, which YAML cannot read as written ({problem or error})")
    return "\n".join(lines)


def _untab(line: str) -> str:
    lead = len(line) - len(line.lstrip(" \t"))
    return line[:lead].replace("\t", "  ") + line[lead:]


def _owning_line(lines: list[str], line: int) -> int | None:
    """The ``key: value`` or ``- value`` line whose value covers ``line`` (it or one above it)."""
    for idx in range(line, -1, -1):
        if _KEY_LINE.match(lines[idx]) or _ITEM_LINE.match(lines[idx]):
            own = _indent(lines[idx])
            if all(_indent(lines[k]) > own for k in range(idx + 1, line + 1) if lines[k].strip()):
                return idx
            return None
    return None


def _closes_with_text_after(value: str) -> bool:
    """``[WIP] a skill``: a bracket that closes on the line and is followed by more text."""
    end = _flow_close(value)
    return end is not None and bool(value[end + 1 :].strip()) and not value[end + 1 :].lstrip().startswith("#")


def _flow_close(value: str) -> int | None:
    """Index of the bracket closing the one ``value`` opens with, on the same line."""
    depth = 0
    quote: str | None = None
    for k, ch in enumerate(value):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'" and depth:
            quote = ch
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return k
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))
