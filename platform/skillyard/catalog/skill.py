"""The Skill value: everything the host knows about one skill folder, built once per change of its files."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .code import CodeFacts, scan_file, uses_db_text
from .http_spec import HttpSpecError, load_spec
from .manifest import Manifest
from .requires import Requirements, as_bool, parse_requirements
from .schema import SchemaInfo, build_schema_info

SKILL_TYPES = ("handler", "skill_md", "knowledge")
EXTENSION_TYPES = {
    ".py": "PYTHON",
    ".sh": "SHELL",
    ".js": "NODE",
    ".mjs": "NODE",
    ".cjs": "NODE",
    ".rb": "RUBY",
    ".go": "GO",
    ".toml": "HTTP",
}
SUBPROCESS_TYPES = ("SHELL", "INLINE_SHELL", "NODE", "RUBY", "GO")
LONG_SKILL_MD = 8000


@dataclass(frozen=True)
class ExecSpec:
    """How a handler skill runs: its exec type, the file or command, and its wall clock."""

    type: str | None = None
    config: Path | None = None
    command: str | None = None
    timeout: float | None = None
    python_cli: bool = False
    server: str | None = None  # MCP: the configured server (settings.toml [mcp.servers.NAME])
    tool: str | None = None  # MCP: the server's tool name


@dataclass(frozen=True, eq=False)
class Skill:
    """One skill folder, read and resolved. Frozen: a change on disk builds a new Skill."""

    name: str
    description: str
    dir: Path
    root: Path
    manifest: Manifest
    skill_type: str
    exec: ExecSpec
    code: CodeFacts
    schema: SchemaInfo
    requires: Requirements
    category: str | None = None
    source: str = "local"
    trigger_type: str = "explicit"
    model_invocation_disabled: bool = False
    aliases: tuple[str, ...] = ()
    is_async: bool = False
    force_raw_prompt: bool = False
    offload: bool = True
    materialize: bool = True
    secret_configs: tuple[str, ...] = ()  # config keys the skill declares secret (metadata.skillyard)
    network: bool = False  # metadata.skillyard.network: the sandbox shares the host's network with it
    read_only: bool = False  # frontmatter read_only: it changes nothing (MCP's readOnlyHint)
    output_schema: dict[str, Any] | None = None  # frontmatter output_schema: the JSON Schema of its envelope
    warnings: tuple[str, ...] = ()
    error: str | None = None
    #: Filled (in place) by the catalog: tool names depend on every other skill's name.
    tool_names: dict[str, str | None] = field(default_factory=dict)
    version: str = ""

    @property
    def exec_type(self) -> str | None:
        return self.exec.type

    @property
    def exposed(self) -> bool:
        """Offered to models: explicit trigger, not knowledge, readable, and not kept away from the model
        (``disable-model-invocation: true``, as OpenClaw and Claude Code read it; still runnable by name)."""
        return (
            self.trigger_type == "explicit"
            and self.skill_type != "knowledge"
            and self.error is None
            and not self.model_invocation_disabled
            and self.manifest.frontmatter  # a derived name and description are no description for a model
        )

    @property
    def tool_description(self) -> str:
        """``[category] description`` when a category is known (§2.2)."""
        return f"[{self.category}] {self.description}" if self.category else self.description

    @property
    def meta(self) -> Mapping[str, Any]:
        return self.manifest.meta


def _helpers_use_db(entry: Path, files: frozenset[str] | None) -> bool:
    """Whether a sibling module of the entry reads ``db``/``db_factory`` (helpers that get the context)."""
    names = files if files is not None else frozenset(p.name for p in entry.parent.glob("*.py"))
    siblings = sorted(n for n in names if n.endswith(".py") and n != entry.name)
    return any(uses_db_text((entry.parent / n).read_text(encoding="utf-8", errors="replace")) for n in siblings)


def _first_body_line(body: str) -> str:
    for line in body.splitlines():
        text = line.strip()
        if text and not text.startswith("#") and text != "---":
            return text[:300]
    return ""


def _has_file(skill_dir: Path, name: str, files: frozenset[str] | None) -> bool:
    """Whether the skill folder holds a file, from its listing when the walk already made one."""
    return name in files if files is not None else (skill_dir / name).is_file()


def _exec_spec(skill_dir: Path, meta: Mapping[str, Any], warnings: list[str], files: frozenset[str] | None) -> ExecSpec:
    """§2.3 / the issue: ``exec: {config, primary: {type, command}, timeout}``, else handler.py, else no code."""
    raw = meta.get("exec")
    spec = raw if isinstance(raw, Mapping) else {}
    if raw is not None and not isinstance(raw, Mapping):
        warnings.append("'exec' must be a mapping {config, primary, timeout}; ignored")
    raw_primary = spec.get("primary")
    primary: Mapping[str, Any] = raw_primary if isinstance(raw_primary, Mapping) else {}
    timeout = spec.get("timeout")
    try:
        timeout_s = float(timeout) if timeout not in (None, "") else None
    except (TypeError, ValueError):
        warnings.append(f"exec.timeout {timeout!r} is not a number of seconds; the default applies")
        timeout_s = None
    declared = str(primary.get("type") or spec.get("type") or "").strip().upper() or None
    command = primary.get("command") if isinstance(primary.get("command"), str) else None
    config = spec.get("config")
    config_path = (skill_dir / str(config)).resolve() if config else None
    if config_path is not None and not config_path.is_relative_to(skill_dir.resolve()):
        warnings.append(f"exec.config {config!r} points outside the skill folder; ignored")
        config_path = None
    elif config_path is None and declared in (None, "PYTHON") and _has_file(skill_dir, "handler.py", files):
        config_path = skill_dir / "handler.py"
    exec_type = declared
    if exec_type is None and config_path is not None:
        exec_type = EXTENSION_TYPES.get(config_path.suffix.lower())
        if exec_type is None:
            warnings.append(f"exec.config {config!r} has an unknown extension; declare exec.primary.type")
    server, tool = (spec.get("server"), spec.get("tool")) if exec_type == "MCP" else (None, None)
    if exec_type == "MCP" and not (isinstance(server, str) and server and isinstance(tool, str) and tool):
        warnings.append("exec type MCP needs 'server' and 'tool', e.g. exec: {type: MCP, server: crm, tool: search}")
        server = tool = None
    return ExecSpec(
        type=exec_type,
        config=config_path,
        command=command,
        timeout=timeout_s,
        server=server if isinstance(server, str) else None,
        tool=tool if isinstance(tool, str) else None,
    )


def _category(meta: Mapping[str, Any], skill_dir: Path, root: Path) -> str | None:
    declared = meta.get("category")
    if isinstance(declared, str) and declared.strip():
        return declared.strip()
    parent, top = str(skill_dir.parent), str(root)
    if parent == top or not parent.startswith(top + os.sep):
        return None
    return parent[len(top) + 1 :].replace(os.sep, "/")


def _aliases(meta: Mapping[str, Any]) -> tuple[str, ...]:
    return _names(meta.get("aliases"))


def _names(value: Any) -> tuple[str, ...]:
    """A list of names (or one comma-separated string), stripped, without duplicates."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return ()
    return tuple(dict.fromkeys(str(v).strip() for v in value if str(v).strip()))


def _skillyard_block(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata.skillyard``: what a skill declares to this host only."""
    metadata = meta.get("metadata")
    block = metadata.get("skillyard") if isinstance(metadata, Mapping) else None
    return block if isinstance(block, Mapping) else {}


def _secret_configs(meta: Mapping[str, Any]) -> tuple[str, ...]:
    """``metadata.skillyard.secret_configs``: config keys the skill declares secret (always encrypted)."""
    return _names(_skillyard_block(meta).get("secret_configs"))


def _trigger_type(meta: Mapping[str, Any]) -> str:
    trigger = meta.get("trigger-type") or meta.get("trigger_type")
    if trigger is None and isinstance(meta.get("trigger"), Mapping):
        trigger = meta["trigger"].get("type")
    return str(trigger).strip().lower() if trigger not in (None, "") else "explicit"


def _description(value: Any, warnings: list[str]) -> str:
    """The frontmatter description as text: a YAML list (a description split over items) is joined with spaces."""
    if isinstance(value, list):
        warnings.append("description is a list; write it as one text (joined here with spaces)")
        return " ".join(str(item).strip() for item in value if item is not None and str(item).strip())
    return str(value or "").strip()


def _output_schema(meta: Mapping[str, Any], warnings: list[str]) -> dict[str, Any] | None:
    """The declared schema of the skill's envelope (served as MCP's ``outputSchema``); a schema that is not an
    object schema is left out with a warning, since MCP clients check results against it."""
    value = meta.get("output_schema")
    if value is None:
        return None
    if not isinstance(value, Mapping) or value.get("type", "object") != "object":
        warnings.append('output_schema is not a JSON Schema of an object ({"type": "object", ...}); ignored')
        return None
    return {"type": "object", **value}


def build_skill(
    skill_dir: Path,
    root: Path,
    manifest: Manifest,
    root_source: str,
    version: str = "",
    files: frozenset[str] | None = None,
) -> Skill:
    """Resolve a manifest into a Skill: name, type, exec spec, schema, requirements and every warning.

    ``files`` names the files at the top of the folder when the caller listed it already (saves a stat each).
    """
    meta = manifest.meta
    warnings = list(manifest.warnings)
    errors = [manifest.error] if manifest.error else []
    name = str(meta.get("name") or "").strip() or skill_dir.name
    description = _description(meta.get("description"), warnings)
    if not description:
        description = _first_body_line(manifest.body)
        warnings.append(
            "no description in the frontmatter; using the first line of the body"
            if description
            else "no description: add 'description:' saying when to use this skill"
        )
    exec_spec = _exec_spec(skill_dir, meta, warnings, files)
    code = CodeFacts()
    entry_file = exec_spec.config
    listed = files is not None and entry_file is not None and entry_file.parent == skill_dir
    if entry_file is not None:
        if not (entry_file.name in files if listed and files is not None else entry_file.is_file()):
            errors.append(f"exec.config {exec_spec.config} does not exist; fix the path (relative to the skill folder)")
        elif exec_spec.type == "HTTP":
            try:
                load_spec(entry_file)
            except HttpSpecError as exc:
                errors.append(str(exc))
        elif exec_spec.type == "PYTHON":
            code = scan_file(entry_file, probe=True)
            if code.syntax_error:
                errors.append(f"the handler does not parse: {code.syntax_error}")
            elif not code.uses_db and (
                as_bool(meta.get("uses_db", False)) or _helpers_use_db(entry_file, files if listed else None)
            ):
                code = dataclasses.replace(code, uses_db=True)
    skill_type = str(meta.get("skill_type") or "").strip().lower()
    if skill_type and skill_type not in SKILL_TYPES:
        warnings.append(f"unknown skill_type {skill_type!r} (known: {', '.join(SKILL_TYPES)}); inferred instead")
        skill_type = ""
    if not skill_type:
        skill_type = "handler" if exec_spec.type else "skill_md"
    if skill_type == "handler" and exec_spec.type == "PYTHON" and not code.syntax_error and entry_file:
        if code.is_cli:
            exec_spec = dataclasses.replace(exec_spec, python_cli=True)
        elif code.entry is None and not errors:
            warnings.append(
                f"{entry_file.name} has no entry function (execute/run/handler/main/handle): "
                "the skill is downgraded to skill_md and its code never runs"
            )
            skill_type, exec_spec = "skill_md", ExecSpec(timeout=exec_spec.timeout)
    if skill_type != "handler":
        exec_spec = ExecSpec(timeout=exec_spec.timeout)
    elif exec_spec.type is None:
        warnings.append("skill_type is handler but no code was found; treated as skill_md")
        skill_type = "skill_md"
    if skill_type == "skill_md" and manifest.size > LONG_SKILL_MD:
        warnings.append(
            f"SKILL.md has {manifest.size} characters (over {LONG_SKILL_MD}): only the head is injected; "
            "move details to references/ and say when to read them"
        )
    schema = build_schema_info(skill_dir, code.input_schema, meta, _has_file(skill_dir, "schema.json", files))
    warnings += schema.warnings
    output_schema = _output_schema(meta, warnings)
    if schema.error:
        errors.append(schema.error)
    source = meta.get("source")
    return Skill(
        name=name,
        description=description,
        dir=skill_dir,
        root=root,
        manifest=manifest,
        skill_type=skill_type,
        exec=exec_spec,
        code=code,
        schema=schema,
        requires=parse_requirements(meta),
        category=_category(meta, skill_dir, root),
        source=source.strip() if isinstance(source, str) and source.strip() else root_source,
        trigger_type=_trigger_type(meta),
        model_invocation_disabled=as_bool(
            meta.get("disable-model-invocation", meta.get("disable_model_invocation", False))
        ),
        aliases=_aliases(meta),
        is_async=as_bool(meta.get("async", False)),
        force_raw_prompt=as_bool(meta.get("force_raw_prompt", False)),
        offload=as_bool(meta.get("offload", True)),
        materialize=as_bool(meta.get("materialize", True)),
        secret_configs=_secret_configs(meta),
        network=as_bool(_skillyard_block(meta).get("network", False)),
        read_only=as_bool(meta.get("read_only", False)),
        output_schema=output_schema,
        warnings=tuple(warnings),
        error="; ".join(errors) or None,
        version=version,
    )
