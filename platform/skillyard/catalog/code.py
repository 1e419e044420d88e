"""Static facts about a skill's Python entry module (discovery never imports skill code).

Two readings: :func:`scan_source` parses the module with ``ast`` and is exact; :func:`probe_source` reads only
the text for what discovery must decide (is there an entry function, is it a CLI script, does it touch the
database). Parsing every handler costs about as much as reading every SKILL.md, so discovery probes and the
full scan runs where its extra facts are needed: a module that declares ``INPUT_SCHEMA`` (its value is the
schema), and ``skillyard validate``. A syntax error then surfaces when the skill is first run or validated.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Entry function names, in the order the spec (§2.3) picks them.
ENTRY_NAMES = ("execute", "run", "handler", "main", "handle")


@dataclass(frozen=True)
class CodeFacts:
    """What the entry module declares, as far as static reading can tell."""

    entry: str | None = None
    entry_is_async: bool = False
    required_positional: int = 0
    second_param_has_default: bool = False
    is_cli: bool = False
    input_schema: dict[str, Any] | None = None
    uses_db: bool = False
    syntax_error: str | None = None
    complete: bool = True


_TOP_DEF = re.compile(r"^(async[ \t]+)?def[ \t]+(\w+)[ \t]*\(", re.MULTILINE)
_IMPORTS_ARGPARSE = re.compile(r"^[ \t]*(?:import[ \t]+argparse\b|from[ \t]+argparse[ \t]+import\b)", re.MULTILINE)
_MAIN_GUARD = re.compile(
    r"^if[ \t]+(?:__name__[ \t]*==[ \t]*['\"]__main__['\"]|['\"]__main__['\"][ \t]*==[ \t]*__name__)", re.MULTILINE
)


def uses_db_text(source: str) -> bool:
    """Whether the text names ``db`` or ``db_factory`` as a string (a superset of the exact check)."""
    return "db_factory" in source or '"db"' in source or "'db'" in source


def probe_source(source: str) -> CodeFacts | None:
    """The discovery facts from the text alone, or None when the module needs the full scan."""
    if "INPUT_SCHEMA" in source:
        return None
    defs = {m.group(2): bool(m.group(1)) for m in _TOP_DEF.finditer(source)}  # a later def wins, as at import
    entry = next((name for name in ENTRY_NAMES if name in defs), None)
    return CodeFacts(
        entry=entry,
        entry_is_async=bool(entry and defs[entry]),
        is_cli=bool(_IMPORTS_ARGPARSE.search(source) and _MAIN_GUARD.search(source)),
        uses_db=uses_db_text(source),
        complete=False,
    )


def _required_positional(args: ast.arguments) -> tuple[int, bool]:
    positional = [*args.posonlyargs, *args.args]
    n_defaults = len(args.defaults)
    required = len(positional) - n_defaults
    second_has_default = len(positional) >= 2 and required < 2
    return required, second_has_default


def _is_main_guard(node: ast.AST) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
    consts = {n.value for n in ast.walk(node.test) if isinstance(n, ast.Constant)}
    return "__name__" in names and "__main__" in consts


def scan_source(source: str, filename: str = "<handler>") -> CodeFacts:
    """Read the entry function, CLI shape, ``INPUT_SCHEMA`` and database use out of module source."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        return CodeFacts(syntax_error=f"{filename}:{exc.lineno}: {exc.msg}")
    functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    input_schema = None
    has_main_guard = False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.setdefault(node.name, node)
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "INPUT_SCHEMA" for t in node.targets
        ):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                value = None
            input_schema = value if isinstance(value, dict) else None
        elif _is_main_guard(node):
            has_main_guard = True
    uses_argparse = uses_db = False
    if "argparse" in source or "db" in source:  # one walk, and only when the text could match
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                uses_argparse = uses_argparse or any(a.name == "argparse" for a in n.names)
            elif isinstance(n, ast.ImportFrom):
                uses_argparse = uses_argparse or n.module == "argparse"
            elif isinstance(n, ast.Constant):
                uses_db = uses_db or n.value in ("db", "db_factory")
    entry = next((name for name in ENTRY_NAMES if name in functions), None)
    required, second_default = (0, False)
    if entry is not None:
        required, second_default = _required_positional(functions[entry].args)
    return CodeFacts(
        entry=entry,
        entry_is_async=entry is not None and isinstance(functions[entry], ast.AsyncFunctionDef),
        required_positional=required,
        second_param_has_default=second_default,
        is_cli=uses_argparse and has_main_guard,
        input_schema=input_schema,
        uses_db=uses_db,
    )


def scan_file(path: Path, probe: bool = False) -> CodeFacts:
    """Read a module: the text probe when ``probe`` and it suffices, else the full scan. An unreadable file
    is reported like a syntax error."""
    try:
        source = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        return CodeFacts(syntax_error=f"cannot read {path}: {exc}")
    return (probe_source(source) if probe else None) or scan_source(source, str(path))
