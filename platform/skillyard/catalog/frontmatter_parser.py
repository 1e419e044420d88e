"""SKILL.md frontmatter, read as tolerantly as real skill files demand, with a diagnostic for every repair.

Real files carry a UTF-8 BOM, CRLF line ends, unquoted colons inside values, prettier-wrapped plain scalars,
values that start with a YAML indicator (``[WIP] …``, ``*bold*``, ``@user``, `` `cmd` ``), tab indentation,
YAML 1.1 surprises (``yes``, ``1.0``, ``010``, ``12:30``, dates, a key ``on``) and OpenClaw's JSON5 ``metadata``
blocks. The result is always JSON-serializable, and the string fields authors write stay the exact strings they
wrote. Parsing never raises: what cannot be repaired becomes ``error``, every repair a line in ``warnings``.

This module finds the block and orchestrates; the loaders live in ``yaml12``, the repairs in
``frontmatter_repair`` and the JSON5 blocks in ``flow_blocks``.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

import json5
import yaml
from frontmatter.default_handlers import YAMLHandler

from .flow_blocks import extract_flow_blocks
from .frontmatter_repair import quote_colon_values, repair_and_compose
from .yaml12 import MAX_DEPTH, TooLarge, Yaml12Loader, compose, flow_depth, jsonable, loader_for

#: python-frontmatter's YAML handler decides whether a file opens with frontmatter; the closing fence is found
#: here, because its split cuts at a ``---`` line even inside a quoted value.
_HANDLER = YAMLHandler()
#: Blank lines and HTML comments (a licence header, a generator's note) before a frontmatter block; bounded.
_LEAD = re.compile(r"\A(?:[ \t]*\n|[ \t]*<!--.{0,4000}?-->[ \t]*\n?){1,20}", re.DOTALL)

UNTERMINATED = "the frontmatter block is not terminated: add a line '---' after the last frontmatter field"

_OPEN_FENCE = re.compile(r"-{3,}[ \t]*\n")
_CLOSE_FENCE = re.compile(r"^-{3,}[ \t]*$", re.MULTILINE)
_MAX_FENCES = 12


@dataclass
class ParsedMarkdown:
    """What a SKILL.md holds: its frontmatter, its body, the repairs made and a fatal error if any."""

    meta: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    has_frontmatter: bool = False
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    size: int = 0  # characters in the whole file


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
    result = ParsedMarkdown(body=text, size=len(text))
    lead = _LEAD.match(text)
    if lead and lead.end() and text.startswith("---", lead.end()):  # blank lines or an HTML comment come first
        parsed = parse_markdown(text[lead.end() :])
        if parsed.has_frontmatter:
            parsed.size = len(text)
            parsed.warnings = [
                "the frontmatter follows blank lines or an HTML comment; start the file with its --- line",
                *parsed.warnings,
            ]
            return parsed
    found = _fences(text)
    if found is None:
        return result
    if isinstance(found, str):
        result.error = found
        return result
    start, chosen = found
    warnings: list[str] = []
    meta = _load_yaml(text[start : chosen.start()], warnings)
    if (isinstance(meta, str) or warnings) and _ends_inside_quote(text[start : chosen.start()]):
        later = itertools.islice(_CLOSE_FENCE.finditer(text, chosen.end()), _MAX_FENCES - 1)
        for fence in later:
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


def _fences(text: str) -> tuple[int, re.Match[str]] | str | None:
    """Where the frontmatter starts and its first candidate closing fence; ``None`` without frontmatter.

    Later fences are looked for only when the first one sits inside a quoted value (bodies are long).
    """
    if not _HANDLER.detect(text):
        return None
    opening = _OPEN_FENCE.match(text) or (_OPEN_FENCE.match(text + "\n") if "\n" not in text else None)
    if not opening:
        return None
    start = min(opening.end(), len(text))
    fence = _CLOSE_FENCE.search(text, start)
    return (start, fence) if fence else UNTERMINATED


def _ends_inside_quote(block: str) -> bool:
    """Whether a frontmatter candidate ends inside a quoted scalar (so the ``---`` after it is content)."""
    block = _CLOSE_FENCE.sub(lambda m: "  " + m.group(0), block)  # earlier fences: content of a quoted value
    if flow_depth(block) > MAX_DEPTH:
        return False
    for candidate in (block, quote_colon_values(block)[0]):
        try:
            for _ in yaml.scan(candidate, Loader=Yaml12Loader):
                pass
        except yaml.scanner.ScannerError as exc:
            if exc.context == "while scanning a quoted scalar" and "end of stream" in (exc.problem or ""):
                return True
            continue
        except (yaml.YAMLError, RecursionError):
            continue
        return False
    return False


def _load_yaml(fm_text: str, warnings: list[str]) -> dict[str, Any] | str:
    """Parse the frontmatter; on failure repair what real files get wrong and try again."""
    fm_text, blocks = extract_flow_blocks(fm_text, warnings)
    if isinstance(blocks, str):
        return blocks
    notes: list[str] = []
    try:
        try:
            data = compose(fm_text, notes, loader_for(fm_text))
        except TooLarge:
            raise
        except yaml.YAMLError:
            notes = []
            data = compose(fm_text, notes)  # the pure-Python loader's errors carry what the repairs need
    except TooLarge as exc:
        return str(exc)
    except yaml.YAMLError as first_error:
        notes = []
        try:
            data = repair_and_compose(fm_text, first_error, notes)
        except TooLarge as exc:
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
            result.meta["metadata"] = jsonable(decoded, [0])
        except TooLarge as exc:
            result.error = f"'metadata': {exc}"
            return
        result.warnings.append("read 'metadata' from a JSON string")
    elif meta is not None and not isinstance(meta, (dict, str)):
        result.error = f"'metadata' must be a mapping, not a {_type_name(meta)}"
