"""YAML 1.2-style loading of frontmatter: core-schema types, size and depth limits, JSON-serializable results.

The string fields authors write come back as the exact text they wrote, whatever YAML would make of it.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

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

_MAX_NODES = 200_000
_FAST_DEPTH = 64
MAX_DEPTH = 150


class _JsonValues:
    """Constructs only JSON values: string keys, finite floats, lists for sets and ordered pairs, text for
    binary and explicit timestamps. With no anchors in a document, what YAML builds is already JSON."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        mapping = super().construct_mapping(node, deep=deep)  # type: ignore[misc]
        return {_json_key(k): v for k, v in mapping.items()}


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    return str(key).lower() if isinstance(key, bool) else str(key)


def _json_float(loader: Any, node: Any) -> float | str:
    value = yaml.SafeLoader.construct_yaml_float(loader, node)
    return value if math.isfinite(value) else str(value)


def _json_binary(loader: Any, node: Any) -> str:
    return bytes(yaml.SafeLoader.construct_yaml_binary(loader, node)).decode("utf-8", errors="replace")


def _json_text(loader: Any, node: Any) -> str:
    return str(loader.construct_scalar(node))


def _json_set(loader: Any, node: Any) -> list[Any]:
    return list(loader.construct_mapping(node))


def _json_pairs(loader: Any, node: Any) -> list[Any]:
    """``!!omap`` / ``!!pairs``: a list of ``[key, value]`` lists."""
    pairs = []
    for item in node.value if isinstance(node, yaml.SequenceNode) else [node]:
        if not isinstance(item, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(
                None, None, "an ordered map needs key: value items", item.start_mark
            )
        pairs += [[loader.construct_object(k, deep=True), loader.construct_object(v, deep=True)] for k, v in item.value]
    return pairs


class Yaml12Loader(_JsonValues, yaml.SafeLoader):
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
    loader.add_constructor("tag:yaml.org,2002:float", _json_float)
    loader.add_constructor("tag:yaml.org,2002:binary", _json_binary)
    loader.add_constructor("tag:yaml.org,2002:timestamp", _json_text)
    loader.add_constructor("tag:yaml.org,2002:set", _json_set)
    loader.add_constructor("tag:yaml.org,2002:omap", _json_pairs)
    loader.add_constructor("tag:yaml.org,2002:pairs", _json_pairs)
    return loader


_yaml12(Yaml12Loader)


class _FastLoader(_JsonValues, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The same schema over libyaml when PyYAML was built with it; errors are re-read with ``Yaml12Loader``."""


_yaml12(_FastLoader)


class TooLarge(yaml.YAMLError):
    """The frontmatter is nested too deeply or expands to too many values to be read safely."""


def loader_for(text: str) -> type[Any]:
    """libyaml for ordinary frontmatter, the pure-Python loader for deeper nesting; refuse absurd nesting.

    libyaml can overflow the C stack on many thousands of nested brackets, and PyYAML's scanner is quadratic in
    the nesting depth, so a hostile file could crash or stall the host.
    """
    if text.count("[") + text.count("{") <= _FAST_DEPTH:
        return _FastLoader
    depth = flow_depth(text)
    if depth > MAX_DEPTH:
        raise TooLarge(f"the frontmatter is nested too deeply ({depth} levels of brackets)")
    return _FastLoader if depth <= _FAST_DEPTH else Yaml12Loader


def flow_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` brackets in ``text`` (quotes are not considered)."""
    depth = peak = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            peak = max(peak, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
    return peak


def compose(text: str, notes: list[str], loader_class: type[Any] = Yaml12Loader) -> Any:
    """Load YAML, keeping the original text of top-level string fields; ``notes`` gets silent-loss warnings."""
    loader = loader_class(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise TooLarge("the frontmatter is nested too deeply") from None
        if node is None:
            return None
        try:
            data = loader.construct_document(node)
        except RecursionError:
            raise TooLarge("the frontmatter is nested too deeply") from None
        except (ValueError, TypeError, OverflowError) as exc:
            raise yaml.constructor.ConstructorError(None, None, str(exc) or type(exc).__name__) from None
        if isinstance(node, yaml.MappingNode) and isinstance(data, dict):
            _keep_string_fields(text, node, data, notes)
        if "&" not in text:  # no anchors, so no aliases to expand: the loader built plain JSON values
            return data
        return jsonable(data, [0])
    finally:
        loader.dispose()


def _keep_string_fields(text: str, node: yaml.MappingNode, data: dict[Any, Any], notes: list[str]) -> None:
    lines = text.split("\n") if " #" in text or "\t#" in text else []
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


def jsonable(value: Any, budget: list[int], depth: int = 0) -> Any:
    """Make a YAML value JSON-serializable: string keys, finite numbers, bytes as text.

    Aliases are expanded, so a budget guards against alias bombs and self-referencing anchors.
    """
    budget[0] += 1
    if budget[0] > _MAX_NODES or depth > 200:
        raise TooLarge("the frontmatter is nested too deeply or its aliases expand to too many values")
    if isinstance(value, dict):
        return {
            (str(k).lower() if isinstance(k, bool) else str(k)): jsonable(v, budget, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v, budget, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def yaml_problem(error: yaml.YAMLError) -> str:
    """What YAML found wrong and where (frontmatter line and column), with the usual fix."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    where = f" (frontmatter line {mark.line + 1}, column {mark.column + 1})" if mark else ""
    return f"{problem}{where}; quote values that contain ': ' or start with a special character"
