"""SKILL.md frontmatter, read as tolerantly as real skill files demand, with a diagnostic for every repair.

Real files carry a UTF-8 BOM, CRLF line ends, unquoted colons inside values, prettier-wrapped plain scalars,
YAML 1.1 surprises (``yes``, ``1.0``, dates, a key ``on``) and OpenClaw's JSON5 ``metadata`` blocks. The result
is always JSON-serializable, and the string fields authors write stay the exact strings they wrote.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import frontmatter
import json5
import yaml

_HANDLER = frontmatter.YAMLHandler()

#: Top-level fields whose value is text: kept as the author wrote it, whatever YAML would make of it.
STRING_FIELDS = frozenset(
    {
        "name", "description", "version", "license", "category", "author", "homepage", "source",
        "skill_type", "trigger-type", "trigger_type", "cost-tier", "cost_tier", "skill_md", "origin_path",
        "when_to_use", "exec_mode", "skill_key", "status", "title",
    }
)

_KEY_LINE = re.compile(r"^(?P<indent>[ ]*)(?P<dash>- )?(?P<key>[A-Za-z0-9_.\-]+):[ \t]+(?P<value>\S.*)$")
_LINE_COMMENT = re.compile(r'//[^\n"]*$|/\*.*?\*/', re.MULTILINE)


class _Loader(yaml.SafeLoader):
    """YAML 1.2-style resolution: only true/false are booleans, no sexagesimals, no timestamps."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


@dataclass
class ParsedMarkdown:
    """What a SKILL.md holds: its frontmatter, its body, the repairs made and a fatal error if any."""

    meta: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    has_frontmatter: bool = False
    warnings: list[str] = field(default_factory=list)
    error: str | None = None


def normalize_text(raw: bytes | str) -> str:
    """Decode (dropping a UTF-8 BOM) and turn CRLF / CR line ends into LF."""
    text = raw.decode("utf-8-sig", errors="replace") if isinstance(raw, bytes) else raw.lstrip("\ufeff")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_markdown(raw: bytes | str) -> ParsedMarkdown:
    """Split and parse a SKILL.md; never raises, reports problems in ``warnings`` / ``error``."""
    text = normalize_text(raw)
    result = ParsedMarkdown(body=text)
    if not re.match(r"-{3,}[ \t]*\n", text + "\n") or not text.startswith("---"):
        return result
    try:
        fm_text, body = _HANDLER.split(text if text.endswith("\n") else text + "\n")
    except ValueError:
        result.error = (
            "the frontmatter block is not terminated: add a line '---' after the last frontmatter field"
        )
        return result
    result.has_frontmatter = True
    result.body = body.lstrip("\n")
    meta = _load_yaml(fm_text, result.warnings)
    if isinstance(meta, str):
        result.error = meta
        return result
    result.meta = meta
    _decode_metadata(result)
    return result


def _load_yaml(fm_text: str, warnings: list[str]) -> dict[str, Any] | str:
    """Parse the frontmatter; on failure repair what real files get wrong and try again."""
    fm_text, blocks = _extract_flow_blocks(fm_text, warnings)
    if isinstance(blocks, str):
        return blocks
    try:
        data = _compose(fm_text)
    except yaml.YAMLError as first_error:
        repaired, notes = _repair(fm_text)
        try:
            data = _compose(repaired) if notes else None
        except yaml.YAMLError:
            data = None
        if data is None:
            return f"the frontmatter is not valid YAML: {_yaml_problem(first_error)}"
        warnings.extend(notes)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return f"the frontmatter must be a mapping of 'key: value' lines, not a {type(data).__name__}"
    data.update(blocks)
    return data


def _compose(text: str) -> Any:
    """Load YAML, keeping the original text of top-level string fields."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        data = loader.construct_document(node)
        if isinstance(node, yaml.MappingNode) and isinstance(data, dict):
            for key_node, value_node in node.value:
                if key_node.value in STRING_FIELDS and isinstance(value_node, yaml.ScalarNode):
                    if value_node.tag != "tag:yaml.org,2002:null" or value_node.value not in ("", "~", "null"):
                        data[key_node.value] = value_node.value
        return _jsonable(data)
    finally:
        loader.dispose()


def _jsonable(value: Any) -> Any:
    """Make a YAML value JSON-serializable: string keys, finite numbers, bytes as text."""
    if isinstance(value, dict):
        return {str(k).lower() if isinstance(k, bool) else str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _yaml_problem(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    where = f" (frontmatter line {mark.line + 1}, column {mark.column + 1})" if mark else ""
    return f"{problem}{where}; quote values that contain ': ' or start with a special character"


def _extract_flow_blocks(fm_text: str, warnings: list[str]) -> tuple[str, dict[str, Any] | str]:
    """Pull out top-level values written as JSON5 objects (``metadata: { … }``, possibly over many lines).

    OpenClaw writes metadata as JSON with trailing commas and ``//`` comments; YAML chokes on the comments
    and gating must never be silently lost, so such blocks are parsed as JSON5 on their own.
    """
    lines = fm_text.split("\n")
    out: list[str] = []
    blocks: dict[str, Any] = {}
    i = 0
    while i < len(lines):
        m = re.match(r"^([A-Za-z0-9_.\-]+):[ \t]*(.*)$", lines[i])
        rest = m.group(2).strip() if m else ""
        start = i
        if m and not rest:  # value may open on the next non-blank line
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j < len(lines) and lines[j].strip().startswith("{") and lines[j][:1] in (" ", "\t", "{"):
                rest, start = lines[j].strip(), j
        if not (m and rest.startswith("{")):
            out.append(lines[i])
            i += 1
            continue
        end = _flow_block_end(lines, start)
        if end is None:
            out.append(lines[i])
            i += 1
            continue
        chunk = "\n".join([rest, *lines[start + 1 : end + 1]])
        key = m.group(1)
        parsed = _parse_flow_block(chunk)
        if isinstance(parsed, str):
            return fm_text, f"the value of {key!r} is neither JSON5 nor YAML: {parsed}"
        blocks[key], how = parsed
        if how == "json5":
            warnings.append(f"read {key!r} as JSON5 (comments, trailing commas or unquoted keys)")
        i = end + 1
    return "\n".join(out), blocks


def _parse_flow_block(chunk: str) -> tuple[Any, str] | str:
    """Parse a ``{ … }`` block as JSON, then JSON5 (as OpenClaw does), then YAML flow syntax."""
    try:
        return _jsonable(json.loads(chunk)), "json"
    except ValueError:
        pass
    try:
        return _jsonable(json5.loads(chunk)), "json5"
    except ValueError as exc:
        problem = str(exc)
    try:
        return _jsonable(yaml.load(chunk, Loader=_Loader)), "yaml"
    except yaml.YAMLError:
        return problem


def _flow_block_end(lines: list[str], start: int) -> int | None:
    """Index of the line that closes the ``{`` opened on ``lines[start]``, ignoring braces in strings."""
    depth = 0
    quote: str | None = None
    for idx in range(start, len(lines)):
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
            elif line.startswith("//", k):
                break
            elif ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    return idx
            k += 1
        quote = None if quote == "'" else quote
    return None


def _repair(fm_text: str) -> tuple[str, list[str]]:
    """Quote plain scalars that contain ': ' (joining prettier-wrapped continuation lines first)."""
    lines = fm_text.split("\n")
    out: list[str] = []
    notes: list[str] = []
    i = 0
    while i < len(lines):
        m = _KEY_LINE.match(lines[i])
        value = m.group("value").rstrip() if m else ""
        if not m or value[0] in "\"'[{|>&*!%@`#":
            out.append(lines[i])
            i += 1
            continue
        indent = len(m.group("indent")) + (2 if m.group("dash") else 0)
        parts = [value]
        j = i + 1
        # a key with a plain value cannot have children, so deeper lines continue the same scalar
        while j < len(lines) and lines[j].strip() and _indent(lines[j]) > indent:
            parts.append(lines[j].strip())
            j += 1
        joined = " ".join(parts)
        if ": " in joined or joined.endswith(":") or " #" in joined:
            quoted = "'" + joined.replace("'", "''") + "'"
            out.append(f"{m.group('indent')}{m.group('dash') or ''}{m.group('key')}: {quoted}")
            notes.append(f"repaired {m.group('key')!r}: its value contains ': ' and was not quoted")
            i = j
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out), notes


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _decode_metadata(result: ParsedMarkdown) -> None:
    """``metadata`` given as a JSON (or JSON5) string becomes a mapping; anything unreadable is an error."""
    meta = result.meta.get("metadata")
    if isinstance(meta, str) and meta.strip():
        try:
            decoded = json5.loads(meta)
        except ValueError as exc:
            result.error = f"'metadata' is a string but not JSON: {exc}; write it as a YAML mapping"
            return
        if not isinstance(decoded, dict):
            result.error = "'metadata' must be a mapping"
            return
        result.meta["metadata"] = _jsonable(decoded)
        result.warnings.append("read 'metadata' from a JSON string")
    elif meta is not None and not isinstance(meta, (dict, str)):
        result.error = f"'metadata' must be a mapping, not {type(meta).__name__}"


def dumps_json(value: Any) -> str:
    """JSON text of a parsed value (used by tests and the CLI)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
