"""Publish-time checks of what §16 leaves to authors (contract spec §16, orchestration requirements §2).

Each problem names the skill, the tool, the argument path, the rule and the fix. ``error`` problems make
``skillyard agent check`` fail; ``warning`` problems are reported only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .contract import ArgContract, MissingAction, SourceType, SuccessOp, ToolContract
from .expressions import Prefix
from .loader import ContractSkill, LoadedAgent, contract_skills_by_key

if TYPE_CHECKING:
    from ..yard import SkillYard


@dataclass(frozen=True)
class PreflightProblem:
    """One preflight finding: where (skill, tool, argument path), which rule, and what to do."""

    skill: str
    tool: str
    arg: str
    rule: str
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        where = "/".join(p for p in (self.skill, self.tool, self.arg) if p)
        return f"{self.severity}: {where} ({self.rule}): {self.message}"


def schema_has_path(schema: Mapping[str, Any], path: str) -> bool | None:
    """Whether an input schema declares ``a.b`` / ``lines[].x``; None when the schema does not say (free object)."""
    node: Any = schema
    for raw in path.split("."):
        is_list = raw.endswith("[]")
        name = raw[:-2] if is_list else raw
        props = node.get("properties") if isinstance(node, Mapping) else None
        if not isinstance(props, Mapping) or not props:
            return None
        if name not in props:
            extra = node.get("additionalProperties")
            return None if extra is True or (isinstance(extra, Mapping) and bool(extra)) else False
        node = props[name]
        if is_list:
            if not isinstance(node, Mapping):
                return None
            if node.get("type") not in (None, "array") or not isinstance(node.get("items"), Mapping):
                return False if node.get("type") not in (None, "array") else None
            node = node["items"]
    return True


class _Checker:
    def __init__(self, yard: SkillYard, agent: LoadedAgent) -> None:
        self.yard = yard
        self.agent = agent
        self.problems: list[PreflightProblem] = []
        self.catalog_keys = set(contract_skills_by_key(yard)[0])

    def add(self, skill: str, tool: str, arg: str, rule: str, message: str, severity: str = "error") -> None:
        self.problems.append(PreflightProblem(skill, tool, arg, rule, message, severity))

    def schema(self, name: str) -> Mapping[str, Any] | None:
        found = self.yard.catalog.resolve(name)
        if found is None:
            return None
        skill, sub = found
        return skill.schema.subcommands.get(sub, {}) if sub else skill.schema.full

    def check_path(self, cs: ContractSkill, tool: str, arg: str, owner: str, rule: str, what: str) -> None:
        schema = self.schema(owner)
        if schema is None or schema_has_path(schema, arg) is not False:
            return
        props = ", ".join(sorted(schema.get("properties", {}))) or "none"
        self.add(
            cs.skill_key,
            tool,
            arg,
            rule,
            f"{what} {arg!r} is not a parameter of tool {owner!r} (its input schema has: {props}); "
            "fix the path or the tool's schema",
        )

    def run(self) -> list[PreflightProblem]:
        for cs in self.agent.skills.values():
            self.tool_names(cs)
            self.references(cs)
            for name, tool in cs.contract.tools.items():
                self.tool(cs, name, tool)
            self.inputs(cs)
        return self.problems

    def tool_names(self, cs: ContractSkill) -> None:
        for name in cs.tool_names:
            found = self.yard.catalog.resolve(name)
            if found is None:
                self.add(
                    cs.skill_key,
                    name,
                    "",
                    "P0.tool_missing",
                    f"business tool {name!r} in 'tools:' is not a skill in any root; add the skill folder "
                    "(--skills-dir, the agent's skills/ folder) or fix the name",
                )
            elif found[0].error:
                self.add(cs.skill_key, name, "", "P0.tool_missing", f"tool {name!r} is broken: {found[0].error}")
            if name.startswith("builtin_"):
                self.add(
                    cs.skill_key, name, "", "§1.2", f"{name!r} looks like a builtin tool; list only business tools"
                )
            if name not in cs.contract.tools:
                self.add(
                    cs.skill_key,
                    name,
                    "",
                    "P0.uncontracted_read",
                    f"tool {name!r} has no entry in contract.tools: it runs read-only, unchecked and without a "
                    'catalog description; add a tool contract, or declare it call-only: "tools": {"'
                    + name
                    + '": {"callOnly": true}}',
                    "warning",
                )
        for name in cs.contract.tools:
            if name not in cs.tool_names:
                self.add(
                    cs.skill_key,
                    name,
                    "",
                    "§4",
                    f"contract.tools has {name!r} but the skill's 'tools:' does not list it, so the node can never "
                    "call it; add it to 'tools:' in SKILL.md or remove the tool contract",
                )

    def references(self, cs: ContractSkill) -> None:
        target = cs.contract.target
        if target is not None and target not in cs.tool_names:
            self.add(
                cs.skill_key,
                target,
                "",
                "P0.target_not_bound",
                f"target {target!r} is not in the skill's 'tools:' ({', '.join(cs.tool_names) or 'none'}), "
                "so at run time it counts as unset; add the tool to 'tools:' or fix target",
            )

    def tool(self, cs: ContractSkill, name: str, tool: ToolContract) -> None:
        key = cs.skill_key
        if tool.success is not None:
            if tool.success.op is None:
                self.add(key, name, "", "preflight.success_op", "success has no 'op'; set one of EQ, NE, IN, …")
            elif tool.success.op in (SuccessOp.IN, SuccessOp.NOT_IN) and not isinstance(tool.success.value, list):
                self.add(key, name, "", "§6.1", f"success.op {tool.success.op} needs an array 'value'")
        for path in tool.idempotency_key:
            self.check_path(cs, name, path, name, "preflight.idempotency_key", "idempotencyKey path")
        if tool.verify is not None:
            verify = tool.verify.tool
            checked = cs.contract.tools.get(verify)
            if checked is not None and checked.success is None:
                self.add(
                    key,
                    name,
                    "",
                    "§6.4",
                    f"verify tool {verify!r} has no success condition, so a lookup that finds nothing would count "
                    "the write as done; give it a success that fails on an empty result",
                    "warning",
                )
            if verify not in cs.tool_names:
                self.add(
                    key,
                    name,
                    "",
                    "P0.verify_tool_not_bound",
                    f"verify tool {verify!r} is not in the skill's 'tools:'; add it so the write can be checked",
                )
            for verify_arg, spec in tool.verify.args.items():
                self.check_path(cs, name, verify_arg, verify, "preflight.verify_args", "verify.args key")
                if spec.from_expr is not None and spec.from_expr.prefix is Prefix.CALL:
                    self.check_path(cs, name, spec.from_expr.path, name, "preflight.verify_args", "verify.args from")
        self.doc_keys(cs, name, tool)
        found = self.yard.resolve(name)
        secret = set(found[0].schema.secret_params) if found is not None else set()
        for path, arg_contract in tool.args.items():
            self.check_path(cs, name, path, name, "P0.arg_path_missing", "argument path")
            self.arg_source(cs, name, path, arg_contract)
            top = path.split(".", 1)[0].removesuffix("[]")
            if top in secret:
                self.add(
                    key,
                    name,
                    path,
                    "preflight.credential_arg",
                    f"{name!r} treats {top!r} as a credential (its name contains key/token/secret/password/"
                    "credential/auth): the platform strips it from every call and fills it from the skill's configs, "
                    "so this contract's value never arrives; rename the parameter (e.g. author → writer) or mark it "
                    '"x-secret": false in the schema',
                )

    def doc_keys(self, cs: ContractSkill, name: str, tool: ToolContract) -> None:
        """The doc-runtime-contracts keys: the poll tool is bound and takes the id, the named arguments exist."""
        key = cs.skill_key
        task = tool.async_task
        if task is not None:
            if task.poll_tool not in cs.tool_names:
                self.add(
                    key,
                    name,
                    "",
                    "P0.poll_tool_not_bound",
                    f"asyncTask.pollTool {task.poll_tool!r} is not in the skill's 'tools:'; add it so the task can be "
                    "checked (without it the write stays uncertain)",
                )
            self.check_path(cs, name, task.id_arg, task.poll_tool, "preflight.async_task", "asyncTask.idArg")
            for spec, what in ((task.done_when, "doneWhen"), (task.failed_when, "failedWhen")):
                if spec is not None and spec.op is None:
                    self.add(key, name, "", "preflight.success_op", f"asyncTask.{what} has no 'op'; set EQ, IN, …")
        if tool.paging is not None:
            self.check_path(cs, name, tool.paging.cursor_arg, name, "preflight.paging", "paging.cursorArg")
        export = tool.export
        if export is not None:
            self.check_path(cs, name, export.path_arg, name, "preflight.export", "export.pathArg")
            if export.overwrite_arg is not None:
                self.check_path(cs, name, export.overwrite_arg, name, "preflight.export", "export.overwriteArg")
                arg = tool.args.get(export.overwrite_arg)
                if arg is None or SourceType.USER not in arg.sources:
                    self.add(
                        key,
                        name,
                        export.overwrite_arg,
                        "preflight.export",
                        f"export.overwriteArg {export.overwrite_arg!r} only overwrites when its value comes from the "
                        f'user, and its argument contract does not allow USER; add "{export.overwrite_arg}": '
                        '{"sources": ["USER"], "required": false} to args',
                        "warning",
                    )

    def arg_from_declared(self, cs: ContractSkill, name: str, path: str, arg: ArgContract) -> None:
        """``from: inputs.x`` / ``outputs.x`` must name an input / output the contract declares: otherwise the
        binding never succeeds, and without MODEL in sources every call is refused."""
        expr = arg.from_expr
        if expr is None or expr.prefix not in (Prefix.INPUTS, Prefix.OUTPUTS) or not expr.parts:
            return
        declared = cs.contract.inputs if expr.prefix is Prefix.INPUTS else cs.contract.outputs
        head = expr.parts[0].partition("[]")[0]
        if head in declared:
            return
        kind = expr.prefix.value[:-1]
        names = ", ".join(declared) or "none"
        can_fill = SourceType.MODEL in arg.sources
        self.add(
            cs.skill_key,
            name,
            path,
            "preflight.arg_from",
            f"'from' ({expr.text}) names no declared {kind} (declared: {names}), so the binding never succeeds"
            + ("; the model's value is used instead" if can_fill else " and every call is refused")
            + f"; declare the {kind} {head!r} or fix the name",
            "error" if arg.required and not can_fill else "warning",
        )

    def arg_source(self, cs: ContractSkill, name: str, path: str, arg: ArgContract) -> None:
        key = cs.skill_key
        bound = arg.from_expr is not None or arg.has_const
        sources = set(arg.sources)
        if not bound and not sources:
            self.add(
                key,
                name,
                path,
                "preflight.arg_source",
                "the argument has no 'from', 'const' or 'sources', so every value the model gives is rejected "
                '(PARAM_PROVENANCE_REJECTED); add "sources" (e.g. ["USER"] or ["EVIDENCE"]) or "from"',
                "error" if arg.required else "warning",
            )
        elif not bound and sources <= {SourceType.PLATFORM, SourceType.CONTRACT}:
            self.add(
                key,
                name,
                path,
                "preflight.arg_source",
                "PLATFORM and CONTRACT sources only come from 'from'/'const', so no value can ever match; use "
                '"from": "platform.<field>" or "const"',
            )
        elif arg.from_expr is not None and sources and SourceType.MODEL not in sources:
            if SourceType.USER in sources:
                msg = (
                    f"with 'from' ({arg.from_expr}) and sources without MODEL, a failed binding makes the runtime "
                    'ask the user again and again (the answer still counts as MODEL); add "MODEL" to sources or '
                    "drop them"
                )
            else:
                msg = (
                    f"'sources' are not consulted when 'from' ({arg.from_expr}) is set; a failed binding rejects "
                    'the call. Add "MODEL" to let the model fill it, or drop sources'
                )
            self.add(key, name, path, "preflight.arg_source", msg, "warning")
        self.arg_from_declared(cs, name, path, arg)
        missing = arg.missing
        if arg.required and missing.action is MissingAction.CALL_TOOL:
            if missing.tool is None:
                self.add(
                    key,
                    name,
                    path,
                    "§5.5",
                    "missing.action is CALL_TOOL but missing.tool is empty, so a missing value is let through; "
                    "name the query tool",
                    "warning",
                )
            elif missing.tool == name:
                self.add(key, name, path, "§5.5", f"missing.tool {missing.tool!r} is the tool itself; name a query")
            elif missing.tool not in cs.tool_names:
                self.add(
                    key,
                    name,
                    path,
                    "P0.missing_tool_not_bound",
                    f"missing.tool {missing.tool!r} is not in the skill's 'tools:'; add it or name another tool",
                )

    def inputs(self, cs: ContractSkill) -> None:
        for name, spec in cs.contract.inputs.items():
            if spec.provider is None:
                continue
            if spec.provider == cs.skill_key:
                self.add(cs.skill_key, "", f"inputs.{name}", "§7", "inputs.provider must not be the skill itself")
            elif spec.provider not in self.agent.skills:
                elsewhere = spec.provider in self.catalog_keys
                self.add(
                    cs.skill_key,
                    "",
                    f"inputs.{name}",
                    "P0.provider_foreign" if elsewhere else "P0.provider_missing",
                    f"inputs.provider {spec.provider!r} is "
                    + (
                        "a skill of the catalog but not of agent "
                        if elsewhere
                        else "no skill of any root, nor of agent "
                    )
                    + f"{self.agent.profile.agent_code!r} (PROVIDER_UNAVAILABLE at planning); add it to the agent's "
                    "skills (AGENT.md 'skills') or remove inputs.provider",
                )


def preflight_agent(yard: SkillYard, agent: LoadedAgent) -> list[PreflightProblem]:
    """Check every loaded skill of an agent against its tools' real schemas and the agent's skill list."""
    return _Checker(yard, agent).run()
