"""Top-level ``key: { … }`` frontmatter values read as OpenClaw reads them: JSON, then JSON5, else YAML flow.

OpenClaw writes ``metadata`` as JSON5 with trailing commas and ``//`` comments, which YAML cannot read.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import json5
import yaml

from .yaml12 import jsonable, loader_for

_TOP_KEY = re.compile(r"^([A-Za-z0-9_.\-]+):[ \t]*(.*)$")
_NOTHING = object()
#: What JSON5 reads differently from YAML flow syntax: comments, single quotes, line continuations, specials.
_JSON5_ONLY = re.compile(r"//|/\*|'|\\\n|Infinity|NaN|[-+]0[xX]")


def extract_flow_blocks(fm_text: str, warnings: list[str]) -> tuple[str, dict[str, Any] | str]:
    """Pull out top-level values written as JSON5 objects (``metadata: { … }``, possibly over many lines).

    OpenClaw writes metadata as JSON5 with trailing commas and ``//`` comments; YAML chokes on the comments
    and gating must never be silently lost, so such blocks are parsed on their own. The block's lines are
    replaced by ``key:`` and blank lines, so YAML errors elsewhere keep their line numbers.
    """
    if "{" not in fm_text:
        return fm_text, {}
    lines = fm_text.split("\n")
    out: list[str] = []
    blocks: dict[str, Any] = {}
    i = 0
    while i < len(lines):
        m = _TOP_KEY.match(lines[i])
        rest = m.group(2).strip() if m else ""
        start = i
        if m and not rest:  # value may open on the next non-blank line
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and lines[j].strip().startswith("{") and lines[j][:1] in (" ", "\t", "{"):
                rest, start = lines[j].strip(), j
        one_line = _one_line_json(rest) if m and start == i and rest.startswith("{") else None
        if one_line is not None:  # the common OpenClaw shape: plain JSON on the key's own line
            end: int | None = i
        else:
            end = _flow_block_end(lines, start) if m and rest.startswith("{") else None
        if m is None or end is None:
            out.append(lines[i])
            i += 1
            continue
        key = m.group(1)
        parsed = one_line or _parse_flow_block("\n".join([rest, *lines[start + 1 : end + 1]]))
        if isinstance(parsed, str):
            return fm_text, f"the value of {key!r} is neither JSON5 nor YAML: {parsed}"
        blocks[key], repaired = parsed
        if repaired:
            warnings.append(f"read {key!r} as JSON5: it is not valid YAML (comments or unquoted keys)")
        out.append(f"{key}:")
        out.extend("" for _ in range(i + 1, end + 1))
        i = end + 1
    return "\n".join(out), blocks


def _one_line_json(rest: str) -> tuple[Any, bool] | None:
    """A value that is one JSON object on its line, parsed; None when it is anything else."""
    if not rest.endswith("}"):
        return None
    try:  # JSON text decodes to plain JSON values already; NaN and Infinity are left to the slow path
        value = json.loads(rest, parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return None
    return (value, False) if isinstance(value, dict) else None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse_flow_block(chunk: str) -> tuple[Any, bool] | str:
    """Parse a ``{ … }`` block as OpenClaw does (JSON, then JSON5), else as YAML flow syntax.

    Returns the value and whether reading it needed JSON5 where YAML would have failed or read it otherwise.
    A block with none of the JSON5-only constructs that YAML reads differently is taken from YAML directly
    (the json5 parser is slow, and OpenClaw's trailing commas are valid YAML).
    """
    try:
        return jsonable(json.loads(chunk), [0]), False
    except (ValueError, RecursionError, yaml.YAMLError):
        pass
    as_yaml: Any = _NOTHING
    with contextlib.suppress(yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError):
        as_yaml = jsonable(yaml.load(chunk, Loader=loader_for(chunk)), [0])
    if as_yaml is not _NOTHING and not _JSON5_ONLY.search(chunk):
        return as_yaml, False
    try:
        value = jsonable(json5.loads(chunk), [0])
    except (ValueError, RecursionError, yaml.YAMLError) as exc:
        if as_yaml is not _NOTHING:
            return as_yaml, False
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return value, as_yaml != value


def _flow_block_end(lines: list[str], start: int) -> int | None:
    """Index of the line that closes the ``{`` opened on ``lines[start]``, when nothing but a comment follows."""
    depth = 0
    quote: str | None = None
    for idx in range(start, min(len(lines), start + 2000)):
        line = lines[idx]
        k = 0
        while k < len(line):
            ch = line[k]
            if quote:
                if ch == "\\":
                    k += 1
                elif ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif line.startswith("//", k) or (ch == "#" and (k == 0 or line[k - 1] in " \t")):
                break
            elif ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    after = line[k + 1 :].strip()
                    ok = not after or after.startswith(("//", "#", "/*"))
                    return idx if ok else None
            k += 1
        quote = None if quote == "'" else quote
    return None
