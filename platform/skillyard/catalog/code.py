"""Static facts about a skill's Python entry module, read with ``ast`` (discovery never imports skill code)."""

from __future__ import annotations

import ast
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


def scan_file(path: Path) -> CodeFacts:
    """:func:`scan_source` on a file; an unreadable file is reported like a syntax error."""
    try:
        source = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        return CodeFacts(syntax_error=f"cannot read {path}: {exc}")
    return scan_source(source, str(path))
