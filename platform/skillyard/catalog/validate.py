"""``skillyard validate``: the pre-release checklist (§10) as far as it can be checked without running code."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from ..credentials import looks_secret
from .catalog import Catalog
from .code import scan_file
from .roots import Root
from .skill import Skill
from .spec_check import spec_findings


def _module_constants(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id.isupper()]
    return names


def _env_reads(tree: ast.Module) -> set[str]:
    """Names read with os.environ[...], os.environ.get(...) or os.getenv(...)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            key = node.slice
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.getenv", "os.environ.get") and node.args:
            key = node.args[0]
        else:
            continue
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.add(key.value)
    return found


def _logs_to_stdout(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            args = [ast.unparse(a) for a in node.args] + [ast.unparse(k.value) for k in node.keywords]
            if ("StreamHandler" in func or func.endswith("basicConfig")) and "sys.stdout" in args:
                return True
    return False


def check_skill(skill: Skill, spec: bool = False) -> dict[str, Any]:
    """Errors and warnings for one skill."""
    errors: list[str] = [skill.error] if skill.error else []
    warnings = list(skill.warnings)
    if not str(skill.meta.get("description") or "").strip():
        errors.append("missing description: add 'description:' to the frontmatter saying when to use the skill")
    code = skill.code if skill.code.complete or not skill.exec.config else scan_file(skill.exec.config)
    if code.syntax_error and not skill.error:
        errors.append(f"the handler does not parse: {code.syntax_error}")
    if skill.exec.type == "PYTHON" and skill.exec.config and not skill.exec.python_cli:
        if code.second_param_has_default:
            errors.append(
                f"{code.entry}(): the second parameter has a default, so runtime_context is never passed; "
                "remove the default"
            )
        if code.uses_db and code.entry and not code.entry_is_async:
            errors.append(
                f"{code.entry}() uses db but is not async: ctx['db'] is None in sync entries; make it async def"
            )
    if skill.exec.config and skill.exec.config.suffix == ".py" and skill.exec.config.is_file():
        try:
            tree = ast.parse(skill.exec.config.read_text(encoding="utf-8-sig"))
        except (SyntaxError, OSError, UnicodeDecodeError):
            tree = None
        if tree is not None:
            for name in _module_constants(tree):
                if looks_secret(name) and name not in ("INPUT_SCHEMA",):
                    warnings.append(
                        f"constant {name} contains a credential substring "
                        "(key/token/secret/password/credential/auth) and will be treated as a secret; rename it"
                    )
            if skill.exec.python_cli and _logs_to_stdout(tree):
                errors.append("logging goes to stdout: a CLI skill's stdout is its result; log to stderr")
            declared = set(skill.requires.credential_env) | set(skill.requires.config)
            undeclared = sorted(
                n
                for n in _env_reads(tree)
                if n not in declared and n not in ("PATH", "HOME", "LANG", "TMPDIR", "SKILL_INPUT", "SKILL_CONTEXT")
            )
            if undeclared:
                warnings.append(
                    f"reads environment variables not declared in metadata.openclaw.requires.env: "
                    f"{', '.join(undeclared)}"
                )
    for name in skill.schema.rule_matches:
        prop = (skill.schema.full.get("properties") or {}).get(name) or {}
        flag = prop.get("x-secret") if isinstance(prop, dict) else None
        treated = "kept as an ordinary parameter (x-secret: false)" if flag is False else "treated as a credential"
        warnings.append(f"parameter {name!r} matches the credential rule: {treated}")
    if spec:
        warnings.extend(f"spec: {finding}" for finding in spec_findings(skill.manifest.meta, skill.dir.name))
    return {
        "name": skill.name,
        "dir": str(skill.dir),
        "errors": errors,
        "warnings": warnings,
        "secret_params": list(skill.schema.secret_params),
    }


def validate_paths(paths: list[Path], spec: bool = False) -> list[dict[str, Any]]:
    """Check every skill folder at or under the given paths (``spec``: the Agent Skills rules too, as warnings)."""
    roots = [Root(p.resolve(), i, "local") for i, p in enumerate(paths) if p.is_dir()]
    catalog = Catalog(roots)
    catalog.scan()
    return [check_skill(entry.skill, spec) for entry in catalog.entries]
