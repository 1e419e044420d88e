"""SKILL.md frontmatter, read as tolerantly as real skill files demand, with a diagnostic for every repair.

Real files carry a UTF-8 BOM, CRLF line ends, unquoted colons inside values, prettier-wrapped plain scalars,
values that start with a YAML indicator (``[WIP] …``, ``*bold*``, ``@user``, `` `cmd` ``), tab indentation,
YAML 1.1 surprises (``yes``, ``1.0``, ``010``, ``12:30``, dates, a key ``on``) and OpenClaw's JSON5 ``metadata``
blocks. The result is always JSON-serializable, and the string fields authors write stay the exact strings they
wrote. Parsing never raises: what cannot be repaired becomes ``error``, every repair a line in ``warnings``.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import json5
import yaml
from frontmatter.default_handlers import YAMLHandler

#: python-frontmatter's YAML handler decides whether a file opens with frontmatter; the closing fence is found
#: here, because its split cuts at a ``---`` line even inside a quoted value.
_HANDLER = YAMLHandler()

#: Top-level fields whose value is text: kept as the author wrote it, whatever YAML would make of it.
STRING_FIELDS = frozenset(
    {
        "name",
        "description",
        "version",
        "license",
        "category",
        "author",
        "homepage",
        "source",
        "skill_type",
        "trigger-type",
        "trigger_type",
        "cost-tier",
        "cost_tier",
        "skill_md",
        "origin_path",
        "when_to_use",
        "exec_mode",
        "skill_key",
        "status",
        "title",
    }
)
#: Free-text fields where a `` #`` in the middle is far more likely prose than a YAML comment.
_PROSE_FIELDS = ("description", "when_to_use", "title")

UNTERMINATED = "the frontmatter block is not terminated: add a line '---' after the last frontmatter field"

_OPEN_FENCE = re.compile(r"-{3,}[ \t]*\n")
_CLOSE_FENCE = re.compile(r"^-{3,}[ \t]*$", re.MULTILINE)
_KEY_LINE = re.compile(r"^(?P<indent>[ ]*)(?P<dash>- )?(?P<key>[A-Za-z0-9_.\-]+):[ \t]+(?P<value>\S.*)$")
_ITEM_LINE = re.compile(r"^(?P<indent>[ ]*)- (?P<value>\S.*)$")
_TOP_KEY = re.compile(r"^([A-Za-z0-9_.\-]+):[ \t]*(.*)$")
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MAX_REPAIRS = 25
_MAX_FENCES = 12
_MAX_NODES = 200_000
_FAST_DEPTH = 64
_MAX_DEPTH = 150


class _Loader(yaml.SafeLoader):
    """YAML 1.2 core-schema resolution.

    Only ``true``/``false`` are booleans; ints are decimal, ``0o`` octal or ``0x`` hex (``010`` is ten, not
    eight); no sexagesimals (``12:30`` stays text); no timestamps (dates stay text).
    """


_DROPPED = {
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:timestamp",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    # ``=`` and ``!``/``&``/``*`` resolve to tags PyYAML's SafeLoader cannot construct (``key: =`` would fail)
    "tag:yaml.org,2002:value",
    "tag:yaml.org,2002:yaml",
}


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node)).replace("_", "")
    sign, digits = (-1, text[1:]) if text.startswith("-") else (1, text.lstrip("+"))
    try:
        if digits[:2] in ("0o", "0x", "0b"):
            return sign * int(digits[2:], {"0o": 8, "0x": 16, "0b": 2}[digits[:2]])
        return sign * int(digits)
    except ValueError:
        raise yaml.constructor.ConstructorError(None, None, f"{text!r} is not an integer", node.start_mark) from None


def _yaml12(loader: type[Any]) -> type[Any]:
    """Give a SafeLoader class the YAML 1.2 core schema's implicit types."""
    loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in _DROPPED]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    loader.add_implicit_resolver(
        "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
    )
    loader.add_implicit_resolver(
        "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789")
    )
    loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
        list("-+0123456789."),
    )
    loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
    return loader


_yaml12(_Loader)


class _FastLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The same schema over libyaml when PyYAML was built with it; errors are re-read with ``_Loader``."""


_yaml12(_FastLoader)


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
    """Split and parse a SKILL.md; never raises, reports problems in ``warnings`` / ``error``.

    The block opens with a ``---`` first line and closes at the next line of only dashes — unless that line
    sits inside a quoted value spanning lines (then a later fence closes it). The file may end at the fence.
    """
    text = normalize_text(raw)
    result = ParsedMarkdown(body=text)
    found = _fences(text)
    if found is None:
        return result
    if isinstance(found, str):
        result.error = found
        return result
    start, fences = found
    chosen = fences[0]
    warnings: list[str] = []
    meta = _load_yaml(text[start : chosen.start()], warnings)
    if (isinstance(meta, str) or warnings) and len(fences) > 1 and _ends_inside_quote(text[start : chosen.start()]):
        for fence in fences[1:]:
            if not _ends_inside_quote(text[start : fence.start()]):
                chosen, warnings = fence, []
                meta = _load_yaml(text[start : fence.start()], warnings)
                break
    result.has_frontmatter = True
    result.body = text[chosen.end() :].lstrip("\n")
    result.warnings = warnings
    if isinstance(meta, str):
        result.error = meta
        return result
    result.meta = meta
    _decode_metadata(result)
    return result


def _fences(text: str) -> tuple[int, list[re.Match[str]]] | str | None:
    """Where the frontmatter starts and the candidate closing fences; ``None`` without frontmatter."""
    if not _HANDLER.detect(text):
        return None
    opening = _OPEN_FENCE.match(text if text.endswith("\n") else text + "\n")
    if not opening:
        return None
    start = opening.end()
    fences = []
    for fence in _CLOSE_FENCE.finditer(text, start):
        fences.append(fence)
        if len(fences) >= _MAX_FENCES:
            break
    return (start, fences) if fences else UNTERMINATED


def _ends_inside_quote(block: str) -> bool:
    """Whether a frontmatter candidate ends inside a quoted scalar (so the ``---`` after it is content)."""
    block = _CLOSE_FENCE.sub(lambda m: "  " + m.group(0), block)  # earlier fences: content of a quoted value
    if _flow_depth(block) > _MAX_DEPTH:
        return False
    for candidate in (block, _quote_colon_values(block)[0]):
        try:
            for _ in yaml.scan(candidate, Loader=_Loader):
                pass
        except yaml.scanner.ScannerError as exc:
            if exc.context == "while scanning a quoted scalar" and "end of stream" in (exc.problem or ""):
                return True
            continue
        except (yaml.YAMLError, RecursionError):
            continue
        return False
    return False


# --------------------------------------------------------------------------------------------------------
# YAML with repairs


def _load_yaml(fm_text: str, warnings: list[str]) -> dict[str, Any] | str:
    """Parse the frontmatter; on failure repair what real files get wrong and try again."""
    fm_text, blocks = _extract_flow_blocks(fm_text, warnings)
    if isinstance(blocks, str):
        return blocks
    notes: list[str] = []
    try:
        try:
            data = _compose(fm_text, notes, _loader_for(fm_text))
        except _TooLarge:
            raise
        except yaml.YAMLError:
            notes = []
            data = _compose(fm_text, notes)  # the pure-Python loader's errors carry what the repairs need
    except _TooLarge as exc:
        return str(exc)
    except yaml.YAMLError as first_error:
        notes = []
        try:
            data = _repair_and_compose(fm_text, first_error, notes)
        except _TooLarge as exc:
            return str(exc)
        if isinstance(data, str):
            return data
    warnings.extend(notes)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return f"the frontmatter must be a mapping of 'key: value' lines, not a {_type_name(data)}"
    data.update(blocks)
    return data


def _type_name(value: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(value), type(value).__name__
    )


def _repair_and_compose(text: str, first_error: yaml.YAMLError, notes: list[str]) -> Any:
    """Repair in steps until the text parses: quote values with ``: ``, then fix each place YAML points at."""
    repaired, colon_notes = _quote_colon_values(text)
    error: yaml.YAMLError | None = first_error
    if colon_notes:
        text, error = repaired, None
        notes.extend(colon_notes)
    touched: set[int] = set()
    for _ in range(_MAX_REPAIRS):
        if error is None:
            extra: list[str] = []
            try:
                data = _compose(text, extra)
            except _TooLarge:
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
    return f"the frontmatter is not valid YAML: {_yaml_problem(first_error)}"


def _loader_for(text: str) -> type[Any]:
    """libyaml for ordinary frontmatter, the pure-Python loader for deeper nesting; refuse absurd nesting.

    libyaml can overflow the C stack on many thousands of nested brackets, and PyYAML's scanner is quadratic in
    the nesting depth, so a hostile file could crash or stall the host.
    """
    if text.count("[") + text.count("{") <= _FAST_DEPTH:
        return _FastLoader
    depth = _flow_depth(text)
    if depth > _MAX_DEPTH:
        raise _TooLarge(f"the frontmatter is nested too deeply ({depth} levels of brackets)")
    return _FastLoader if depth <= _FAST_DEPTH else _Loader


def _flow_depth(text: str) -> int:
    depth = peak = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            peak = max(peak, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
    return peak


def _compose(text: str, notes: list[str], loader_class: type[Any] = _Loader) -> Any:
    """Load YAML, keeping the original text of top-level string fields; ``notes`` gets silent-loss warnings."""
    loader = loader_class(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise _TooLarge("the frontmatter is nested too deeply") from None
        if node is None:
            return None
        try:
            data = loader.construct_document(node)
        except RecursionError:
            raise _TooLarge("the frontmatter is nested too deeply") from None
        except (ValueError, TypeError, OverflowError) as exc:
            raise yaml.constructor.ConstructorError(None, None, str(exc) or type(exc).__name__) from None
        if isinstance(node, yaml.MappingNode) and isinstance(data, dict):
            _keep_string_fields(text, node, data, notes)
        return _jsonable(data, [0])
    finally:
        loader.dispose()


def _keep_string_fields(text: str, node: yaml.MappingNode, data: dict[Any, Any], notes: list[str]) -> None:
    lines = text.split("\n")
    seen: set[str] = set()
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if not isinstance(key, str):
            continue
        if key in seen:
            notes.append(f"the key {key!r} appears twice in the frontmatter: the last value is used")
        seen.add(key)
        if key not in STRING_FIELDS or not isinstance(value_node, yaml.ScalarNode):
            continue
        if value_node.tag != "tag:yaml.org,2002:null" or value_node.value not in ("", "~", "null", "Null", "NULL"):
            data[key] = value_node.value
        if key in _PROSE_FIELDS and not value_node.style and value_node.value:
            end = value_node.end_mark
            rest = lines[end.line][end.column :] if end.line < len(lines) else ""
            if re.match(r"[ \t]+#", rest):
                notes.append(
                    f"{key!r}: the text after ' #' was read as a YAML comment and left out; quote the value to keep it"
                )


class _TooLarge(yaml.YAMLError):
    pass


def _jsonable(value: Any, budget: list[int], depth: int = 0) -> Any:
    """Make a YAML value JSON-serializable: string keys, finite numbers, bytes as text.

    Aliases are expanded, so a budget guards against alias bombs and self-referencing anchors.
    """
    budget[0] += 1
    if budget[0] > _MAX_NODES or depth > 200:
        raise _TooLarge("the frontmatter is nested too deeply or its aliases expand to too many values")
    if isinstance(value, dict):
        return {
            (str(k).lower() if isinstance(k, bool) else str(k)): _jsonable(v, budget, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v, budget, depth + 1) for v in value]
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


def _quote_colon_values(fm_text: str) -> tuple[str, list[str]]:
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


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


# --------------------------------------------------------------------------------------------------------
# JSON5 blocks (OpenClaw's metadata)


def _extract_flow_blocks(fm_text: str, warnings: list[str]) -> tuple[str, dict[str, Any] | str]:
    """Pull out top-level values written as JSON5 objects (``metadata: { … }``, possibly over many lines).

    OpenClaw writes metadata as JSON5 with trailing commas and ``//`` comments; YAML chokes on the comments
    and gating must never be silently lost, so such blocks are parsed on their own. The block's lines are
    replaced by ``key:`` and blank lines, so YAML errors elsewhere keep their line numbers.
    """
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
        end = _flow_block_end(lines, start) if m and rest.startswith("{") else None
        if m is None or end is None:
            out.append(lines[i])
            i += 1
            continue
        chunk = "\n".join([rest, *lines[start + 1 : end + 1]])
        key = m.group(1)
        parsed = _parse_flow_block(chunk)
        if isinstance(parsed, str):
            return fm_text, f"the value of {key!r} is neither JSON5 nor YAML: {parsed}"
        blocks[key], repaired = parsed
        if repaired:
            warnings.append(f"read {key!r} as JSON5: it is not valid YAML (comments or unquoted keys)")
        out.append(f"{key}:")
        out.extend("" for _ in range(i + 1, end + 1))
        i = end + 1
    return "\n".join(out), blocks


def _parse_flow_block(chunk: str) -> tuple[Any, bool] | str:
    """Parse a ``{ … }`` block as OpenClaw does (JSON, then JSON5), else as YAML flow syntax.

    Returns the value and whether reading it needed JSON5 where YAML would have failed or read it otherwise.
    A block with none of the JSON5-only constructs that YAML reads differently is taken from YAML directly
    (the json5 parser is slow, and OpenClaw's trailing commas are valid YAML).
    """
    try:
        return _jsonable(json.loads(chunk), [0]), False
    except (ValueError, RecursionError, yaml.YAMLError):
        pass
    as_yaml: Any = _NOTHING
    with contextlib.suppress(yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError):
        as_yaml = _jsonable(yaml.load(chunk, Loader=_loader_for(chunk)), [0])
    if as_yaml is not _NOTHING and not _JSON5_ONLY.search(chunk):
        return as_yaml, False
    try:
        value = _jsonable(json5.loads(chunk), [0])
    except (ValueError, RecursionError, yaml.YAMLError) as exc:
        if as_yaml is not _NOTHING:
            return as_yaml, False
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return value, as_yaml != value


_NOTHING = object()
#: What JSON5 reads differently from YAML flow syntax: comments, single quotes, line continuations, specials.
_JSON5_ONLY = re.compile(r"//|/\*|'|\\\n|Infinity|NaN|[-+]0[xX]")


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


def _decode_metadata(result: ParsedMarkdown) -> None:
    """``metadata`` given as a JSON (or JSON5) string becomes a mapping; anything unreadable is an error."""
    meta = result.meta.get("metadata")
    if isinstance(meta, str) and meta.strip():
        try:
            decoded = json5.loads(meta)
        except (ValueError, RecursionError) as exc:
            result.error = f"'metadata' is a string but not JSON: {exc}; write it as a YAML mapping"
            return
        if not isinstance(decoded, dict):
            result.error = f"'metadata' must be a mapping, not a {_type_name(decoded)}"
            return
        try:
            result.meta["metadata"] = _jsonable(decoded, [0])
        except _TooLarge as exc:
            result.error = f"'metadata': {exc}"
            return
        result.warnings.append("read 'metadata' from a JSON string")
    elif meta is not None and not isinstance(meta, (dict, str)):
        result.error = f"'metadata' must be a mapping, not a {_type_name(meta)}"


def dumps_json(value: Any) -> str:
    """JSON text of a parsed value (used by tests and the CLI)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
